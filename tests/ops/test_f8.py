"""8-bit floats (f8_e4m3: OCP E4M3 "fn", f8_e5m2: OCP E5M2) through Quantize,
Dequantize and TypeCast, against ml_dtypes' casts (``float8_e4m3fn``,
``float8_e5m2``): f32 -> f8 rounds once to the nearest value, ties to even,
without saturation, as oneDNN converts (ops/quantize.py). Comparisons are
exact, bit for bit."""

import ml_dtypes
import numpy as np
import pytest
from oputil import compile_op, run

import dyngraph as dg

K = dg.OpKind
F8 = [dg.f8_e4m3, dg.f8_e5m2]


def finite_values(dt):
    """Every finite value of the type, ascending (+0 once)."""
    v = np.arange(256, dtype=np.uint8).view(dt.numpy).astype(np.float64)
    return np.unique(v[np.isfinite(v)])


def hard_values(dt, rng, n):
    """n f32 values: every finite value of the type, the halfway points between neighbours (exact ties)
    and one f32 ulp either side of them, values beyond the largest, tiny ones (f32 subnormals, -0.0),
    infinities, NaN, and random magnitudes from 2^-20 to 2^20; shuffled, tiled to n."""
    v = finite_values(dt)
    mid = (v[:-1] + v[1:]) / 2  # exact in f32
    m32 = mid.astype(np.float32)
    big = v[-1]
    edge = np.array([big * 1.03, big * 1.07, big * 1.2, big * 4, 1e30, np.inf, -np.inf, np.nan, 1e-45, -1e-45,
                     -0.0, 2.0**-30], np.float64)
    rand = np.exp2(rng.uniform(-20, 20, 400)) * rng.choice([-1.0, 1.0], 400)
    x = np.concatenate([v, mid, np.nextafter(m32, np.float32(np.inf)), np.nextafter(m32, np.float32(-np.inf)),
                        edge, -edge, rand]).astype(np.float32)
    x = np.resize(rng.permutation(x), n)
    return x


def f8_of(x, dt, inv=np.float32(1.0)):
    """ml_dtypes' rounding of the f32 product x * inv."""
    with np.errstate(over="ignore", invalid="ignore"):
        return (np.asarray(x, np.float32) * np.float32(inv)).astype(np.float32).astype(dt.numpy)


def bits(a):
    return np.asarray(a).view(np.uint8)


@pytest.mark.parametrize("dt", F8, ids=str)
@pytest.mark.parametrize("scale", [1.0, 0.25, 0.3])
def test_quantize_to_f8_matches_ml_dtypes_at_every_length(dt, scale, rng):
    seq = dg.Dim("seq", min=1, max=4096)
    cp = compile_op(K.Quantize, [[seq, 64]], dg.f32, {"scales": [scale]}, out_dtypes=dt)
    inv = np.float32(1.0 / scale)
    for n in (1, 13, 40):
        x = hard_values(dt, rng, n * 64).reshape(n, 64)
        (got,) = run(cp, x)
        assert got.dtype == dt.numpy
        np.testing.assert_array_equal(bits(got), bits(f8_of(x, dt, inv)))
    assert cp.cache_info().builds == 3


def test_f8_e4m3_turns_overflow_and_infinities_into_nan():
    """No saturation, no infinities: 464 (halfway to the next binade's first value) rounds to 448 (even),
    anything above it, and +-inf, becomes NaN of its sign."""
    cp = compile_op(K.Quantize, [[8]], dg.f32, {"scales": [1.0]}, out_dtypes=dg.f8_e4m3)
    x = np.array([448, 464, 464.0001, 1e6, np.inf, -np.inf, -449, np.nan], np.float32)
    (got,) = run(cp, x)
    np.testing.assert_array_equal(got.astype(np.float32), [448, 448, np.nan, np.nan, np.nan, np.nan, -448, np.nan])
    assert list(bits(got)[[3, 4, 5]]) == [0x7F, 0x7F, 0xFF]


def test_f8_e5m2_turns_overflow_into_infinity():
    cp = compile_op(K.Quantize, [[6]], dg.f32, {"scales": [1.0]}, out_dtypes=dg.f8_e5m2)
    x = np.array([57344, 61439, 61440, -1e9, np.inf, np.nan], np.float32)
    (got,) = run(cp, x)
    np.testing.assert_array_equal(got.astype(np.float32), [57344, 57344, np.inf, -np.inf, np.inf, np.nan])


