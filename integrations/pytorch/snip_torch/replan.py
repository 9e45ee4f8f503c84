"""The paper's loop on the user's own cluster: every N steps collect a statistics round, have
`snip solve` choose FP8/FP4 per layer under the FP4 budget, and switch the model to the new
plan at the next step boundary (the round itself changes nothing)."""
import json
from pathlib import Path
from typing import List, Optional, Sequence

from torch import nn

from .cli import run_snip
from .plan import apply_plan, read_plan, set_step
from .stats import _dist, collect_stats


class Replanner:
    """Call `step_boundary(step, batch)` before every training step's forward pass.

    Every `every` steps (and at step `first`) it runs collect_stats on `batch` (the coming
    step's batch, as `snip train` does), writes workdir/stats_STEP.json, runs
    `snip solve --stats ... --budget BUDGET --out workdir/plan_STEP.json` on rank 0 and applies
    the plan on every rank (the plan is broadcast, no shared filesystem needed). It also sets
    every quantized layer's step (stochastic-rounding key) each call."""

    def __init__(self, model: nn.Module, optimizer, every: int, budget: float, workdir, *,
                 recipe: str = "snip", lam: Optional[float] = None, solve_args: Sequence[str] = (),
                 snip: Optional[str] = None, first: int = 0, **collect_kwargs):
        if every < 1:
            raise ValueError("Replanner: every must be >= 1 step")
        if not 0.0 <= budget <= 1.0:
            raise ValueError(f"Replanner: budget {budget} is not an FP4 FLOP fraction in [0, 1]")
        self.model, self.optimizer, self.every, self.budget = model, optimizer, every, budget
        self.workdir = Path(workdir)
        self.recipe, self.lam, self.solve_args, self.snip, self.first = recipe, lam, list(solve_args), snip, first
        self.collect_kwargs = collect_kwargs
        self.history: List[dict] = []  # {step, stats, plan, fp4_fraction}

    def due(self, step: int) -> bool:
        return step >= self.first and (step - self.first) % self.every == 0

    def step_boundary(self, step: int, batch) -> Optional[dict]:
        """Re-plans when due; returns the applied plan dict (or None)."""
        set_step(self.model, step)
        if not self.due(step):
            return None
        d = _dist()
        rank = d.get_rank() if d else 0
        stats_path = self.workdir / f"stats_{step:07d}.json"
        plan_path = self.workdir / f"plan_{step:07d}.json"
        collect_stats(self.model, batch, self.optimizer, step=step, recipe=self.recipe, out_path=stats_path,
                      **self.collect_kwargs)
        payload = [None]
        if rank == 0:
            args = ["solve", "--stats", stats_path, "--budget", self.budget, "--out", plan_path]
            if self.lam is not None:
                args += ["--lambda", self.lam]
            try:
                run_snip(args + self.solve_args, self.snip)
                payload = [json.loads(plan_path.read_text())]
            except Exception as e:  # every rank must learn about the failure, not hang
                payload = [{"error": str(e)}]
        if d is not None and d.get_world_size() > 1:
            d.broadcast_object_list(payload, src=0)
        plan = payload[0]
        if "error" in plan:
            raise RuntimeError(f"re-planning at step {step} failed: {plan['error']}")
        read_plan(plan)
        apply_plan(self.model, plan, recipe=self.recipe)
        set_step(self.model, step)
        self.history.append({"step": step, "stats": str(stats_path), "plan": str(plan_path),
                             "fp4_fraction": plan.get("achieved_fp4_fraction")})
        return plan
