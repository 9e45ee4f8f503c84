"""`snip-plan/1` plans applied to a PyTorch model: every linear layer the plan names (HF Llama
module names, "model.layers.N.self_attn.q_proj" ...) becomes a QuantLinear running fprop,
dgrad and wgrad at the plan's precision per GEMM role (engine/core/include/snip/plan.h)."""
import json
import re
import warnings
from pathlib import Path
from typing import Callable, Dict, Iterator, Optional, Tuple, Union

from torch import nn

from .qlinear import QuantLinear, RecipeOptions
from .quant import PRECISIONS

LAYER_TYPES = ("q", "k", "v", "o", "gate", "up", "down")  # layer index = block·7 + type
_MODULES = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
            "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
_NAME_RE = re.compile(r"(?:^|\.)(model\.layers\.(\d+)\.(" + "|".join(re.escape(m) for m in _MODULES) + r"))$")


class PlanError(ValueError):
    pass


def unwrap(model: nn.Module) -> nn.Module:
    """The module inside DistributedDataParallel / DataParallel wrappers."""
    while hasattr(model, "module") and isinstance(model.module, nn.Module) and not hasattr(model, "lm_head"):
        model = model.module
    return model


def parse_layer_name(name: str) -> Optional[Tuple[str, int, int]]:
    """"...model.layers.3.mlp.up_proj" -> ("model.layers.3.mlp.up_proj", block 3, type 5)."""
    m = _NAME_RE.search(name)
    if not m:
        return None
    return m.group(1), int(m.group(2)), _MODULES.index(m.group(3))


# Segments the usual wrappers put into a module's fully qualified name: DistributedDataParallel
# and DataParallel ("module."), torch.compile ("_orig_mod."), FSDP1 and activation checkpointing
# ("_fsdp_wrapped_module.", "_checkpoint_wrapped_module."). FSDP2 adds none.
WRAPPER_SEGMENTS = ("module", "_orig_mod", "_fsdp_wrapped_module", "_checkpoint_wrapped_module")


def fqn_filter(names) -> Callable[[str], bool]:
    """A filter on fully qualified module names that is true for the Hugging Face layer names in
    `names` (a list of a `snip-torchao/1` export: plan["float8"], plan["fp4"]) whatever wrappers
    the model is in: torchao's module_filter_fn (lambda module, fqn: ...) and quantize_'s
    filter_fn see the wrapped names."""
    wanted = set(names)

    def match(fqn: str) -> bool:
        parsed = parse_layer_name(".".join(s for s in fqn.split(".") if s not in WRAPPER_SEGMENTS))
        return parsed is not None and parsed[0] in wanted

    return match


def linear_layers(model: nn.Module) -> Iterator[Tuple[str, int, nn.Module]]:
    """(HF name, layer index, module) of every selectable linear layer, in index order."""
    found = []
    for full, mod in unwrap(model).named_modules():
        parsed = parse_layer_name(full)
        if parsed and isinstance(mod, (nn.Linear, QuantLinear)):
            name, block, t = parsed
            found.append((block * 7 + t, name, full, mod))
    found.sort()
    for idx, name, _, mod in found:
        yield name, idx, mod


