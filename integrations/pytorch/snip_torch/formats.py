"""Element formats, rounding and scale rules of FORMATS.md on float32 torch tensors.

A pure-torch port of engine/numerics/src/elem_format.cpp and the scalar reference
fake_quantize_ref (engine/numerics/src/quantizer.cpp). torch 1.13 has no float8 dtypes, so
rounding happens in float64 on the exact binary grid (every float32 is exact in float64):
with e = max(ilogb|v|, emin) the grid spacing is q = 2^(e - mbits) and t = |v|/q is exact,
so rounding t to an integer is the whole story. Scale arithmetic is float32, literally as
FORMATS.md writes it (a division is not a multiply by a reciprocal: it changes bits).
"""
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

FLT_MAX = float(np.finfo(np.float32).max)


@dataclass(frozen=True)
class ElemInfo:
    ebits: int
    mbits: int
    bias: int
    emax: int    # exponent of the largest power of two (FORMATS.md "emax")
    max: float   # largest finite magnitude (saturation bound)

    @property
    def emin(self) -> int:  # exponent of the smallest normal
        return 1 - self.bias


# OCP FP8 "fn" E4M3 has no Inf (max 448); E5M2 is IEEE-like (max 57344); FP6/FP4 use every code.
ELEM_FORMATS = {
    "e4m3": ElemInfo(4, 3, 7, 8, 448.0),
    "e5m2": ElemInfo(5, 2, 15, 15, 57344.0),
    "e3m2": ElemInfo(3, 2, 3, 4, 28.0),
    "e2m3": ElemInfo(2, 3, 1, 2, 7.5),
    "e2m1": ElemInfo(2, 1, 1, 2, 6.0),
    "bf16": ElemInfo(8, 7, 127, 127, float(np.float32(3.3895313892515355e38))),  # 0x7F7F0000
}
ROUNDINGS = ("rne", "stochastic", "away")
E8M0_MODES = ("floor", "ceil", "rceil", "even")
SCALE_KINDS = ("none", "fp32", "e8m0", "nvfp4")


def elem_info(fmt: str) -> ElemInfo:
    if fmt not in ELEM_FORMATS:
        raise ValueError(f"unknown element format '{fmt}': use one of fp32, {', '.join(ELEM_FORMATS)}")
    return ELEM_FORMATS[fmt]


def _ilogb(a: torch.Tensor) -> torch.Tensor:
    """Unbiased exponent of positive finite float64 values (normal or subnormal float32)."""
    _, ex = torch.frexp(a)  # a = m·2^ex, m in [0.5, 1)
    return ex.to(torch.int64) - 1


def _has_fraction(a: torch.Tensor) -> torch.Tensor:
    m, _ = torch.frexp(a)
    return m != 0.5  # frexp mantissa is 0.5 exactly for powers of two


def _pow2(e: torch.Tensor) -> torch.Tensor:
    """2^e in float64, exact for the integer exponents used here."""
    return torch.pow(torch.tensor(2.0, dtype=torch.float64), e.to(torch.float64))


