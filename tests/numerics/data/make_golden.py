#!/usr/bin/python3
"""Golden vectors for test_numerics from an independent numpy implementation of FORMATS.md.

Element rounding here is a nearest-neighbour search over the enumerated grid of each format
(ties to the even code), not the bit tricks of the C++ kernels; scale arithmetic is done in
numpy float32 exactly as FORMATS.md orders it. Run with Debian's /usr/bin/python3 (numpy):
    /usr/bin/python3 tests/numerics/data/make_golden.py
It rewrites x.f32, golden_<case>.f32 and manifest.json in this folder.
"""
import json
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
F32 = np.float32

# name: (exponent bits, mantissa bits, bias, top-binade mantissas excluded for NaN/Inf)
FORMATS = {
    "e4m3": (4, 3, 7, "e4m3"),
    "e5m2": (5, 2, 15, "e5m2"),
    "e3m2": (3, 2, 3, None),
    "e2m3": (2, 3, 1, None),
    "e2m1": (2, 1, 1, None),
}


def grid(fmt):
    """All finite non-negative values, ascending; index i is positive code i."""
    eb, mb, bias, special = FORMATS[fmt]
    vals = []
    for code in range(1 << (eb + mb)):
        e, m = code >> mb, code & ((1 << mb) - 1)
        if special == "e4m3" and e == (1 << eb) - 1 and m == (1 << mb) - 1:
            continue  # NaN
        if special == "e5m2" and e == (1 << eb) - 1:
            continue  # Inf / NaN
        if e == 0:
            vals.append(m * 2.0 ** (1 - bias - mb))
        else:
            vals.append((1 + m / 2.0 ** mb) * 2.0 ** (e - bias))
    return np.array(vals, dtype=np.float64)


def round_rne(v, fmt):
    """Nearest grid value of each float32 v (ties to the even code), saturating, sign kept."""
    g = grid(fmt)
    a = np.minimum(np.abs(v.astype(np.float64)), g[-1])
    hi = np.clip(np.searchsorted(g, a, side="left"), 0, len(g) - 1)
    lo = np.clip(hi - 1, 0, len(g) - 1)
    dlo, dhi = a - g[lo], g[hi] - a
    pick = np.where(dlo < dhi, lo, np.where(dhi < dlo, hi, np.where(lo % 2 == 0, lo, hi)))
    pick = np.where(a == g[hi], hi, pick)
    q = g[pick]
    return np.where(np.signbit(v), -q, q).astype(F32)


def emax(fmt):
    return int(np.floor(np.log2(grid(fmt)[-1])))


def fp32_scaled(x, fmt, bc):
    """snip / tensor: per 1×bc tile s = amax/max (float32), q = R(x/s), x̂ = q·s."""
    y = np.empty_like(x)
    mx = F32(grid(fmt)[-1])
    for r in range(x.shape[0]):
        for c0 in range(0, x.shape[1], bc):
            t = x[r, c0:c0 + bc]
            s = F32(np.max(np.abs(t))) / mx
            if s == 0:
                s = F32(1)
            y[r, c0:c0 + bc] = round_rne(t / s, fmt) * s
    return y


def fp32_2d(x, fmt, b):
    y = np.empty_like(x)
    mx = F32(grid(fmt)[-1])
    for r0 in range(0, x.shape[0], b):
        for c0 in range(0, x.shape[1], b):
            t = x[r0:r0 + b, c0:c0 + b]
            s = F32(np.max(np.abs(t))) / mx
            if s == 0:
                s = F32(1)
            y[r0:r0 + b, c0:c0 + b] = round_rne(t / s, fmt) * s
    return y


def e8m0(x, fmt, bc, mode):
    y = np.empty_like(x)
    mx = F32(grid(fmt)[-1])
    for r in range(x.shape[0]):
        for c0 in range(0, x.shape[1], bc):
            t = x[r, c0:c0 + bc]
            amax = F32(np.max(np.abs(t)))
            if amax == 0:
                e = 0
            elif mode == "floor":
                e = int(np.frexp(amax)[1]) - 1 - emax(fmt)
            elif mode == "rceil":
                v = amax / mx
                m, ex = np.frexp(v)
                e = int(ex) - 1 + (1 if m != 0.5 else 0)
            else:
                raise ValueError(mode)
            e = max(-127, min(127 - emax(fmt), e))  # largest element · 2^e finite in FP32
            s = F32(2.0 ** e)
            y[r, c0:c0 + bc] = round_rne(t / s, fmt) * s
    return y


