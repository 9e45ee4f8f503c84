"""The re-planning loop: the example script trains a few steps on one process, re-planning
every 2 steps through `snip solve`; the plans are applied at the step boundary and the
statistics files are complete snip-stats/1 rounds."""
import json
import sys
import tempfile
import unittest
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from snip_torch import Replanner, current_plan  # noqa: E402
from snip_torch.cli import SnipNotFound, find_snip  # noqa: E402
from snip_torch.tiny_llama import LlamaConfig, LlamaForCausalLM  # noqa: E402


class ReplanTest(unittest.TestCase):
    def setUp(self):
        try:
            find_snip()
        except SnipNotFound as e:
            self.skipTest(str(e))

    def test_example_script_replans_every_n_steps(self):
        import train_llama
        with tempfile.TemporaryDirectory() as d:
            text = Path(d) / "text.txt"
            text.write_text("In the beginning God created the heaven and the earth. " * 50)
            train_llama.main(["--data", str(text), "--steps", "4", "--replan-every", "2", "--budget", "0.5",
                              "--workdir", d, "--batch-size", "2", "--seq-len", "16", "--hidden", "32",
                              "--layers", "1", "--log-every", "100"])
            names = sorted(p.name for p in Path(d).iterdir())
            self.assertEqual([n for n in names if n.startswith("plan_")], ["plan_0000000.json", "plan_0000002.json"])
            stats = json.loads((Path(d) / "stats_0000002.json").read_text())
            self.assertEqual(stats["step"], 2)
            self.assertEqual(len(stats["layers"]), 7)
            plan = json.loads((Path(d) / "plan_0000002.json").read_text())
            self.assertAlmostEqual(plan["achieved_fp4_fraction"], 0.5, delta=0.2)
            self.assertTrue((Path(d) / "final" / "model.safetensors").exists())

    def test_plan_switches_only_at_due_boundaries(self):
        torch.manual_seed(0)
        m = LlamaForCausalLM(LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, vocab_size=64))
        opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
        x = torch.randint(0, 64, (2, 17))
        with tempfile.TemporaryDirectory() as d:
            r = Replanner(m, opt, every=3, budget=1.0, workdir=d, first=1)
            self.assertIsNone(r.step_boundary(0, (x[:, :-1], x[:, 1:])))
            self.assertEqual(current_plan(m), {})  # nothing applied before the first round
            plan = r.step_boundary(1, (x[:, :-1], x[:, 1:]))
            self.assertEqual(plan["achieved_fp4_fraction"], 1.0)
            self.assertTrue(all(g == "fp4" for p in current_plan(m).values() for g in p.values()))
            self.assertIsNone(r.step_boundary(2, (x[:, :-1], x[:, 1:])))
            self.assertEqual(m.model.layers[0].mlp.up_proj.step, 2)  # stochastic-rounding key follows the step
            with self.assertRaises(ValueError):
                Replanner(m, opt, every=0, budget=0.5, workdir=d)


if __name__ == "__main__":
    unittest.main()
