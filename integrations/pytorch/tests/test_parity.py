"""Numerics parity: snip_torch's fake quantization against the C++ `snip quantize`, bit for
bit, for every element format, recipe, operand role, E8M0 scale mode and rounding (stochastic
too: both sides use the same counter-based RNG), on random and adversarial tensors."""
import json
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from snip_torch import formats as F  # noqa: E402
from snip_torch import quant as Q  # noqa: E402
from snip_torch.cli import SnipNotFound, find_snip  # noqa: E402

ROWS, COLS = 136, 200  # partial blocks for every tile (16, 32, 128) and for 128×128 2D blocks


def grid_values(fmt: str) -> np.ndarray:
    """Every non-negative value of fmt's grid (below the top binade's max)."""
    info = F.ELEM_FORMATS[fmt]
    vals = [k * 2.0 ** (info.emin - info.mbits) for k in range(2 ** info.mbits)]  # subnormals
    for e in range(info.emin, info.emax + 1):
        for m in range(2 ** info.mbits):
            v = (1 + m / 2 ** info.mbits) * 2.0 ** e
            if v <= info.max:
                vals.append(v)
    return np.array(sorted(set(vals)), dtype=np.float64)


def adversarial(fmt: str, seed: int) -> np.ndarray:
    """A ROWS×COLS float32 matrix: grid midpoints and their float32 neighbours in blocks whose
    amax is the format's max (so scale 1 keeps them midpoints), subnormal and tiny float32
    values, all-zero tiles and an all-zero 2D edge block, huge values, random rows."""
    rng = np.random.default_rng(seed)
    info = F.ELEM_FORMATS[fmt]
    g = grid_values(fmt)
    mids = (g[:-1] + g[1:]) / 2
    probe = np.concatenate([mids, g]).astype(np.float32)
    probe = np.concatenate([probe, np.nextafter(probe, np.float32(np.inf)), np.nextafter(probe, np.float32(0))])
    probe = np.concatenate([probe, -probe, [info.max * 1.5, -1e30, 0.0, -0.0]]).astype(np.float32)
    x = np.zeros((ROWS, COLS), dtype=np.float32)
    flat = np.resize(probe, 8 * COLS)
    x[0:8] = flat.reshape(8, COLS)
    x[0:8, ::16] = np.float32(info.max)  # every 16-tile (and so 32/128 tile) has amax = max
    x[8:16] = rng.choice(np.array([1e-39, -3e-41, 1.4e-45, 2.0 ** -130, 1e-38, 1e-20, 0.0], dtype=np.float32),
                         size=(8, COLS))
    x[16:24] = 0.0  # all-zero tiles
    x[24:28] = rng.choice(np.array([1e30, -3.0e38, 3.4e38, 7e37, 1.0], dtype=np.float32), size=(4, COLS))
    scales = 10.0 ** rng.uniform(-6, 6, size=(ROWS - 28, 1))
    x[28:] = (rng.standard_normal((ROWS - 28, COLS)) * scales).astype(np.float32)
    x[28:40, ::7] *= np.float32(1000.0)  # outliers inside blocks
    x[128:, 128:] = 0.0  # all-zero partial 2D block
    return x


class ParityTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        try:
            cls.snip = find_snip()
        except SnipNotFound as e:
            raise unittest.SkipTest(str(e))
        cls.tmp = tempfile.TemporaryDirectory()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def run_cli(self, x: np.ndarray, fmt, recipe, role, rounding, scale_mode="rceil", seed=0):
        d = Path(self.tmp.name)
        (d / "in.f32").write_bytes(x.astype("<f4").tobytes())
        args = [self.snip, "quantize", "--format", fmt, "--recipe", recipe, "--role", role,
                "--shape", f"{x.shape[0]}x{x.shape[1]}", "--in", str(d / "in.f32"), "--out", str(d / "out.f32"),
                "--scale-mode", scale_mode, "--seed", str(seed), "--json"]
        if rounding:
            args += ["--rounding", rounding]
        if fmt != "bf16":
            args += ["--codes", str(d / "codes.u8")]
        proc = subprocess.run(args, capture_output=True, text=True)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        meta = json.loads(proc.stdout)
        y = np.frombuffer((d / "out.f32").read_bytes(), dtype="<f4").reshape(x.shape)
        codes = np.frombuffer((d / "codes.u8").read_bytes(), dtype=np.uint8).reshape(x.shape) if fmt != "bf16" else None
        return y, codes, meta

    def spec_for(self, fmt, recipe, role, rounding, scale_mode):
        # `snip quantize` maps the format to a precision class and takes the fprop (dgrad for
        # gradients) spec of the recipe, then overrides the element format and rounding.
        p = "bf16" if fmt == "bf16" else "fp4" if fmt == "e2m1" else "fp8"
        gemm = "dgrad" if role == "gradient" else "fprop"
        s = Q.recipe_spec(recipe, p, gemm, role, scale_mode=scale_mode)
        from dataclasses import replace
        s = replace(s, format=fmt)
        if rounding:
            s = replace(s, rounding=rounding)
        return s

    def check(self, x, fmt, recipe, role, rounding, scale_mode="rceil", seed=0):
        y_cli, c_cli, meta = self.run_cli(x, fmt, recipe, role, rounding, scale_mode, seed)
        spec = self.spec_for(fmt, recipe, role, rounding, scale_mode)
        self.assertEqual((spec.block_rows, spec.block_cols, spec.scale, spec.rounding),
                         (meta["block_rows"], meta["block_cols"], meta["scale"], meta["rounding"]))
        key = F.RngKey(seed=seed)
        if fmt == "bf16":
            y = Q.fake_quantize(torch.from_numpy(x), spec, key).numpy()
        else:
            y, c = Q.fake_quantize(torch.from_numpy(x), spec, key, return_codes=True)
            y = y.numpy()
            np.testing.assert_array_equal(c.numpy(), c_cli, err_msg=f"codes {fmt} {recipe} {role} {rounding}")
        same = y.view(np.uint32) == y_cli.view(np.uint32)
        if not same.all():
            i = np.argwhere(~same)[0]
            self.fail(f"{fmt} {recipe} {role} {rounding} {scale_mode}: {int((~same).sum())} elements differ, "
                      f"first at {tuple(i)}: x={x[tuple(i)]!r} torch={y[tuple(i)]!r} snip={y_cli[tuple(i)]!r}")

    def test_every_format_recipe_role_rounding(self):
        for fmt in ("e4m3", "e5m2", "e3m2", "e2m3", "e2m1"):
            x = adversarial(fmt, seed=len(fmt) + ord(fmt[1]))
            for recipe in Q.RECIPES:
                for role in ("activation", "weight"):
                    for rounding in ("rne", "away"):
                        with self.subTest(fmt=fmt, recipe=recipe, role=role, rounding=rounding):
                            self.check(x, fmt, recipe, role, rounding)

    def test_e8m0_scale_modes(self):
        for fmt in ("e4m3", "e5m2", "e2m1", "e3m2"):
            x = adversarial(fmt, seed=7)
            x[40:48] *= np.float32(957.0 / 448.0)  # amax between grid points: floor saturates
            for mode in F.E8M0_MODES:
                for recipe in ("mx", "nvfp4"):
                    if recipe == "nvfp4" and fmt == "e2m1":
                        continue  # nvfp4 fp4 uses its own two-level scale
                    with self.subTest(fmt=fmt, mode=mode, recipe=recipe):
                        self.check(x, fmt, recipe, "activation", "rne", scale_mode=mode)

    def test_bf16(self):
        x = adversarial("e4m3", seed=3)
        x[30, :4] = np.array([3.3895e38, 3.4e38, -3.39e38, 1e-40], dtype=np.float32)
        for rounding in ("rne",):
            self.check(x, "bf16", "snip", "activation", rounding)

    def test_stochastic_gradients_match_and_are_unbiased(self):
        # The counter-based RNG is ported too, so stochastic rounding is bit-identical as well.
        rng = np.random.default_rng(11)
        x = (rng.standard_normal((64, 160)) * 0.01).astype(np.float32)
        for recipe, fmt in (("snip", "e2m1"), ("nvfp4", "e2m1"), ("mx", "e4m3")):
            for seed in (0, 12345):
                with self.subTest(recipe=recipe, seed=seed):
                    self.check(x, fmt, recipe, "gradient", "stochastic", seed=seed)
        # Unbiasedness: the mean error over many seeds shrinks towards zero, and every
        # element only ever takes one of its two grid neighbours.
        spec = Q.QuantSpec(format="e2m1", scale="none", rounding="stochastic")
        v = torch.full((1, 4000), 0.3)
        ys = torch.stack([Q.fake_quantize(v, spec, F.RngKey(seed=s)) for s in range(20)])
        self.assertTrue(set(ys.unique().tolist()) <= {0.0, 0.5})
        self.assertAlmostEqual(float(ys.mean()), 0.3, delta=0.01)


class LocalRulesTest(unittest.TestCase):
    """Rules `snip quantize` cannot reach from its command line."""

    def test_tiles_down_rows_equal_transposed_tiles(self):
        x = torch.from_numpy(adversarial("e2m1", 5))
        for scale in ("fp32", "e8m0"):
            a = Q.fake_quantize(x, Q.QuantSpec(format="e2m1", block_rows=32, block_cols=1, scale=scale))
            b = Q.fake_quantize(x.t().contiguous(), Q.QuantSpec(format="e2m1", block_rows=1, block_cols=32,
                                                                scale=scale)).t()
            self.assertTrue(torch.equal(a.view(torch.int32), b.contiguous().view(torch.int32)))

    def test_formats_md_examples(self):
        mid = torch.tensor([[0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 5.1, 100.0]])
        self.assertEqual(F.round_elem(mid, "e2m1").tolist(), [[0, 1, 1, 2, 2, 4, 4, 6, 6]])
        # floor saturates the block max: 957 -> 896 in E4M3
        y = Q.fake_quantize(torch.tensor([[957.0]]), Q.QuantSpec(format="e4m3", scale="e8m0", e8m0_mode="floor"))
        self.assertEqual(float(y), 896.0)
        y = Q.fake_quantize(torch.tensor([[957.0]]), Q.QuantSpec(format="e4m3", scale="e8m0", e8m0_mode="rceil"))
        self.assertEqual(float(y), 960.0)

    def test_non_finite_is_an_error_naming_the_place(self):
        x = torch.zeros(3, 4)
        x[2, 1] = float("nan")
        with self.assertRaisesRegex(Q.QuantError, "row 2, col 1"):
            Q.fake_quantize(x, Q.recipe_spec("snip", "fp8", "fprop", "activation"), name="X")


if __name__ == "__main__":
    unittest.main()
