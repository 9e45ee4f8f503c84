"""Block-scaled fake quantization and the scaling recipes (FORMATS.md, METHOD.md section 2).

Port of fake_quantize_ref (engine/numerics/src/quantizer.cpp) and Recipe::spec
(engine/numerics/src/qlinear.cpp). Tensors are 2D row-major (rows, cols); a QuantSpec's
block is block_rows × block_cols with 0 meaning "the whole dimension" ({0, 0} is per-tensor);
partial blocks at the edges are blocks of their own.
"""
from dataclasses import dataclass, replace

import torch

from . import formats as F

PRECISIONS = ("fp32", "bf16", "fp8", "fp4")
GEMMS = ("fprop", "dgrad", "wgrad")        # Y = X·Wᵀ, dX = dY·W, dW = dYᵀ·X
OPERANDS = ("activation", "weight", "gradient")
RECIPES = ("snip", "mx", "nvfp4", "tensor")


@dataclass(frozen=True)
class QuantSpec:
    format: str = "fp32"
    block_rows: int = 0   # 0 = whole dimension
    block_cols: int = 0
    scale: str = "none"   # none | fp32 | e8m0 | nvfp4
    e8m0_mode: str = "rceil"
    rounding: str = "rne"


class QuantError(ValueError):
    """Bad input to the quantizer (non-finite values, impossible spec)."""


def _check(x: torch.Tensor, spec: QuantSpec, name: str) -> None:
    if spec.scale == "nvfp4" and spec.format != "e2m1":
        raise QuantError(f"NVFP4 two-level scaling is defined for e2m1 elements only, not {spec.format}: "
                         "use scale fp32 or e8m0 for other formats")
    if spec.block_rows < 0 or spec.block_cols < 0:
        raise QuantError("quantization block shape must be >= 0 (0 = whole dimension)")
    if x.dim() != 2:
        raise QuantError(f"{name}: fake_quantize takes a 2D (rows, cols) tensor, got shape {tuple(x.shape)}")
    bad = ~torch.isfinite(x)
    if bool(bad.any()):
        i = int(bad.flatten().nonzero()[0])
        r, c = divmod(i, x.shape[1])
        raise QuantError(f"{name}: non-finite value {float(x.flatten()[i])} at row {r}, col {c}; it cannot be "
                         "quantized (training diverged? lower the learning rate or check the input data)")


def fake_quantize(x: torch.Tensor, spec: QuantSpec, key: F.RngKey = F.RngKey(), name: str = "tensor",
                  return_codes: bool = False):
    """y = dequantize(quantize(x)) for a 2D float32 tensor; bit-identical to snip's
    fake_quantize. With return_codes also returns the uint8 element codes."""
    x = x.detach().to(torch.float32).contiguous()
    _check(x, spec, name)
    rows, cols = x.shape
    if spec.format == "fp32":
        if return_codes:
            raise QuantError("fp32 has no element codes")
        return (x.clone(), None) if return_codes else x.clone()
    if spec.format == "bf16":  # never scaled
        y = F.bf16_round(x)
        return (y, None) if return_codes else y
    if x.numel() == 0:
        return (x.clone(), torch.zeros_like(x, dtype=torch.uint8)) if return_codes else x.clone()
    info = F.elem_info(spec.format)
    br = rows if spec.block_rows <= 0 else min(spec.block_rows, rows)
    bc = cols if spec.block_cols <= 0 else min(spec.block_cols, cols)
    nbr, nbc = -(-rows // br), -(-cols // bc)
    # Zero padding to whole blocks leaves every block's amax unchanged (amax >= 0).
    xp = torch.zeros(nbr * br, nbc * bc, dtype=torch.float32)
    xp[:rows, :cols] = x
    amax = xp.abs().view(nbr, br, nbc, bc).amax(dim=(1, 3))  # (nbr, nbc)

    if spec.scale == "none":
        s_in = s_out = torch.ones_like(amax)
    elif spec.scale == "fp32":
        v = amax / torch.tensor(info.max, dtype=torch.float32)  # FP32 division
        s_in = s_out = torch.where(v > 0, v, torch.ones_like(v))
    elif spec.scale == "e8m0":
        e = F.e8m0_exponent(amax, spec.format, spec.e8m0_mode)
        s_in = F._pow2(-e).to(torch.float32)
        s_out = F._pow2(e).to(torch.float32)
    elif spec.scale == "nvfp4":
        g = F.nvfp4_tensor_factor(x.abs().max())
        s_out, s_in = F.nvfp4_block_scale(amax, g)
    else:
        raise QuantError(f"unknown scale kind '{spec.scale}': use one of {', '.join(F.SCALE_KINDS)}")

    def expand(s):  # (nbr, nbc) -> (rows, cols)
        return s.repeat_interleave(br, 0).repeat_interleave(bc, 1)[:rows, :cols]

    if spec.scale == "fp32":
        v = x / expand(s_in)
    else:
        v = x * expand(s_in)
    bits = F.sr_bits(key, rows * cols).view(rows, cols) if spec.rounding == "stochastic" else None
    q = F.round_elem(v, spec.format, spec.rounding, bits)
    y = q * expand(s_out)
    if return_codes:
        return y, F.encode_elem(q, spec.format)
    return y


def recipe_spec(recipe: str, precision: str, gemm: str, operand: str, scale_mode: str = "rceil",
                fp8_gradients_e5m2: bool = False) -> QuantSpec:
    """Spec for operand `operand` (as stored: X (T,K), W (N,K), dY (T,N)) of GEMM `gemm` at
    `precision` under `recipe`: the block runs along the GEMM's reduction dimension (fprop K,
    dgrad N, wgrad T), 2D blocks for weights where the recipe says so. Same as Recipe::spec."""
    if recipe not in RECIPES:
        raise QuantError(f"unknown scaling recipe '{recipe}': use one of {', '.join(RECIPES)}")
    if precision not in PRECISIONS:
        raise QuantError(f"unknown precision '{precision}': use one of {', '.join(PRECISIONS)}")
    if gemm not in GEMMS or operand not in OPERANDS:
        raise QuantError(f"unknown GEMM '{gemm}' or operand '{operand}'")
    s = QuantSpec(e8m0_mode=scale_mode)
    if precision == "fp32":
        return s
    if precision == "bf16":
        return replace(s, format="bf16")
    fp4 = precision == "fp4"
    fmt = "e2m1" if fp4 else ("e5m2" if operand == "gradient" and fp8_gradients_e5m2 else "e4m3")
    s = replace(s, format=fmt)
    down_rows = gemm == "wgrad" or (gemm == "dgrad" and operand == "weight")

    def tile(b):  # 1×b along the reduction dimension
        return (b, 1) if down_rows else (1, b)

    if recipe == "snip":
        br, bc = (128, 128) if operand == "weight" else tile(128)
        rnd = "stochastic" if fp4 and operand == "gradient" else "rne"
        return replace(s, scale="fp32", block_rows=br, block_cols=bc, rounding=rnd)
    if recipe == "mx" or (recipe == "nvfp4" and not fp4):
        br, bc = tile(32)
        return replace(s, scale="e8m0", block_rows=br, block_cols=bc)
    if recipe == "nvfp4":
        br, bc = (16, 16) if operand == "weight" else tile(16)
        rnd = "stochastic" if operand == "gradient" else "rne"
        return replace(s, scale="nvfp4", block_rows=br, block_cols=bc, rounding=rnd)
    return replace(s, scale="fp32", block_rows=0, block_cols=0)  # tensor
