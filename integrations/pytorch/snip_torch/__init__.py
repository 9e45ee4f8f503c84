"""snip_torch: the SNIP Workbench's bridge into PyTorch training (issue 8).

- formats / quant: FORMATS.md numerics, bit-identical to `snip quantize`.
- apply_plan: fake-quantized linear layers following a `snip-plan/1` file.
- collect_stats: one SNIP statistics round (METHOD.md section 4) -> `snip-stats/1`.
- Replanner: collect, `snip solve`, apply the new plan at a step boundary.
"""
from .formats import RngKey, bf16_round, round_elem  # noqa: F401
from .quant import QuantSpec, QuantError, fake_quantize, recipe_spec  # noqa: F401
from .plan import apply_plan, current_plan, read_plan, set_step, uniform_plan  # noqa: F401,E402
from .qlinear import QuantLinear, RecipeOptions  # noqa: F401,E402
from .stats import collect_stats, write_stats  # noqa: F401,E402
from .replan import Replanner  # noqa: F401,E402
