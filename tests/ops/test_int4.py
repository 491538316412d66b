"""4-bit integers (s4: [-8, 7], u4: [0, 15]) through Quantize, Dequantize and
their Dynamic forms, against numpy (ops/quantize.py's arithmetic: f32, ties
to even, saturation to the type's range). They are held one to a byte, the
value in the low 4 bits, as ml_dtypes' ``int4`` / ``uint4`` arrays hold them."""

import ml_dtypes
import numpy as np
import pytest
from oputil import compile_op, run
from reference.quant_numpy import grouped

import dyngraph as dg

K = dg.OpKind
RANGE = {dg.s4: (-8, 7), dg.u4: (0, 15)}


def quantize4(x, inv, zp, dt):
    """clamp(round_half_even(f32(x * inv)) + zp, lo, hi), NaN -> zp, as int64."""
    lo, hi = RANGE[dt]
    with np.errstate(invalid="ignore", over="ignore"):
        p = (np.asarray(x, np.float32) * np.float32(inv)).astype(np.float32)
        r = np.where(np.isnan(p), np.float32(zp), np.rint(p) + np.float32(zp))
    return np.clip(r, lo, hi).astype(np.int64)


def values(rng, shape, scale):
    """Values around the type's range: exact ties (k + 0.5 after scaling), beyond the range, infinities, NaN."""
    x = (rng.uniform(-12, 20, shape) * scale).astype(np.float32)
    flat = x.reshape(-1)
    n = flat.size
    flat[: n // 3] = (rng.integers(-10, 18, n // 3) + 0.5) * scale
    if n >= 9:
        flat[n // 3: n // 3 + 6] = [np.inf, -np.inf, np.nan, 1e30, -1e30, -0.0]
    rng.shuffle(flat)
    return x


@pytest.mark.parametrize("dt", [dg.s4, dg.u4], ids=str)
@pytest.mark.parametrize("scale,zp", [(1.0, 0), (0.25, 3), (0.3, -2)])
def test_quantize_to_4_bits_matches_numpy_at_every_length(dt, scale, zp, rng):
    zp = abs(zp) if dt is dg.u4 else zp
    seq = dg.Dim("seq", min=1, max=512)
    cp = compile_op(K.Quantize, [[seq, 3, 8]], dg.f32, {"scales": [scale], "zps": [zp]}, out_dtypes=dt)
    for n in (1, 7, 33):
        x = values(rng, (n, 3, 8), scale)
        (got,) = run(cp, x)
        assert got.dtype == dt.numpy
        np.testing.assert_array_equal(got.astype(np.int64), quantize4(x, np.float32(1.0 / scale), zp, dt))
    assert cp.cache_info().builds == 3


@pytest.mark.parametrize("dt", [dg.s4, dg.u4], ids=str)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_quantize_and_dequantize_4_bits_per_channel_match_numpy(dt, axis, rng):
    shape = (3, 5, 8)
    c = shape[axis]
    lo, hi = RANGE[dt]
    scales = [float(v) for v in rng.uniform(0.05, 1.0, c)]
    zps = [int(v) for v in rng.integers(lo, hi + 1, c)]
    attrs = {"qtype": "per_channel", "axis": axis, "scales": scales, "zps": zps}
    along = [1, 1, 1]
    along[axis] = c
    inv = np.array([np.float32(1.0 / s) for s in scales], np.float32).reshape(along)
    z = np.array(zps).reshape(along)
    cp = compile_op(K.Quantize, [shape], dg.f32, attrs, out_dtypes=dt)
    x = values(rng, shape, 0.5)
    (q,) = run(cp, x)
    with np.errstate(invalid="ignore", over="ignore"):
        p = (x * inv).astype(np.float32)
        want = np.clip(np.where(np.isnan(p), z, np.rint(p) + z), lo, hi).astype(np.int64)
    np.testing.assert_array_equal(q.astype(np.int64), want)
    cp = compile_op(K.Dequantize, [shape], dt, attrs, out_dtypes=dg.f32)
    (y,) = run(cp, q)
    s = np.array(scales, np.float32).reshape(along)
    np.testing.assert_array_equal(y, ((want - z).astype(np.float32) * s).astype(np.float32))


@pytest.mark.parametrize("dt,x,want", [
    (dg.s4, [-8.5, -100, 7.4, 7.5, 6.5, -7.5, np.nan, np.inf], [-8, -8, 7, 7, 6, -8, 0, 7]),
    (dg.u4, [-0.5, -3, 14.5, 15.5, 99, 0.5, np.nan, -np.inf], [0, 0, 14, 15, 15, 0, 0, 0]),
], ids=str)
def test_quantize_to_4_bits_saturates_at_the_type_range_and_rounds_ties_to_even(dt, x, want):
    cp = compile_op(K.Quantize, [[8]], dg.f32, {"scales": [1.0]}, out_dtypes=dt)
    (got,) = run(cp, np.array(x, np.float32))
    np.testing.assert_array_equal(got.astype(np.int64), want)


@pytest.mark.parametrize("dt", [dg.s4, dg.u4], ids=str)
def test_4_bit_outputs_hold_the_value_in_the_low_bits_as_ml_dtypes_does(dt):
    lo, hi = RANGE[dt]
    cp = compile_op(K.Quantize, [[16]], dg.f32, {"scales": [1.0]}, out_dtypes=dt)
    x = np.arange(lo, hi + 1, dtype=np.float32)
    (got,) = run(cp, x)
    np.testing.assert_array_equal(got.view(np.uint8), x.astype(np.int64).astype(dt.numpy).view(np.uint8))
    assert got.view(np.uint8).max() <= 15


@pytest.mark.parametrize("dt", [dg.s4, dg.u4], ids=str)
def test_every_4_bit_value_dequantizes_exactly(dt):
    lo, hi = RANGE[dt]
    zp = 5 if dt is dg.u4 else -3
    seq = dg.Dim("seq", min=1, max=64)
    cp = compile_op(K.Dequantize, [[seq, 16]], dt, {"scales": [0.125], "zps": [zp]}, out_dtypes=dg.f32)
    q = np.arange(lo, hi + 1).astype(dt.numpy)
    for n in (1, 2, 9):
        (got,) = run(cp, np.tile(q, (n, 1)))
        want = ((np.arange(lo, hi + 1) - zp) * 0.125).astype(np.float32)
        np.testing.assert_array_equal(got, np.tile(want, (n, 1)))


@pytest.mark.parametrize("dt", [dg.s4, dg.u4], ids=str)
def test_dequantize_reads_the_low_4_bits_as_ml_dtypes_does(dt):
    """A byte whose high 4 bits are not zero (data made by another program) reads as its low 4 bits."""
    raw = np.array([0xF8, 0x37, 0x80, 0x0F, 0xFF, 0x10], np.uint8)
    cp = compile_op(K.Dequantize, [[6]], dt, {"scales": [1.0]}, out_dtypes=dg.f32)
    (got,) = run(cp, raw.view(dt.numpy))
    low = raw & 0x0F
    want = np.where(low >= 8, low.astype(np.int64) - 16, low) if dt is dg.s4 else low
    np.testing.assert_array_equal(got, want.astype(np.float32))


@pytest.mark.parametrize("dt", [dg.s4, dg.u4], ids=str)
@pytest.mark.parametrize("zdt", [None, dg.s4, dg.u4, dg.u8, dg.i32], ids=str)
@pytest.mark.parametrize("out", [dg.f32, dg.f16, dg.bf16], ids=str)
def test_dynamic_dequantize_per_group_of_4_bits_matches_numpy(dt, zdt, out, rng):
    """oneDNN's compressed key / value caches: [1, heads, keys, d] in groups of 8 keys, scales in the output's
    type, zero points of another 4-bit or 8-bit type; the number of groups is dynamic."""
    g = dg.Dim("g", min=1, max=64)
    shapes = [[1, 2, 8 * g, 4], [1, 2, g, 4]] + ([[1, 2, g, 4]] if zdt else [])
    cp = compile_op(K.DynamicDequantize, shapes, [dt, out] + ([zdt] if zdt else []),
                    {"qtype": "per_group", "group_shape": [1, 1, 8, 1], "axis": 2}, out_dtypes=out)
    lo, hi = RANGE[dt]
    zlo, zhi = RANGE[zdt] if zdt in RANGE else (0, 15) if zdt is dg.u8 else RANGE[dt]
    for groups in (1, 3, 6):
        q = rng.integers(lo, hi + 1, (1, 2, 8 * groups, 4))
        s = (rng.integers(1, 16, (1, 2, groups, 4)) / 16).astype(np.float32)
        z = rng.integers(zlo, zhi + 1, (1, 2, groups, 4)) if zdt else np.zeros((1, 2, groups, 4), np.int64)
        (got,) = run(cp, q.astype(dt.numpy), s.astype(out.numpy), *([z.astype(zdt.numpy)] if zdt else []))
        want = ((q - grouped(z, q.shape)).astype(np.float32) * grouped(s, q.shape)).astype(np.float32)
        np.testing.assert_array_equal(got.astype(np.float32), want.astype(out.numpy).astype(np.float32))


@pytest.mark.parametrize("dt", [dg.s4, dg.u4], ids=str)
def test_dynamic_dequantize_of_4_bits_per_channel_and_per_tensor(dt, rng):
    lo, hi = RANGE[dt]
    cp = compile_op(K.DynamicDequantize, [[3, dg.DYNAMIC_DIM], [3], [3]], [dt, dg.f32, dt],
                    {"qtype": "per_channel", "axis": 0}, out_dtypes=dg.f32)
    for n in (1, 4, 10):
        q = rng.integers(lo, hi + 1, (3, n))
        s = rng.uniform(0.01, 1, 3).astype(np.float32)
        z = rng.integers(lo, hi + 1, 3)
        (got,) = run(cp, q.astype(dt.numpy), s, z.astype(dt.numpy))
        np.testing.assert_array_equal(got, ((q - z[:, None]).astype(np.float32) * s[:, None]).astype(np.float32))
    cp = compile_op(K.DynamicDequantize, [[dg.DYNAMIC_DIM, 4], []], [dt, dg.f32], out_dtypes=dg.f32)
    q = rng.integers(lo, hi + 1, (5, 4))
    (got,) = run(cp, q.astype(dt.numpy), np.array(0.5, np.float32))
    np.testing.assert_array_equal(got, q.astype(np.float32) * np.float32(0.5))


@pytest.mark.parametrize("dt", [dg.s4, dg.u4], ids=str)
def test_dynamic_quantize_to_4_bits_per_channel_matches_numpy(dt, rng):
    seq = dg.Dim("seq", min=1, max=512)
    cp = compile_op(K.DynamicQuantize, [[seq, 6], [6], [6]], [dg.f32, dg.f32, dt], {"qtype": "per_channel", "axis": 1},
                    out_dtypes=dt)
    lo, hi = RANGE[dt]
    for n in (1, 4, 17):
        s = rng.uniform(0.1, 1.0, 6).astype(np.float32)
        x = values(rng, (n, 6), 1.0) * s
        z = rng.integers(lo, hi + 1, 6)
        (got,) = run(cp, x, s, z.astype(dt.numpy))
        inv = (1.0 / s.astype(np.float64)).astype(np.float32)
        want = np.stack([quantize4(x[:, c], inv[c], z[c], dt) for c in range(6)], axis=1)
        np.testing.assert_array_equal(got.astype(np.int64), want)


@pytest.mark.parametrize("dt,zps", [(dg.s4, [8]), (dg.s4, [-9]), (dg.u4, [16]), (dg.u4, [-1])], ids=str)
def test_4_bit_zero_points_must_lie_in_the_type_range(dt, zps):
    with pytest.raises(dg.ShapeError, match=f"range of {dt}"):
        compile_op(K.Quantize, [[4]], dg.f32, {"scales": [1.0], "zps": zps}, out_dtypes=dt)


@pytest.mark.parametrize("kind,dtypes,out", [
    (K.ReLU, [dg.s4], None),
    (K.Add, [dg.u4, dg.u4], None),
    (K.MatMul, [dg.s4, dg.s4], None),
    (K.TypeCast, [dg.s4], dg.f32),
    (K.TypeCast, [dg.f32], dg.u4),
    (K.QuantizedMatMul, [dg.s4, dg.s4], None),
], ids=str)
def test_other_ops_refuse_4_bit_types_with_a_dtype_error(kind, dtypes, out):
    attrs = {"src_scale": 1.0, "wei_scales": [1.0]} if kind is K.QuantizedMatMul else {}
    with pytest.raises(dg.DTypeError, match="s4|u4"):
        compile_op(kind, [[4, 4]] * len(dtypes), dtypes, attrs, out_dtypes=out)


def test_4_bit_data_must_come_as_int4_and_uint4_arrays():
    cp = compile_op(K.Dequantize, [[3]], dg.s4, {"scales": [1.0]}, out_dtypes=dg.f32)
    for bad in (np.zeros(3, np.int8), np.zeros(3, np.uint8), np.zeros(3, ml_dtypes.uint4)):
        with pytest.raises(dg.DTypeError):
            run(cp, bad)
        with pytest.raises(dg.DTypeError):
            cp(bad)
    (got,) = cp(np.array([-8, 0, 7], ml_dtypes.int4))
    np.testing.assert_array_equal(got, [-8, 0, 7])


def test_a_4_bit_partition_is_saved_and_loaded(tmp_path, rng):
    """u4 weights in groups of 16 rows with u8 zero points and f16 scales (gated-MLP style), all constants:
    DynamicDequantize -> MatMul, compiled with a dynamic batch, saved and loaded in this process."""
    b = dg.GraphBuilder()
    x = b.input("x", dg.f16, [dg.Dim("batch", max=64), 32])
    wq = rng.integers(0, 16, (32, 8))
    sc = (rng.integers(1, 8, (2, 8)) / 8).astype(np.float16)
    zp = rng.integers(0, 16, (2, 8)).astype(np.uint8)
    w = b.op(K.DynamicDequantize, [b.constant("w", wq.astype(ml_dtypes.uint4)), b.constant("s", sc),
                                   b.constant("z", zp)], {"qtype": "per_group", "group_shape": [16, 1]},
             dtype=dg.f16)
    b.output(b.op(K.MatMul, [x, w]))
    cp = b.compile(dg.Engine(num_threads=1))
    wf = (wq - grouped(zp, wq.shape).astype(np.int64)) * grouped(sc, wq.shape).astype(np.float64)
    for n in (1, 3, 8):
        xs = (rng.integers(-8, 9, (n, 32)) / 8).astype(np.float16)
        (got,) = cp(xs)
        np.testing.assert_allclose(got.astype(np.float64), xs.astype(np.float64) @ wf, rtol=2**-10, atol=2**-10)
    cp.save(tmp_path / "u4.dg")
    back = dg.load(tmp_path / "u4.dg")
    np.testing.assert_array_equal(back(xs)[0], got)
