"""Fake-quantized linear layers (METHOD.md section 1, FORMATS.md), the torch twin of
engine/numerics/src/qlinear.cpp: each of the three GEMMs of Y = X·Wᵀ quantizes its two
operands along its own reduction dimension with the recipe's spec for (precision, GEMM,
operand), multiplies in FP32 and optionally rounds the output to BF16.

Shapes: X (T,K) activations, W (N,K) weight, Y/dY (T,N), dX (T,K), dW (N,K).
  fprop  Y  = Q(X)·Q(W)ᵀ   reduction over K
  dgrad  dX = Q(dY)·Q(W)   reduction over N
  wgrad  dW = Q(dY)ᵀ·Q(X)  reduction over T
"""
from dataclasses import dataclass, field
from typing import Dict

import torch
from torch import nn

from . import formats as F
from . import quant as Q

GEMM_INDEX = {"fprop": 0, "dgrad": 1, "wgrad": 2}
OPERAND_INDEX = {"activation": 0, "weight": 1, "gradient": 2}


@dataclass
class RecipeOptions:
    """A scaling recipe (METHOD.md section 2) and its options, as snip::RecipeOptions."""
    name: str = "snip"
    scale_mode: str = "rceil"          # mx (and nvfp4's fp8 layers)
    fp8_gradients_e5m2: bool = False   # fp8 dY in E5M2 instead of E4M3
    bf16_output: bool = True           # round GEMM outputs to BF16
    hadamard_wgrad: bool = False       # nvfp4 only: 16×16 random Hadamard transform on fp4 wgrad operands

    def __post_init__(self):
        if self.hadamard_wgrad and self.name != "nvfp4":
            raise ValueError(f"the random Hadamard transform on wgrad operands is an nvfp4 option; recipe "
                             f"'{self.name}' does not support it (use recipe nvfp4 or turn the option off)")
        if self.name not in Q.RECIPES:
            raise ValueError(f"unknown scaling recipe '{self.name}': use one of {', '.join(Q.RECIPES)}")
        if self.scale_mode not in F.E8M0_MODES:
            raise ValueError(f"unknown E8M0 scale mode '{self.scale_mode}': use one of {', '.join(F.E8M0_MODES)}")

    def spec(self, precision: str, gemm: str, operand: str) -> Q.QuantSpec:
        return Q.recipe_spec(self.name, precision, gemm, operand, self.scale_mode, self.fp8_gradients_e5m2)


@dataclass
class GemmContext:
    """Everything a quantized GEMM needs besides its operands (snip::QLinearContext)."""
    recipe: RecipeOptions = field(default_factory=RecipeOptions)
    seed: int = 0
    step: int = 0
    layer: int = 0             # block·7 + type
    layer_name: str = "linear"

    def key(self, gemm: str, operand: str) -> F.RngKey:  # role = 4·g + op
        return F.RngKey(self.seed, self.step, self.layer, 4 * GEMM_INDEX[gemm] + OPERAND_INDEX[operand])


# The fixed random sign vector of the 16×16 Hadamard transform (engine/numerics/src/hadamard.cpp).
HADAMARD16_SIGNS = (1, -1, -1, 1, 1, 1, -1, 1, -1, 1, 1, -1, -1, -1, 1, -1)


