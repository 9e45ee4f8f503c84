"""apply_plan and the fake-quantized linear layer: GEMM roles, reduction-dimension tiling,
BF16 output rounding, plan validation."""
import json
import sys
import tempfile
import unittest
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from snip_torch import formats as F  # noqa: E402
from snip_torch import quant as Q  # noqa: E402
from snip_torch.plan import PlanError, apply_plan, current_plan, fqn_filter, read_plan, uniform_plan  # noqa: E402
from snip_torch.qlinear import QuantLinear  # noqa: E402
from snip_torch.tiny_llama import LlamaConfig, LlamaForCausalLM  # noqa: E402


def ref_gemm(a, b):
    return (a.double() @ b.double()).float()


class QLinearTest(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(160, 48, bias=False)
        with torch.no_grad():  # rows of very different magnitude: row- and column-wise tiles differ
            self.lin.weight.mul_(10.0 ** (torch.rand(48, 1) * 4 - 2))
        self.x = torch.randn(2, 70, 160, requires_grad=True)  # T = 140: partial 128/32/16 tiles

    def run_layer(self, prec, recipe="mx"):
        from snip_torch.qlinear import RecipeOptions
        q = QuantLinear(self.lin, "model.layers.0.self_attn.q_proj", 0, prec, RecipeOptions(recipe))
        y = q(self.x)
        dy = torch.randn_like(y)
        dx, dw = torch.autograd.grad(y, [self.x, q.weight], dy)
        return y, dy, dx, dw

    def test_each_gemm_quantizes_along_its_reduction_dim(self):
        prec = {"fprop": "fp8", "dgrad": "fp4", "wgrad": "bf16"}
        y, dy, dx, dw = self.run_layer(prec)
        X, W, G = self.x.detach().reshape(-1, 160), self.lin.weight.detach(), dy.reshape(-1, 48)
        e8 = lambda a, br, bc, fmt: Q.fake_quantize(a, Q.QuantSpec(fmt, br, bc, "e8m0"))  # noqa: E731
        y_ref = F.bf16_round(ref_gemm(e8(X, 1, 32, "e4m3"), e8(W, 1, 32, "e4m3").t()))   # K runs along columns
        dx_ref = F.bf16_round(ref_gemm(e8(G, 1, 32, "e2m1"), e8(W, 32, 1, "e2m1")))      # N: dY cols, W rows
        dw_ref = F.bf16_round(ref_gemm(F.bf16_round(G).t(), F.bf16_round(X)))            # BF16: no scaling
        for got, ref, what in ((y.reshape(-1, 48), y_ref, "fprop"), (dx.reshape(-1, 160), dx_ref, "dgrad"),
                               (dw, dw_ref, "wgrad")):
            # equal up to FP32 summation order, then one BF16 rounding: at most 1 BF16 ulp apart
            rel = ((got - ref).abs() / ref.abs().clamp(min=1e-3)).max().item()
            self.assertLess(rel, 2 ** -7, what)
        # the wrong tiling direction gives a visibly different dgrad
        wrong = F.bf16_round(ref_gemm(e8(G, 1, 32, "e2m1"), e8(W, 1, 32, "e2m1")))
        self.assertGreater((wrong - dx_ref).abs().max().item(), 1e-3)

    def test_fp32_plan_is_plain_linear(self):
        y, dy, dx, dw = self.run_layer({"fprop": "fp32", "dgrad": "fp32", "wgrad": "fp32"})
        y2 = self.lin(self.x)
        dx2, dw2 = torch.autograd.grad(y2, [self.x, self.lin.weight], dy)
        self.assertTrue(torch.allclose(y, y2, atol=1e-6) and torch.allclose(dx, dx2, atol=1e-6)
                        and torch.allclose(dw, dw2, atol=1e-5))


class HadamardTest(unittest.TestCase):
    def test_rotation_is_the_explicit_matrix_and_cancels_in_wgrad(self):
        from snip_torch.qlinear import HADAMARD16_SIGNS, RecipeOptions, GemmContext, hadamard16_rows, qlinear_wgrad
        a = torch.randn(40, 5)
        H = torch.tensor([[(-1) ** bin(i & j).count("1") for j in range(16)] for i in range(16)], dtype=torch.float64)
        M = H @ torch.diag(torch.tensor(HADAMARD16_SIGNS, dtype=torch.float64)) / 4
        ref = a.double().clone()
        ref[:16], ref[16:32] = M @ ref[:16], M @ ref[16:32]  # rows 32..39: a partial group, untouched
        r = hadamard16_rows(a)
        self.assertLess((r.double() - ref).abs().max().item(), 1e-6)
        self.assertTrue(torch.equal(r[32:], a[32:]))
        # with fp4 wgrad the rotated product estimates the same dW (H is orthogonal)
        dy, x = torch.randn(64, 8), torch.randn(64, 24)
        exact = dy.t() @ x
        ctx = GemmContext(RecipeOptions("nvfp4", hadamard_wgrad=True, bf16_output=False))
        rot = qlinear_wgrad(dy, x, "fp4", ctx)
        self.assertLess(((rot - exact).norm() / exact.norm()).item(), 0.35)
        with self.assertRaisesRegex(ValueError, "nvfp4 option"):
            RecipeOptions("snip", hadamard_wgrad=True)


class ApplyPlanTest(unittest.TestCase):
    def test_wraps_named_layers_and_replans_in_place(self):
        torch.manual_seed(1)
        m = LlamaForCausalLM(LlamaConfig(num_hidden_layers=2))
        params_before = {id(p) for p in m.parameters()}
        plan = uniform_plan(m, "fp8")
        plan["layers"]["model.layers.1.mlp.down_proj"] = {"fprop": "fp4", "dgrad": "fp8", "wgrad": "fp4"}
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "plan.json"
            path.write_text(json.dumps(plan))
            wrapped = apply_plan(m, path)
        self.assertEqual(len(wrapped), 14)
        self.assertIsInstance(m.model.layers[1].mlp.down_proj, QuantLinear)
        self.assertEqual(m.model.layers[1].mlp.down_proj.precisions["fprop"], "fp4")
        self.assertEqual(m.model.layers[1].mlp.down_proj.layer_index, 13)
        self.assertEqual({id(p) for p in m.parameters()}, params_before)  # optimizer state stays valid
        self.assertIn("model.layers.0.self_attn.q_proj.weight", m.state_dict())
        apply_plan(m, uniform_plan(m, "fp4"))
        self.assertIs(m.model.layers[1].mlp.down_proj, wrapped["model.layers.1.mlp.down_proj"])
        self.assertTrue(all(p["wgrad"] == "fp4" for p in current_plan(m).values()))

    def test_bad_plans_are_errors_naming_the_problem(self):
        m = LlamaForCausalLM(LlamaConfig(num_hidden_layers=1))
        bad = uniform_plan(m, "fp8")
        bad["layers"]["model.layers.5.mlp.up_proj"] = {"fprop": "fp8", "dgrad": "fp8", "wgrad": "fp8"}
        with self.assertRaisesRegex(PlanError, "model.layers.5.mlp.up_proj"):
            apply_plan(m, bad)
        with self.assertRaisesRegex(PlanError, "fprop must be one of"):
            read_plan({"format": "snip-plan/1", "layers": {"model.layers.0.mlp.up_proj": {"fprop": "fp6"}}})
        with self.assertRaisesRegex(PlanError, "snip-plan/1"):
            read_plan({"format": "snip-stats/1"})
        partial = uniform_plan(m, "fp4")
        del partial["layers"]["model.layers.0.mlp.up_proj"]
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            apply_plan(m, partial)
        self.assertTrue(any("up_proj" in str(x.message) for x in w))
        self.assertEqual(m.model.layers[0].mlp.up_proj.precisions["fprop"], "bf16")


class FqnFilterTest(unittest.TestCase):
    """torchao's filters see the wrapped names: DDP's "module.", torch.compile's "_orig_mod.",
    FSDP1's "_fsdp_wrapped_module." inside the tree. The filter of a snip-torchao/1 list picks
    exactly the listed layers in each, and never layers.1 for layers.11."""

    def test_the_listed_layers_are_picked_inside_every_usual_wrapper(self):
        cfg = LlamaConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=12, num_attention_heads=2,
                          num_key_value_heads=2, vocab_size=32, max_position_embeddings=16)
        model = LlamaForCausalLM(cfg)
        listed = ["model.layers.1.mlp.up_proj", "model.layers.11.self_attn.q_proj"]

        class Wrapper(torch.nn.Module):  # as DistributedDataParallel holds the model
            def __init__(self, inner, attr):
                super().__init__()
                setattr(self, attr, inner)

        keep = fqn_filter(listed)
        for wrapped in (model, Wrapper(model, "module"), Wrapper(model, "_orig_mod"),
                        Wrapper(Wrapper(model, "_orig_mod"), "module")):
            picked = sorted(fqn for fqn, m in wrapped.named_modules() if isinstance(m, torch.nn.Linear) and keep(fqn))
            self.assertEqual(len(picked), 2, picked)
            self.assertTrue(picked[0].endswith("model.layers.1.mlp.up_proj"), picked)
            self.assertTrue(picked[1].endswith("model.layers.11.self_attn.q_proj"), picked)
        # FSDP1 wraps each decoder layer: the segment sits inside the name.
        self.assertTrue(keep("module.model.layers.1._fsdp_wrapped_module.mlp.up_proj"))
        self.assertFalse(keep("model.layers.11.mlp.up_proj"))
        self.assertFalse(keep("lm_head"))


