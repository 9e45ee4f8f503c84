"""The bridge on an accelerator: everything snip_torch does on SNIP_TORCH_DEVICE (default "cpu")
matches what it does on the CPU, whose numerics the other modules tie to the C++ `snip`.

- Fake quantization: bit for bit, every recipe, precision, GEMM role and operand, rounding
  stochastic too (the counter-based RNG is device-independent).
- A Llama built from the `small` preset's shape (Hugging Face's LlamaForCausalLM when
  transformers is installed, else snip_torch's own), a plan applied: loss and gradients within
  float tolerance of the CPU's (cuBLAS and the CPU's GEMMs sum in different orders).
- collect_stats: the same round on both, within the tolerances test_agreement uses against C++.
- One DDP step of two ranks (gloo: NCCL refuses two ranks on one GPU).

On a machine without the device the module is skipped; integrations/pytorch/gpu_check.sh runs it
(and the rest of the bridge's tests) on CUDA."""
import math
import os
import socket
import sys
import unittest
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from snip_torch import apply_plan, collect_stats, uniform_plan  # noqa: E402
from snip_torch import formats as F  # noqa: E402
from snip_torch import quant as Q  # noqa: E402

DEVICE = os.environ.get("SNIP_TORCH_DEVICE", "cpu")
# The `small` preset's shape (snip/model_config.h), at a reduced vocabulary to keep the CPU side quick.
SMALL = dict(hidden_size=256, intermediate_size=688, num_hidden_layers=6, num_attention_heads=8,
             num_key_value_heads=4, vocab_size=256, max_position_embeddings=256, rms_norm_eps=1e-5,
             rope_theta=10000.0, tie_word_embeddings=False)
ROLES = [("fprop", "activation"), ("fprop", "weight"), ("dgrad", "gradient"), ("dgrad", "weight"),
         ("wgrad", "gradient"), ("wgrad", "activation")]


def device_available() -> bool:
    if DEVICE == "cpu":
        return True
    if DEVICE.startswith("cuda"):
        return torch.cuda.is_available()
    return False


def build_llama():
    try:
        from transformers import LlamaConfig, LlamaForCausalLM  # noqa: F401
        cfg = LlamaConfig(**SMALL, attention_bias=False, mlp_bias=False)
        return LlamaForCausalLM(cfg), "transformers"
    except Exception:  # no transformers (Debian): the bridge's own HF-convention Llama
        from snip_torch.tiny_llama import LlamaConfig, LlamaForCausalLM
        keep = {k: v for k, v in SMALL.items() if k in LlamaConfig.__dataclass_fields__}
        return LlamaForCausalLM(LlamaConfig(**keep)), "snip_torch.tiny_llama"


def logits_of(out):
    return out.logits if hasattr(out, "logits") else out