def hadamard16_rows(a: torch.Tensor) -> torch.Tensor:
    """M·a for every full group of 16 rows, M = H16·diag(signs)/4 (orthogonal); trailing rows
    of a partial group are left as they are. FP32 butterflies in the engine's order, so the
    bits match hadamard16_rows."""
    a = a.detach().float().clone()
    full = (a.shape[0] // 16) * 16
    if full == 0:
        return a
    g = a[:full].view(-1, 16, a.shape[1]) * torch.tensor(HADAMARD16_SIGNS, dtype=torch.float32)[None, :, None]
    h = 1
    while h < 16:
        g = g.view(g.shape[0], 16 // (2 * h), 2, h, a.shape[1])
        u, v = g[:, :, 0], g[:, :, 1]
        g = torch.stack([u + v, u - v], dim=2).view(-1, 16, a.shape[1])
        h *= 2
    a[:full] = (g * 0.25).view(full, a.shape[1])
    return a


def uses_hadamard(precision: str, gemm: str, ctx: "GemmContext") -> bool:
    return gemm == "wgrad" and precision == "fp4" and ctx.recipe.hadamard_wgrad


def quantize_operand(a: torch.Tensor, precision: str, gemm: str, operand: str, ctx: GemmContext) -> torch.Tensor:
    """Exactly the operand GEMM `gemm` multiplies: `a` as stored (2D), rotated along T first
    for an nvfp4 fp4 wgrad with the Hadamard option (the rotation cancels in dYᵀ·X), then
    fake-quantized."""
    if uses_hadamard(precision, gemm, ctx):
        a = hadamard16_rows(a)
    spec = ctx.recipe.spec(precision, gemm, operand)
    symbol = {"activation": "X", "weight": "W", "gradient": "dY"}[operand]
    name = f"{ctx.layer_name}: {gemm} operand {symbol} ({operand}, step {ctx.step})"
    if spec.format == "fp32":
        if not bool(torch.isfinite(a).all()):
            Q._check(a.detach().float(), spec, name)
        return a.detach().float()
    return Q.fake_quantize(a, spec, ctx.key(gemm, operand), name)


def _out(y: torch.Tensor, precision: str, ctx: GemmContext) -> torch.Tensor:
    return F.bf16_round(y) if ctx.recipe.bf16_output and precision != "fp32" else y


def qlinear_fprop(X, W, precision: str, ctx: GemmContext):
    """Y(T,N) = Q(X)(T,K)·Q(W)(N,K)ᵀ"""
    Xq = quantize_operand(X, precision, "fprop", "activation", ctx)
    Wq = quantize_operand(W, precision, "fprop", "weight", ctx)
    return _out(Xq @ Wq.t(), precision, ctx)


def qlinear_dgrad(dY, W, precision: str, ctx: GemmContext):
    """dX(T,K) = Q(dY)(T,N)·Q(W)(N,K)"""
    dYq = quantize_operand(dY, precision, "dgrad", "gradient", ctx)
    Wq = quantize_operand(W, precision, "dgrad", "weight", ctx)
    return _out(dYq @ Wq, precision, ctx)


def qlinear_wgrad(dY, X, precision: str, ctx: GemmContext):
    """dW(N,K) = Q(dY)(T,N)ᵀ·Q(X)(T,K)"""
    dYq = quantize_operand(dY, precision, "wgrad", "gradient", ctx)
    Xq = quantize_operand(X, precision, "wgrad", "activation", ctx)
    return _out(dYq.t() @ Xq, precision, ctx)


class QLinearFunction(torch.autograd.Function):
    """Y = X·Wᵀ (+ b) with the three GEMMs at their own precisions; X may have leading dims."""

    @staticmethod
    def forward(fctx, x, weight, bias, precisions: Dict[str, str], ctx: GemmContext):
        lead = x.shape[:-1]
        X = x.reshape(-1, x.shape[-1]).float()
        y = qlinear_fprop(X, weight.float(), precisions["fprop"], ctx)
        fctx.save_for_backward(X, weight)
        fctx.precisions, fctx.gctx, fctx.lead, fctx.has_bias = dict(precisions), ctx, lead, bias is not None
        if bias is not None:
            y = y + bias.float()
        return y.reshape(*lead, y.shape[-1]).to(x.dtype)

    @staticmethod
    def backward(fctx, gy):
        X, weight = fctx.saved_tensors
        dY = gy.reshape(-1, gy.shape[-1]).float()
        p, ctx = fctx.precisions, fctx.gctx
        dx = dw = db = None
        if fctx.needs_input_grad[0]:
            dx = qlinear_dgrad(dY, weight.float(), p["dgrad"], ctx).reshape(*fctx.lead, X.shape[-1])
        if fctx.needs_input_grad[1]:
            dw = qlinear_wgrad(dY, X, p["wgrad"], ctx).to(weight.dtype)
        if fctx.has_bias and fctx.needs_input_grad[2]:
            db = dY.sum(0)
        return dx, dw, db, None, None


class QuantLinear(nn.Module):
    """A drop-in for an nn.Linear whose GEMMs run fake-quantized. It shares the original
    layer's Parameters (optimizer state stays attached) and keeps its state_dict keys."""

    def __init__(self, linear: nn.Linear, name: str, layer_index: int, precisions: Dict[str, str],
                 recipe: RecipeOptions, seed: int = 0):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight = linear.weight
        self.bias = linear.bias
        self.name = name
        self.layer_index = layer_index
        self.precisions = dict(precisions)
        self.recipe = recipe
        self.seed = seed
        self.step = 0  # stochastic-rounding key; set_step() advances it every training step

    def context(self) -> GemmContext:
        return GemmContext(self.recipe, self.seed, self.step, self.layer_index, self.name)

    def forward(self, x):
        return QLinearFunction.apply(x, self.weight, self.bias, self.precisions, self.context())

    def extra_repr(self):
        p = self.precisions
        return (f"in={self.in_features}, out={self.out_features}, recipe={self.recipe.name}, "
                f"fprop={p['fprop']}, dgrad={p['dgrad']}, wgrad={p['wgrad']}")
