"""snip_torch: the SNIP Workbench's bridge into PyTorch training.

- formats / quant: FORMATS.md numerics, bit-identical to `snip quantize`.
- apply_plan: fake-quantized linear layers following a `snip-plan/1` file.
- collect_stats: one SNIP statistics round (METHOD.md section 4) -> `snip-stats/1`.
- Replanner: collect, `snip solve`, apply the new plan at a step boundary.
"""
from .formats import RngKey, bf16_round, round_elem
from .plan import apply_plan, current_plan, fqn_filter, read_plan, set_step, uniform_plan
from .qlinear import QuantLinear, RecipeOptions
from .quant import QuantError, QuantSpec, fake_quantize, recipe_spec
from .replan import Replanner
from .stats import collect_stats, write_stats

__all__ = ["RngKey", "bf16_round", "round_elem", "apply_plan", "current_plan", "fqn_filter", "read_plan", "set_step",
           "uniform_plan", "QuantLinear", "RecipeOptions", "QuantError", "QuantSpec", "fake_quantize",
           "recipe_spec", "Replanner", "collect_stats", "write_stats"]