class TorchaoExampleTest(unittest.TestCase):
    """examples/apply_torchao_plan.py on a plan `snip export --to torchao` wrote: every layer taken by
    one config through the DDP-style wrapper, on this machine's PyTorch (torchao absent: the lists)."""

    def test_the_example_takes_every_layer_of_an_exported_plan_once(self):
        import os
        import subprocess
        snip = os.environ.get("SNIP_BIN")
        if not snip:
            self.skipTest("SNIP_BIN is not set (ctest sets it)")
        with tempfile.TemporaryDirectory() as d:
            layers = {}
            for b in range(2):
                for i, name in enumerate(["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                          "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]):
                    p = "fp4" if (b + i) % 2 else "fp8"
                    layers[f"model.layers.{b}.{name}"] = {"fprop": p, "dgrad": p, "wgrad": p}
            Path(d, "plan.json").write_text(json.dumps({"format": "snip-plan/1", "layers": layers, "recipe": "mx"}))
            out = Path(d, "plan.torchao.json")
            subprocess.run([snip, "export", "--plan", str(Path(d, "plan.json")), "--to", "torchao", "--out", str(out)],
                           check=True)
            example = Path(__file__).resolve().parents[1] / "examples" / "apply_torchao_plan.py"
            # For real where torchao and a GPU are (gpu_check.sh), else the lists only.
            try:
                import torchao  # noqa: F401
                real = torch.cuda.is_available()
            except ImportError:
                real = False
            run = subprocess.run([sys.executable, str(example), str(out), "--layers", "2"] + ([] if real else ["--dry-run"]),
                                 capture_output=True, text=True)
            self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
            self.assertIn("\napplied\n" if real else "torchao not applied", run.stdout)
            self.assertIn("float8: 7 modules -> MXFP8TrainingOpConfig", run.stdout)
            self.assertIn("fp4: 7 modules -> NVFP4TrainingConfig", run.stdout)
            # A plan for another model is caught, not half-applied.
            wrong = subprocess.run([sys.executable, str(example), str(out), "--layers", "1", "--dry-run"],
                                   capture_output=True, text=True)
            self.assertEqual(wrong.returncode, 1, wrong.stdout)
            self.assertIn("is the plan for a model of 1 blocks", wrong.stderr)


if __name__ == "__main__":
    unittest.main()
