"""Apply a snip-torchao/1 plan (`snip export --to torchao`) to a Llama model with torchao.

    python3 apply_torchao_plan.py plan.torchao.json [--layers N] [--dry-run]

The model sits inside a DDP-style wrapper (its names start with `module.`), as in a real job;
`snip_torch.fqn_filter` matches the plan's names through it. With torchao installed (torch 2.x on a
GPU), the `float8` list is converted with the plan's FP8 config and the `fp4` list with
NVFP4TrainingConfig (the configs the export names in "recipes"). Without torchao, as with Debian 12's
CPU PyTorch 1.13, or with --dry-run, it prints which modules each config would take. Either way it
checks that every layer of the plan is taken by exactly one config, and exits 1 if not.
"""
import argparse
import json
import sys
from pathlib import Path

from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from snip_torch import fqn_filter  # noqa: E402
from snip_torch.tiny_llama import LlamaConfig, LlamaForCausalLM  # noqa: E402


class Wrapped(nn.Module):  # what DistributedDataParallel's names look like
    def __init__(self, model):
        super().__init__()
        self.module = model


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("plan", help="a snip-torchao/1 file")
    ap.add_argument("--layers", type=int, default=2, help="blocks of the example model (the plan's)")
    ap.add_argument("--dry-run", action="store_true", help="only print what each config would take")
    args = ap.parse_args()
    plan = json.loads(Path(args.plan).read_text())
    if plan.get("format") != "snip-torchao/1":
        print(f"{args.plan}: not a snip-torchao/1 file (snip export --to torchao writes one)", file=sys.stderr)
        return 1
    model = Wrapped(LlamaForCausalLM(LlamaConfig(num_hidden_layers=args.layers)))
    lists = {key: fqn_filter(plan[key]) for key in ("float8", "fp4")}
    linears = [fqn for fqn, m in model.named_modules() if isinstance(m, nn.Linear)]
    taken = {key: [fqn for fqn in linears if keep(fqn)] for key, keep in lists.items()}
    recipes = plan.get("recipes", {})
    for key, fqns in taken.items():
        r = recipes.get(key, {})
        print(f"{key}: {len(fqns)} modules -> {r.get('config', '?')} ({r.get('apply', '?')}); {r.get('note', '')}")
    # Every listed layer is taken by one config, and no module by two.
    wanted = len(plan["float8"]) + len(plan["fp4"])
    both = set(taken["float8"]) & set(taken["fp4"])
    if both or len(taken["float8"]) + len(taken["fp4"]) != wanted:
        print(f"error: {wanted} layers listed, {len(taken['float8'])} + {len(taken['fp4'])} taken, "
              f"{len(both)} by both: is the plan for a model of {args.layers} blocks?", file=sys.stderr)
        return 1
    try:
        if args.dry_run:
            raise ImportError("--dry-run")
        from torchao import quantize_
        from torchao.float8 import convert_to_float8_training
    except ImportError as e:
        print(f"torchao not applied ({e}): the lists above are what it would convert")
        return 0
    # FP8: the export's config (tensorwise with E4M3 gradients, rowwise, or MXFP8 through quantize_).
    fp8 = recipes["float8"]
    if fp8["apply"] == "convert_to_float8_training":
        import torch
        from torchao.float8 import CastConfig, Float8LinearConfig
        configs = {  # the texts the export writes, built here rather than evaluated
            'Float8LinearConfig.from_recipe_name("rowwise")': lambda: Float8LinearConfig.from_recipe_name("rowwise"),
            "Float8LinearConfig(cast_config_grad_output=CastConfig(target_dtype=torch.float8_e4m3fn))":
                lambda: Float8LinearConfig(cast_config_grad_output=CastConfig(target_dtype=torch.float8_e4m3fn)),
        }
        if fp8["config"] not in configs:
            print(f"error: unknown FP8 config {fp8['config']!r}", file=sys.stderr)
            return 1
        convert_to_float8_training(model, config=configs[fp8["config"]](),
                                   module_filter_fn=lambda m, fqn: lists["float8"](fqn))
    else:
        from torchao.prototype.moe_training.config import MXFP8TrainingOpConfig
        quantize_(model, MXFP8TrainingOpConfig(),
                  filter_fn=lambda m, fqn: isinstance(m, nn.Linear) and lists["float8"](fqn))
    from torchao.prototype.moe_training.nvfp4_training import NVFP4TrainingConfig
    quantize_(model, NVFP4TrainingConfig(), filter_fn=lambda m, fqn: isinstance(m, nn.Linear) and lists["fp4"](fqn))
    print("applied")
    return 0


if __name__ == "__main__":
    sys.exit(main())