def round_elem(v: torch.Tensor, fmt: str, rounding: str = "rne",
               rand_bits: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Rounds the (already scaled) float32 values v to `fmt`, saturating |v| to the format's
    max first. `rand_bits` (int64 tensor of 32-bit values, same shape) drives stochastic
    rounding: round up iff (bits >> 8)·2^-24 < the fractional distance. Sign is kept."""
    info = elem_info(fmt)
    a = v.to(torch.float64).abs().clamp(max=info.max)
    e = torch.where(a > 0, _ilogb(torch.where(a > 0, a, torch.ones_like(a))),
                    torch.full_like(a, info.emin, dtype=torch.int64))
    e = e.clamp(min=info.emin)
    q = _pow2(e - info.mbits)
    t = a / q
    if rounding == "rne":
        n = torch.round(t)  # ties to even
    elif rounding == "away":
        n = torch.floor(t + 0.5)  # t has few significant bits: t + 0.5 is exact
    elif rounding == "stochastic":
        if rand_bits is None:
            raise ValueError("stochastic rounding needs rand_bits")
        fl = torch.floor(t)
        u = (rand_bits >> 8).to(torch.float64) * 2.0 ** -24
        n = fl + (u < t - fl).to(torch.float64)
    else:
        raise ValueError(f"unknown rounding '{rounding}': use one of {', '.join(ROUNDINGS)}")
    return torch.copysign((n * q).to(torch.float32), v)


def bf16_round(x: torch.Tensor) -> torch.Tensor:
    """BF16 round-to-nearest-even of float32 x, saturating to ±BF16 max."""
    return round_elem(x, "bf16", "rne")


def encode_elem(v: torch.Tensor, fmt: str) -> torch.Tensor:
    """Bit codes (uint8, sign|exponent|mantissa in the low bits) of values on fmt's grid."""
    info = elem_info(fmt)
    sign = torch.signbit(v).to(torch.int64)
    a = v.to(torch.float64).abs()
    sub = a < 2.0 ** info.emin
    mant_sub = (a / 2.0 ** (info.emin - info.mbits)).to(torch.int64)
    e = _ilogb(torch.where(sub, torch.ones_like(a), a))
    exp_field = torch.where(sub, torch.zeros_like(e), e + info.bias)
    mant_norm = (a / _pow2(e - info.mbits)).to(torch.int64) - (1 << info.mbits)
    mant = torch.where(sub, mant_sub, mant_norm)
    code = (sign << (info.ebits + info.mbits)) | (exp_field << info.mbits) | mant
    return code.to(torch.uint8)


def e8m0_exponent(amax: torch.Tensor, fmt: str, mode: str) -> torch.Tensor:
    """Exponent e of the E8M0 block scale 2^e (FORMATS.md), clamped to [-127, 127 - emax] (the largest
    element times 2^e stays finite in FP32); amax = 0 -> 0.
    amax: float32 tensor of block maxima. Returns int64."""
    info = elem_info(fmt)
    pos = amax > 0
    a32 = torch.where(pos, amax, torch.ones_like(amax))
    a = a32.to(torch.float64)
    if mode == "floor":
        e = _ilogb(a) - info.emax
    elif mode == "ceil":
        e = _ilogb(a) + _has_fraction(a).to(torch.int64) - info.emax
    elif mode == "rceil":
        v32 = a32 / torch.tensor(info.max, dtype=torch.float32)  # FP32 division, as FORMATS.md says
        v = v32.to(torch.float64)
        vpos = v > 0
        vs = torch.where(vpos, v, torch.ones_like(v))
        e = torch.where(vpos, _ilogb(vs) + _has_fraction(vs).to(torch.int64), torch.full(a.shape, -127, dtype=torch.int64))
    elif mode == "even":
        ea = _ilogb(a)
        q = _pow2(ea - info.mbits)
        rounded = torch.round(a / q) * q  # RNE to the mantissa width, may carry into the exponent
        e = _ilogb(rounded) - info.emax
    else:
        raise ValueError(f"unknown E8M0 scale mode '{mode}': use one of {', '.join(E8M0_MODES)}")
    e = e.clamp(-127, 127 - info.emax)
    return torch.where(pos, e, torch.zeros_like(e))


def _f32(x: float) -> torch.Tensor:
    return torch.tensor(x, dtype=torch.float32)


def nvfp4_tensor_factor(amax_tensor: torch.Tensor) -> torch.Tensor:
    """g = 2688 / amax_tensor (FP32; 1 if amax is 0; capped at FLT_MAX)."""
    if float(amax_tensor) == 0.0:
        return _f32(1.0)
    g = _f32(2688.0) / amax_tensor.to(torch.float32)
    return torch.clamp(g, max=FLT_MAX)


def nvfp4_block_scale(amax_block: torch.Tensor, g: torch.Tensor):
    """(dec, enc) per block, FORMATS.md NVFP4 steps 2-4, all FP32 in that order."""
    mult = g * _f32(1.0 / 6.0)
    sb = amax_block * mult
    sb = torch.where(sb < 448.0, sb, _f32(448.0))  # !(sb < 448) -> 448 (also catches inf)
    s_block = round_elem(sb, "e4m3", "rne")
    dec = s_block * (_f32(1.0) / g)
    enc = _f32(1.0) / dec
    enc = torch.where(enc > FLT_MAX, _f32(FLT_MAX), enc)
    return dec, enc


# ---- counter-based RNG of stochastic rounding (elem_format.cpp sr_bits) --------------------
_M64 = (1 << 64) - 1
_M32 = (1 << 32) - 1


def _mix64(z: int) -> int:
    """splitmix64 finalizer on Python ints."""
    z = (z + 0x9E3779B97F4A7C15) & _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def _fmix32(h: np.ndarray) -> np.ndarray:
    """murmur3 fmix32 on uint64 arrays holding 32-bit values (products fit in 64 bits)."""
    m = np.uint64(_M32)
    h = h ^ (h >> np.uint64(16))
    h = (h * np.uint64(0x85EBCA6B)) & m
    h = h ^ (h >> np.uint64(13))
    h = (h * np.uint64(0xC2B2AE35)) & m
    return h ^ (h >> np.uint64(16))


@dataclass(frozen=True)
class RngKey:
    seed: int = 0
    step: int = 0
    layer: int = 0
    role: int = 0


def sr_bits(key: RngKey, n: int) -> torch.Tensor:
    """32 random bits for each flat element index 0..n-1 (int64 tensor), bit-identical to C++."""
    k = _mix64((key.seed & _M64) ^ _mix64((key.step & _M64) ^ _mix64(((key.layer & _M32) << 32) | (key.role & _M32))))
    idx = np.arange(n, dtype=np.uint64)
    m = np.uint64(_M32)
    lo = idx & m
    hi = idx >> np.uint64(32)
    inner = _fmix32(lo ^ np.uint64(k & _M32))
    other = (hi * np.uint64(0x9E3779B1) + np.uint64(k >> 32)) & m
    return torch.from_numpy(_fmix32(inner ^ other).astype(np.int64))