def nvfp4(x, bc):
    amax_t = F32(np.max(np.abs(x)))
    g = F32(2688) / amax_t if amax_t != 0 else F32(1)
    mult = g * (F32(1) / F32(6))
    inv_g = F32(1) / g
    y = np.empty_like(x)
    for r in range(x.shape[0]):
        for c0 in range(0, x.shape[1], bc):
            t = x[r, c0:c0 + bc]
            sb = min(F32(np.max(np.abs(t))) * mult, F32(448))
            s_block = round_rne(np.array([sb], dtype=F32), "e4m3")[0]
            dec = F32(s_block) * inv_g
            with np.errstate(divide="ignore"):
                enc = min(F32(1) / dec, F32(np.finfo(F32).max))  # capped at FLT_MAX
            q = round_rne(np.clip(t * enc, F32(-6), F32(6)), "e2m1")
            y[r, c0:c0 + bc] = q * dec
    return y


def bf16(x):
    u = x.view(np.uint32).astype(np.uint64)
    a = u & 0x7FFFFFFF
    r = (a + 0x7FFF + ((a >> 16) & 1)) & 0xFFFF0000
    r = np.minimum(r, 0x7F7F0000)
    return ((r | (u & 0x80000000)).astype(np.uint32)).view(F32)


def main():
    rng = np.random.default_rng(20260211)
    rows, cols = 32, 256
    x = (rng.standard_normal((rows, cols)) * np.exp2(rng.integers(-6, 7, size=(rows, 1)))).astype(F32)
    x[3, 10] = F32(957.0)  # the FORMATS.md E8M0 example inside one block
    x[5, 0:32] = 0  # a zero block
    x[7, 100] = F32(-1e4)  # an outlier
    x[9, 17] = F32(-0.0)
    cases = {
        "snip_e2m1_1x128": ({"format": "e2m1", "scale": "fp32", "block_rows": 1, "block_cols": 128}, fp32_scaled(x, "e2m1", 128)),
        "snip_e4m3_1x128": ({"format": "e4m3", "scale": "fp32", "block_rows": 1, "block_cols": 128}, fp32_scaled(x, "e4m3", 128)),
        "snip_e2m1_16x16_2d": ({"format": "e2m1", "scale": "fp32", "block_rows": 16, "block_cols": 16}, fp32_2d(x, "e2m1", 16)),
        "tensor_e5m2": ({"format": "e5m2", "scale": "fp32", "block_rows": 0, "block_cols": 0}, fp32_scaled(x.reshape(1, -1), "e5m2", rows * cols).reshape(rows, cols)),
        "mx_e4m3_floor": ({"format": "e4m3", "scale": "e8m0", "mode": "floor", "block_rows": 1, "block_cols": 32}, e8m0(x, "e4m3", 32, "floor")),
        "mx_e4m3_rceil": ({"format": "e4m3", "scale": "e8m0", "mode": "rceil", "block_rows": 1, "block_cols": 32}, e8m0(x, "e4m3", 32, "rceil")),
        "mx_e2m1_rceil": ({"format": "e2m1", "scale": "e8m0", "mode": "rceil", "block_rows": 1, "block_cols": 32}, e8m0(x, "e2m1", 32, "rceil")),
        "mx_e3m2_floor": ({"format": "e3m2", "scale": "e8m0", "mode": "floor", "block_rows": 1, "block_cols": 32}, e8m0(x, "e3m2", 32, "floor")),
        "mx_e2m3_rceil": ({"format": "e2m3", "scale": "e8m0", "mode": "rceil", "block_rows": 1, "block_cols": 32}, e8m0(x, "e2m3", 32, "rceil")),
        "nvfp4_1x16": ({"format": "e2m1", "scale": "nvfp4", "block_rows": 1, "block_cols": 16}, nvfp4(x, 16)),
        "bf16": ({"format": "bf16", "scale": "none", "block_rows": 0, "block_cols": 0}, bf16(x)),
    }
    x.astype("<f4").tofile(os.path.join(HERE, "x.f32"))
    manifest = {"rows": rows, "cols": cols, "input": "x.f32", "cases": {}}
    for name, (spec, y) in cases.items():
        y.astype("<f4").tofile(os.path.join(HERE, f"golden_{name}.f32"))
        manifest["cases"][name] = spec
    with open(os.path.join(HERE, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