@unittest.skipUnless(device_available(), f"device {DEVICE} is not available")
class DeviceTest(unittest.TestCase):
    def test_fake_quantization_is_bit_identical_to_the_cpu(self):
        g = torch.Generator().manual_seed(7)
        x = torch.randn(136, 200, generator=g) * torch.logspace(-3, 3, 200)
        for recipe in Q.RECIPES:
            for precision in ("fp8", "fp4"):
                for gemm, operand in ROLES:
                    spec = Q.recipe_spec(recipe, precision, gemm, operand)
                    key = F.RngKey(seed=3, step=5, layer=2, role=1)
                    cpu = Q.fake_quantize(x, spec, key)
                    dev = Q.fake_quantize(x.to(DEVICE), spec, key).cpu()
                    self.assertTrue(torch.equal(cpu.view(torch.int32), dev.view(torch.int32)),
                                    f"{recipe} {precision} {gemm}.{operand}")

    def _model_pair(self):
        torch.manual_seed(0)
        cpu, kind = build_llama()
        dev, _ = build_llama()
        dev.load_state_dict(cpu.state_dict())
        plan = uniform_plan(cpu, "fp8")
        for b in range(0, SMALL["num_hidden_layers"], 2):
            for m in ("mlp.gate_proj", "mlp.up_proj", "self_attn.o_proj"):
                plan["layers"][f"model.layers.{b}.{m}"] = {"fprop": "fp4", "dgrad": "fp4", "wgrad": "fp4"}
        apply_plan(cpu, plan)
        apply_plan(dev, plan)
        return cpu, dev.to(DEVICE), kind

    def test_a_planned_llama_trains_alike_on_the_device(self):
        cpu, dev, kind = self._model_pair()
        x = torch.randint(0, SMALL["vocab_size"], (2, 65), generator=torch.Generator().manual_seed(1))
        losses, grads = [], []
        for model, d in ((cpu, "cpu"), (dev, DEVICE)):
            xb = x.to(d)
            loss = torch.nn.functional.cross_entropy(logits_of(model(xb[:, :-1])).reshape(-1, SMALL["vocab_size"]),
                                                     xb[:, 1:].reshape(-1))
            loss.backward()
            losses.append(loss.item())
            grads.append(torch.cat([p.grad.detach().float().cpu().flatten() for p in model.parameters()]))
        # Fake quantization is bit-identical across devices (test above); the GEMMs between are
        # FP32 on both with different summation orders (cuBLAS, TF32 off by default for matmul in
        # 2.x; the CPU's BLAS), which moves a cross-entropy of order 5 by ~1e-6 relative and the
        # gradient norm by rounding that quantization can amplify at a few grid boundaries:
        # 1e-3 and 5e-2 are far outside that on any device and far inside a real bug.
        self.assertTrue(math.isclose(losses[0], losses[1], rel_tol=1e-3), f"{kind}: {losses}")
        rel = (grads[0] - grads[1]).norm() / grads[0].norm()
        self.assertLess(rel.item(), 5e-2, kind)

    def test_collect_stats_agrees_with_the_cpu(self):
        cpu, dev, _ = self._model_pair()
        x = torch.randint(0, SMALL["vocab_size"], (2, 65), generator=torch.Generator().manual_seed(2))
        rounds = []
        for model, d in ((cpu, "cpu"), (dev, DEVICE)):
            opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
            xb = x.to(d)
            batch = (xb[:, :-1], xb[:, 1:])
            rounds.append(collect_stats(model, batch, opt, noise_passes=1, seed=1))
        a, b = ({layer["name"]: layer for layer in r["layers"]} for r in rounds)
        self.assertEqual(sorted(a), sorted(b))
        compared = 0
        for name in a:
            for p in ("fp8", "fp4"):
                ea, eb = a[name]["per_precision"][p], b[name]["per_precision"][p]
                for key, va in ea.items():
                    if isinstance(va, (int, float)) and not isinstance(va, bool):
                        self.assertTrue(math.isclose(va, eb[key], rel_tol=0.05, abs_tol=1e-6),
                                        f"{name} {p} {key}: {va} vs {eb[key]}")
                        compared += 1
        self.assertGreater(compared, 0)

    def test_one_ddp_step_of_two_ranks(self):
        import torch.multiprocessing as mp
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        mp.spawn(_ddp_worker, args=(2, port, DEVICE), nprocs=2, join=True)


def _ddp_worker(rank, world, port, device):
    import torch.distributed as dist
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        torch.manual_seed(0)
        model, _ = build_llama()
        apply_plan(model, uniform_plan(model, "fp4"))
        model = model.to(device)
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        opt = torch.optim.AdamW(ddp.parameters(), lr=3e-3)
        x = torch.randint(0, SMALL["vocab_size"], (2, 33), generator=torch.Generator().manual_seed(10 + rank)).to(device)
        loss = torch.nn.functional.cross_entropy(logits_of(ddp(x[:, :-1])).reshape(-1, SMALL["vocab_size"]),
                                                 x[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        # The reduced gradients made every rank's weights the same.
        w = torch.cat([p.detach().float().flatten() for p in model.parameters()])
        ws = [torch.zeros_like(w) for _ in range(world)]
        dist.all_gather(ws, w)
        assert torch.equal(ws[0], ws[1]), "ranks diverged after one DDP step"
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    unittest.main()
