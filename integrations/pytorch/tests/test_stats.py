"""collect_stats on one process: the round leaves weights, gradients, optimizer state and the
plan exactly as they were; the curvature does not depend on σ_η (METHOD.md section 4);
bad arguments are errors that say what to fix."""
import sys
import unittest
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from snip_torch import apply_plan, collect_stats, current_plan, uniform_plan  # noqa: E402
from snip_torch.qlinear import QuantLinear  # noqa: E402
from snip_torch.tiny_llama import LlamaConfig, LlamaForCausalLM  # noqa: E402

CFG = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
                  num_key_value_heads=2, vocab_size=64)


def trained(plan=None):
    torch.manual_seed(0)
    m = LlamaForCausalLM(CFG)
    if plan:
        apply_plan(m, uniform_plan(m, plan))
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    x = torch.randint(0, 64, (4, 33), generator=torch.Generator().manual_seed(2))
    batch = (x[:, :-1], x[:, 1:])
    for _ in range(5):
        loss = torch.nn.functional.cross_entropy(m(batch[0]).reshape(-1, 64), batch[1].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return m, opt, batch


class StatsTest(unittest.TestCase):
    def test_round_changes_nothing(self):
        for plan in (None, "fp4"):
            with self.subTest(plan=plan):
                m, opt, batch = trained(plan)
                before_p = {k: v.clone() for k, v in m.state_dict().items()}
                before_g = [p.grad.clone() for p in m.parameters()]
                before_o = {id(p): {k: v.clone() for k, v in st.items()} for p, st in opt.state.items()}
                before_plan = current_plan(m)
                s = collect_stats(m, batch, opt, step=5)
                self.assertEqual(len(s["layers"]), 7)
                self.assertTrue(all(torch.equal(before_p[k], v) for k, v in m.state_dict().items()))
                self.assertTrue(all(torch.equal(a, p.grad) for a, p in zip(before_g, m.parameters())))
                for p, st in opt.state.items():
                    self.assertTrue(all(torch.equal(before_o[id(p)][k], v) for k, v in st.items()))
                self.assertEqual(current_plan(m), before_plan)
                self.assertEqual(isinstance(m.model.layers[0].mlp.up_proj, QuantLinear), plan is not None)
                fp4, fp8 = s["layers"][5]["per_precision"]["fp4"], s["layers"][5]["per_precision"]["fp8"]
                self.assertGreater(fp4["err_fprop_x"], 2 * fp8["err_fprop_x"])
                self.assertEqual(set(s["layers"][3]["per_precision"]["fp4"]) >= {"sib_dg_sq.q", "sib_dg_sq.k",
                                                                                 "sib_dg_sq.v"}, True)
                self.assertIn("sib_dg_sq.gate", s["layers"][6]["per_precision"]["fp8"])

    def test_curvature_does_not_depend_on_sigma_eta(self):
        m, opt, batch = trained()
        c1 = collect_stats(m, batch, opt, sigma_eta_rel=1e-2, precisions=())["globals"]["curvature"]
        c3 = collect_stats(m, batch, opt, sigma_eta_rel=3e-2, precisions=())["globals"]["curvature"]
        self.assertGreater(c1, 0)
        self.assertLess(abs(c1 - c3), 0.05 * abs(c1))

    def test_bad_arguments(self):
        m, opt, batch = trained()
        with self.assertRaisesRegex(ValueError, "noise_passes"):
            collect_stats(m, batch, opt, noise_passes=0)
        with self.assertRaisesRegex(ValueError, "learning rate"):
            collect_stats(m, batch, opt, lr=0.0)
        with self.assertRaisesRegex(ValueError, "optimizer"):
            collect_stats(m, batch, torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))]))


if __name__ == "__main__":
    unittest.main()