@pytest.mark.parametrize("dt,tiny", [(dg.f8_e4m3, 2.0**-9), (dg.f8_e5m2, 2.0**-16)], ids=str)
def test_f8_subnormals_round_to_nearest_even(dt, tiny):
    """Multiples of the smallest subnormal; halfway points go to the even multiple."""
    cp = compile_op(K.Quantize, [[7]], dg.f32, {"scales": [1.0]}, out_dtypes=dt)
    x = np.array([0.5, 1.5, 2.5, 0.4999, 1.0, 3.0, -2.5], np.float64) * tiny
    (got,) = run(cp, x.astype(np.float32))
    np.testing.assert_array_equal(got.astype(np.float64), np.array([0, 2, 2, 0, 1, 3, -2]) * tiny)
    assert bits(got)[0] == 0x00 and bits(got)[6] == 0x82


@pytest.mark.parametrize("dt", F8, ids=str)
@pytest.mark.parametrize("as_bits", [False, True], ids=["float8", "uint8-bits"])
def test_every_f8_value_dequantizes_exactly(dt, as_bits):
    seq = dg.Dim("seq", min=1, max=64)
    cp = compile_op(K.Dequantize, [[seq, 256]], dt, {"scales": [0.5]}, out_dtypes=dg.f32)
    codes = np.arange(256, dtype=np.uint8)
    for n in (1, 2, 5):
        q = np.tile(codes, (n, 1))
        (got,) = run(cp, q if as_bits else q.view(dt.numpy))
        want = (q.view(dt.numpy).astype(np.float32) * np.float32(0.5)).astype(np.float32)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dt", F8, ids=str)
def test_dequantize_f8_per_channel_matches_numpy(dt, rng):
    scales = [0.5, 2.0, 0.3, 1.0, 8.0]
    cp = compile_op(K.Dequantize, [[dg.DYNAMIC_DIM, 5]], dt, {"qtype": "per_channel", "axis": 1, "scales": scales},
                    out_dtypes=dg.f32)
    for n in (1, 3, 17):
        q = rng.integers(0, 256, (n, 5)).astype(np.uint8).view(dt.numpy)
        (got,) = run(cp, q)
        want = (q.astype(np.float32) * np.array(scales, np.float32)).astype(np.float32)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dt", F8, ids=str)
def test_dynamic_dequantize_of_f8_per_group_matches_numpy(dt, rng):
    """f16 scales per group of 4 along the last axis; the row count is dynamic."""
    cp = compile_op(K.DynamicDequantize, [[dg.DYNAMIC_DIM, 16], [dg.DYNAMIC_DIM, 4]], [dt, dg.f16],
                    {"qtype": "per_group", "group_shape": [1, 4]}, out_dtypes=dg.f16)
    for n in (1, 5, 12):
        q = (rng.integers(-16, 17, (n, 16)) / 8).astype(dt.numpy)
        s = (rng.integers(1, 9, (n, 4)) / 4).astype(np.float16)
        (got,) = run(cp, q, s)
        want = (q.astype(np.float32) * np.repeat(s.astype(np.float32), 4, axis=1)).astype(np.float16)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dt", F8, ids=str)
def test_dynamic_quantize_to_f8_per_tensor_matches_ml_dtypes(dt, rng):
    seq = dg.Dim("seq", min=1, max=512)
    cp = compile_op(K.DynamicQuantize, [[seq, 32], [1]], [dg.f32, dg.f32], out_dtypes=dt)
    for n in (1, 6, 21):
        x = hard_values(dt, rng, n * 32).reshape(n, 32)
        s = np.array([rng.choice([0.5, 0.3, 4.0])], np.float32)
        (got,) = run(cp, x, s)
        np.testing.assert_array_equal(bits(got), bits(f8_of(x, dt, np.float32(1.0 / np.float64(s[0])))))


@pytest.mark.parametrize("src", [dg.f32, dg.f16, dg.bf16], ids=str)
@pytest.mark.parametrize("dt", F8, ids=str)
def test_typecast_of_floats_to_f8_matches_ml_dtypes(src, dt, rng):
    cp = compile_op(K.TypeCast, [[dg.DYNAMIC_DIM, 32]], src, out_dtypes=dt)
    for n in (1, 4, 9):
        with np.errstate(over="ignore"):  # (f16: the largest values become infinities)
            x = hard_values(dt, rng, n * 32).reshape(n, 32).astype(src.numpy)
        (got,) = run(cp, x)
        np.testing.assert_array_equal(bits(got), bits(f8_of(x.astype(np.float32), dt)))