def read_plan(plan: Union[str, Path, dict]) -> dict:
    """Loads and checks a snip-plan/1 file (or an already-parsed dict)."""
    src = "plan"
    if not isinstance(plan, dict):
        src = str(plan)
        try:
            plan = json.loads(Path(plan).read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise PlanError(f"{src}: cannot read the plan ({e}); pass a snip-plan/1 file from `snip solve`"
                            " or `snip export --plan`") from e
    if plan.get("format") != "snip-plan/1":
        raise PlanError(f"{src}: not a plan file (expected \"format\": \"snip-plan/1\")")
    layers = plan.get("layers")
    if not isinstance(layers, dict):
        raise PlanError(f"{src}: missing \"layers\" object")
    for name, p in layers.items():
        if parse_layer_name(name) is None or parse_layer_name(name)[0] != name:
            raise PlanError(f"{src}: '{name}' is not a Llama linear layer name (model.layers.N.self_attn.q_proj ...)")
        for g in ("fprop", "dgrad", "wgrad"):
            if not isinstance(p, dict) or p.get(g) not in PRECISIONS:
                raise PlanError(f"{src}: layers.{name}.{g} must be one of {', '.join(PRECISIONS)}")
    return plan


def _set_submodule(root: nn.Module, path: str, new: nn.Module) -> None:
    parent_path, _, attr = path.rpartition(".")
    parent = root.get_submodule(parent_path) if parent_path else root
    setattr(parent, attr, new)


def apply_plan(model: nn.Module, plan_path: Union[str, Path, dict], recipe: Optional[str] = "snip",
               missing_default: str = "bf16", seed: int = 0, scale_mode: str = "rceil",
               fp8_gradients_e5m2: bool = False, bf16_output: bool = True,
               hadamard_wgrad: bool = False) -> Dict[str, QuantLinear]:
    """Wraps every linear layer the plan names with a QuantLinear at the plan's precisions
    (or updates the precisions of layers already wrapped: re-planning keeps the modules).
    recipe=None takes the plan's own recipe. Layers of the model the plan leaves out run in
    `missing_default` (a warning names them, as snip::resolve_plan does); a plan layer the
    model lacks is an error. Returns {HF name: QuantLinear}."""
    plan = read_plan(plan_path)
    rname = recipe or plan.get("recipe", "snip")
    ro = RecipeOptions(rname, scale_mode, fp8_gradients_e5m2, bf16_output, hadamard_wgrad)
    if recipe and plan.get("recipe") and plan["recipe"] != recipe:
        warnings.warn(f"plan was made for recipe '{plan['recipe']}' but is applied with recipe '{recipe}'")
    root = unwrap(model)
    names = {}
    for full, mod in root.named_modules():
        parsed = parse_layer_name(full)
        if parsed and isinstance(mod, (nn.Linear, QuantLinear)):
            names[parsed[0]] = (full, parsed[1] * 7 + parsed[2], mod)
    for name in plan["layers"]:
        if name not in names:
            raise PlanError(f"plan layer '{name}' does not exist in the model (it has {len(names)} linear layers, "
                            f"blocks 0..{max([v[1] // 7 for v in names.values()], default=-1)}); "
                            "was the plan made for another model?")
    left_out = sorted(set(names) - set(plan["layers"]), key=lambda n: names[n][1])
    if left_out:
        warnings.warn(f"plan leaves out {len(left_out)} layer(s), they run in {missing_default}: "
                      + ", ".join(left_out[:5]) + (" ..." if len(left_out) > 5 else ""))
    out = {}
    for name, (full, idx, mod) in sorted(names.items(), key=lambda kv: kv[1][1]):
        p = plan["layers"].get(name, {g: missing_default for g in ("fprop", "dgrad", "wgrad")})
        prec = {g: p[g] for g in ("fprop", "dgrad", "wgrad")}
        if isinstance(mod, QuantLinear):
            mod.precisions, mod.recipe = prec, ro
            q = mod
        else:
            q = QuantLinear(mod, name, idx, prec, ro, seed)
            _set_submodule(root, full, q)
        out[name] = q
    return out


def uniform_plan(model: nn.Module, precision: str, recipe: str = "snip") -> dict:
    """A snip-plan/1 dict with `precision` on every GEMM of every linear layer of the model."""
    layers = {name: {g: precision for g in ("fprop", "dgrad", "wgrad")} for name, _, _ in linear_layers(model)}
    return {"format": "snip-plan/1", "layers": layers, "method": f"uniform-{precision}", "recipe": recipe}


def current_plan(model: nn.Module) -> Dict[str, Dict[str, str]]:
    """{HF name: {gemm: precision}} of the wrapped layers."""
    return {name: dict(m.precisions) for name, _, m in linear_layers(model) if isinstance(m, QuantLinear)}


def set_step(model: nn.Module, step: int) -> None:
    """Sets the training step of every QuantLinear (part of the stochastic-rounding key)."""
    for _, _, m in linear_layers(model):
        if isinstance(m, QuantLinear):
            m.step = int(step)