@pytest.mark.parametrize("dst", [dg.f32, dg.f16, dg.bf16, dg.f8_e4m3, dg.f8_e5m2], ids=str)
@pytest.mark.parametrize("dt", F8, ids=str)
def test_typecast_of_f8_to_floats_matches_ml_dtypes(dt, dst):
    """Every f8 value, widened (exact) or rounded to the other f8 type."""
    cp = compile_op(K.TypeCast, [[dg.DYNAMIC_DIM, 256]], dt, out_dtypes=dst)
    q = np.arange(256, dtype=np.uint8).view(dt.numpy)
    for n in (1, 3, 4):
        (got,) = run(cp, np.tile(q, (n, 1)))
        want = np.tile(q.astype(np.float32).astype(dst.numpy), (n, 1))
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_f8_takes_no_zero_points():
    with pytest.raises(dg.DTypeError, match="zero points are not supported for f8_e4m3"):
        compile_op(K.Quantize, [[4]], dg.f32, {"scales": [1.0], "zps": [2]}, out_dtypes=dg.f8_e4m3)
    with pytest.raises(dg.DTypeError, match="zero points are not supported for f8_e5m2"):
        compile_op(K.DynamicDequantize, [[4], [1], [1]], [dg.f8_e5m2, dg.f32, dg.u8], out_dtypes=dg.f32)
    cp = compile_op(K.Dequantize, [[2]], dg.f8_e5m2, {"scales": [1.0], "zps": [0]}, out_dtypes=dg.f32)
    (got,) = run(cp, np.array([1.5, -2], dg.f8_e5m2.numpy))
    np.testing.assert_array_equal(got, [1.5, -2])


@pytest.mark.parametrize("kind,dtypes,out", [
    (K.ReLU, [dg.f8_e4m3], None),
    (K.Add, [dg.f8_e5m2, dg.f8_e5m2], None),
    (K.MatMul, [dg.f8_e4m3, dg.f8_e4m3], None),
    (K.TypeCast, [dg.f8_e4m3], dg.i32),
    (K.TypeCast, [dg.i32], dg.f8_e5m2),
    (K.TypeCast, [dg.f8_e4m3], dg.s4),
], ids=str)
def test_other_ops_refuse_f8_with_a_dtype_error(kind, dtypes, out):
    with pytest.raises(dg.DTypeError, match="f8|s4"):
        compile_op(kind, [[4, 4]] * len(dtypes), dtypes, out_dtypes=out)


def test_f8_data_must_come_as_float8_or_uint8_arrays():
    cp = compile_op(K.Dequantize, [[2]], dg.f8_e4m3, {"scales": [1.0]}, out_dtypes=dg.f32)
    for bad in (np.zeros(2, np.int8), np.zeros(2, dg.f8_e5m2.numpy), np.zeros(2, np.float32)):
        with pytest.raises(dg.DTypeError):
            run(cp, bad)
        with pytest.raises(dg.DTypeError):
            cp(bad)
    (got,) = cp(np.array([0x38, 0xC0], np.uint8))  # the bits of 1.0 and -2.0
    np.testing.assert_array_equal(got, [1.0, -2.0])


def test_an_f8_partition_is_saved_and_loaded(tmp_path, rng):
    """f8 weights (a constant, given as bits) -> Dequantize -> MatMul -> Quantize to f8, one partition;
    not fused into the int8 product (which takes u8 / s8 only)."""
    b = dg.GraphBuilder()
    x = b.input("x", dg.f8_e4m3, [dg.Dim("n", max=64), 16])
    wq = (rng.integers(-16, 17, (16, 8)) / 8).astype(dg.f8_e4m3.numpy).view(np.uint8)  # k/8: sums exact in f32
    w = b.constant("w", wq, dtype=dg.f8_e4m3)
    xd = b.op(K.Dequantize, [x], {"scales": [0.5]}, dtype=dg.f32)
    wd = b.op(K.Dequantize, [w], {"scales": [0.25]}, dtype=dg.f32)
    y = b.op(K.MatMul, [xd, wd])
    b.output(b.op(K.Quantize, [y], {"scales": [2.0]}, dtype=dg.f8_e5m2))
    cp = b.compile(dg.Engine(num_threads=1))
    assert K.QuantizedMatMul not in {op.kind for op in cp.program.ops}
    xs = (rng.integers(-8, 9, (5, 16)) / 4).astype(dg.f8_e4m3.numpy)
    want_y = (xs.astype(np.float64) * 0.5) @ (wq.view(dg.f8_e4m3.numpy).astype(np.float64) * 0.25)
    (got,) = cp(xs)
    np.testing.assert_array_equal(bits(got), bits(f8_of(want_y.astype(np.float32), dg.f8_e5m2, 0.5)))
    cp.save(tmp_path / "f8.dg")
    back = dg.load(tmp_path / "f8.dg")
    np.testing.assert_array_equal(bits(back(xs)[0]), bits(got))
