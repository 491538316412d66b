"""Quantize, Dequantize, DynamicQuantize and DynamicDequantize (oneDNN
Graph's semantics, ops/quantize.py) against numpy, compiled once and run at
several shapes; u8 and s8 data in and out of partitions; errors.

The arithmetic is defined exactly (f32, each step rounded once, ties to
even), so comparisons are exact."""

import numpy as np
import pytest
from oputil import compile_op, run
from reference.quant_numpy import dequantize, grouped, quantize

import dyngraph as dg

K = dg.OpKind
D = dg.DYNAMIC_DIM
NP = {dg.u8: np.uint8, dg.s8: np.int8}


def values(rng, shape, scale=1.0):
    """Random values, with ties (k + 0.5 after scaling), saturating values and infinities among them."""
    x = (rng.standard_normal(shape) * 100 * scale).astype(np.float32)
    flat = x.reshape(-1)
    n = flat.size
    flat[: n // 4] = (rng.integers(-200, 200, n // 4) + 0.5) * scale  # exact ties
    if n >= 8:
        flat[n // 4] = np.inf
        flat[n // 4 + 1] = -np.inf
        flat[n // 4 + 2] = 1e30
    rng.shuffle(flat)
    return x


# -- Quantize / Dequantize (attributes) -----------------------------------------------------------


@pytest.mark.parametrize("qdt", [dg.u8, dg.s8])
@pytest.mark.parametrize("scale,zp", [(0.5, 0), (0.1, 3), (1.0, -7), (0.0731, 100)])
def test_quantize_per_tensor_matches_numpy_at_every_length(qdt, scale, zp, rng):
    if qdt is dg.u8 and zp < 0:
        zp = -zp
    if qdt is dg.s8 and zp > 127:
        zp = 27
    seq = dg.Dim("seq", min=1, max=512)
    cp = compile_op(K.Quantize, [[seq, 3, 8]], dg.f32, {"scales": [scale], "zps": [zp]}, out_dtypes=qdt)
    for n in (1, 7, 33):
        x = values(rng, (n, 3, 8), scale)
        (got,) = run(cp, x)
        assert got.dtype == NP[qdt]
        np.testing.assert_array_equal(got, quantize(x, [scale], [zp], NP[qdt]))
    assert cp.cache_info().builds == 3


def test_quantize_rounds_ties_to_even_and_nan_to_the_zero_point():
    cp = compile_op(K.Quantize, [[8]], dg.f32, {"scales": [1.0], "zps": [10]}, out_dtypes=dg.u8)
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, np.nan, 300, -300], np.float32)
    (got,) = run(cp, x)
    np.testing.assert_array_equal(got, [10, 12, 12, 10, 8, 10, 255, 0])


@pytest.mark.parametrize("qdt", [dg.u8, dg.s8])
@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_quantize_per_channel_matches_numpy(qdt, axis, rng):
    shape = (3, 5, 8)
    c = shape[axis]
    scales = list(rng.uniform(0.01, 2.0, c))
    zps = list(rng.integers(0, 50, c)) if qdt is dg.u8 else list(rng.integers(-20, 20, c))
    cp = compile_op(K.Quantize, [shape], dg.f32, {"qtype": "per_channel", "axis": axis, "scales": scales, "zps": zps},
                    out_dtypes=qdt)
    x = values(rng, shape)
    (got,) = run(cp, x)
    np.testing.assert_array_equal(got, quantize(x, scales, zps, NP[qdt], axis=axis % 3))


def test_quantize_per_channel_along_a_dynamic_axis_checks_its_length(rng):
    n = dg.Dim("n", min=1, max=64)
    cp = compile_op(K.Quantize, [[n, 4]], dg.f32, {"qtype": "per_channel", "axis": 0, "scales": [0.5, 1.0, 2.0]},
                    out_dtypes=dg.s8)
    x = values(rng, (3, 4))
    (got,) = run(cp, x)
    np.testing.assert_array_equal(got, quantize(x, [0.5, 1.0, 2.0], None, np.int8, axis=0))
    with pytest.raises(dg.ShapeError):
        run(cp, values(rng, (4, 4)))


@pytest.mark.parametrize("qdt", [dg.u8, dg.s8])
@pytest.mark.parametrize("out", [dg.f32, dg.f16])
def test_dequantize_per_tensor_matches_numpy_at_every_length(qdt, out, rng):
    seq = dg.Dim("seq", min=1, max=512)
    zp = 128 if qdt is dg.u8 else -3
    cp = compile_op(K.Dequantize, [[2, seq]], qdt, {"scales": [0.0731], "zps": [zp]}, out_dtypes=out)
    lo, hi = (0, 256) if qdt is dg.u8 else (-128, 128)
    for n in (1, 9, 64):
        q = rng.integers(lo, hi, (2, n)).astype(NP[qdt])
        (got,) = run(cp, q)
        want = dequantize(q, [0.0731], [zp]).astype(out.numpy)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_dequantize_per_channel_matches_numpy(axis, rng):
    shape = (4, 6)
    c = shape[axis]
    scales, zps = list(rng.uniform(0.001, 1.0, c)), list(rng.integers(-10, 10, c))
    cp = compile_op(K.Dequantize, [shape], dg.s8, {"qtype": "per_channel", "axis": axis, "scales": scales, "zps": zps},
                    out_dtypes=dg.f32)
    q = rng.integers(-128, 128, shape).astype(np.int8)
    (got,) = run(cp, q)
    np.testing.assert_array_equal(got, dequantize(q, scales, zps, axis=axis % 2))


def test_quantize_then_dequantize_in_one_partition(rng):
    """A fake-quantization round trip (oneDNN's int8 graphs are full of them): values come back
    on the grid of the scale, clamped to the type's range."""
    seq = dg.Dim("seq", min=1, max=100)
    x, q, y = (dg.LogicalTensor(0, dg.f32, [seq, 16]), dg.LogicalTensor(1, dg.u8),
               dg.LogicalTensor(2, dg.f32))
    attrs = {"scales": [0.25], "zps": [128]}
    g = dg.Graph(dg.Engine.CPU)
    g.add_op(dg.Op(0, K.Quantize, [x], [q], attrs))
    g.add_op(dg.Op(1, K.Dequantize, [q], [y], attrs))
    g.finalize()
    (p,) = g.get_partitions()
    cp = p.compile([x], [y], dg.Engine(dg.Engine.CPU, num_threads=1))
    for n in (1, 5, 40):
        xs = values(rng, (n, 16), 0.25)
        (got,) = run(cp, xs)
        np.testing.assert_array_equal(got, dequantize(quantize(xs, [0.25], [128], np.uint8), [0.25], [128]))


# -- Dynamic forms (scales and zero points as tensors) --------------------------------------------


@pytest.mark.parametrize("zdt", [None, dg.u8, dg.s8, dg.i32])
def test_dynamic_quantize_per_tensor_matches_numpy(zdt, rng):
    seq = dg.Dim("seq", min=1, max=512)
    qdt = dg.s8 if zdt is dg.s8 else dg.u8
    shapes = [[seq, 8], [1]] + ([[1]] if zdt else [])
    cp = compile_op(K.DynamicQuantize, shapes, [dg.f32, dg.f32] + ([zdt] if zdt else []), out_dtypes=qdt)
    for n in (1, 6, 50):
        x = values(rng, (n, 8), 0.3)
        s = np.array([rng.uniform(0.05, 0.5)], np.float32)
        z = np.array([5], zdt.numpy) if zdt else None
        (got,) = run(cp, x, s, *([z] if zdt else []))
        inv = [np.float32(1.0 / float(s[0]))]
        np.testing.assert_array_equal(got, quantize(x, None, z, NP[qdt], inv_scales=inv))


def test_dynamic_quantize_per_channel_matches_numpy(rng):
    seq = dg.Dim("seq", min=1, max=512)
    cp = compile_op(K.DynamicQuantize, [[seq, 6], [6], [6]], [dg.f32, dg.f32, dg.i32], {"qtype": "per_channel", "axis": 1},
                    out_dtypes=dg.s8)
    for n in (1, 4, 17):
        x = values(rng, (n, 6), 0.5)
        s = rng.uniform(0.1, 1.0, 6).astype(np.float32)
        z = rng.integers(-5, 5, 6).astype(np.int32)
        (got,) = run(cp, x, s, z)
        inv = [np.float32(1.0 / float(v)) for v in s]
        np.testing.assert_array_equal(got, quantize(x, None, z, np.int8, axis=1, inv_scales=inv))


@pytest.mark.parametrize("out", [dg.f32, dg.f16])
def test_dynamic_dequantize_per_group_matches_numpy(out, rng):
    """oneDNN's compressed-key case: s8 [1, heads, keys, d] in groups of 32 keys, f16 scales, u8 zero points;
    the key count is dynamic (a multiple of the group)."""
    g = dg.Dim("g", min=1, max=64)
    shapes = [[1, 4, 32 * g, 8], [1, 4, g, 8], [1, 4, g, 8]]
    cp = compile_op(K.DynamicDequantize, shapes, [dg.s8, out, dg.u8],
                    {"qtype": "per_group", "group_shape": [1, 1, 32, 1], "axis": 2}, out_dtypes=out)
    for groups in (1, 2, 5):
        q = rng.integers(-128, 128, (1, 4, 32 * groups, 8)).astype(np.int8)
        s = rng.uniform(0.01, 0.1, (1, 4, groups, 8)).astype(out.numpy)
        z = rng.integers(0, 10, (1, 4, groups, 8)).astype(np.uint8)
        (got,) = run(cp, q, s, z)
        full_s, full_z = grouped(s.astype(np.float32), q.shape), grouped(z, q.shape)
        want = ((q.astype(np.float32) - full_z.astype(np.float32)) * full_s).astype(out.numpy)
        np.testing.assert_array_equal(got, want)


def test_dynamic_dequantize_per_channel_and_per_tensor(rng):
    cp = compile_op(K.DynamicDequantize, [[3, D], [3]], [dg.u8, dg.f32], {"qtype": "per_channel", "axis": 0},
                    out_dtypes=dg.f32)
    for n in (1, 10):
        q = rng.integers(0, 256, (3, n)).astype(np.uint8)
        s = rng.uniform(0.01, 1, 3).astype(np.float32)
        (got,) = run(cp, q, s)
        np.testing.assert_array_equal(got, dequantize(q, s, None, axis=0))
    cp = compile_op(K.DynamicDequantize, [[D, 4], []], [dg.s8, dg.f32], out_dtypes=dg.f32)
    q = rng.integers(-128, 128, (5, 4)).astype(np.int8)
    (got,) = run(cp, q, np.array(0.5, np.float32))
    np.testing.assert_array_equal(got, q.astype(np.float32) * np.float32(0.5))


# -- data types at the partition's boundary -------------------------------------------------------


def test_u8_and_s8_data_must_come_as_uint8_and_int8_arrays():
    cp = compile_op(K.Dequantize, [[4]], dg.u8, {"scales": [1.0]}, out_dtypes=dg.f32)
    with pytest.raises(dg.DTypeError):
        run(cp, np.arange(4, dtype=np.int8))
    with pytest.raises(dg.DTypeError):
        run(cp, np.arange(4, dtype=np.int32))
    (got,) = run(cp, np.array([0, 1, 200, 255], np.uint8))
    np.testing.assert_array_equal(got, [0, 1, 200, 255])


def test_s8_constants_are_saved_and_loaded(tmp_path, rng):
    w = dg.LogicalTensor(0, dg.s8, [4, 3], property=dg.CONSTANT)
    y = dg.LogicalTensor(1, dg.f32)
    x = dg.LogicalTensor(2, dg.f32, [D, 3])
    s = dg.LogicalTensor(3, dg.f32)
    g = dg.Graph(dg.Engine.CPU)
    g.add_op(dg.Op(0, K.Dequantize, [w], [y], {"qtype": "per_channel", "axis": 0, "scales": [0.5, 1, 2, 4]}))
    g.add_op(dg.Op(1, K.MatMul, [x, y], [s], {"transpose_b": True}))
    g.finalize()
    (p,) = g.get_partitions()
    W = rng.integers(-128, 128, (4, 3)).astype(np.int8)
    cp = p.compile([x, w], [s], dg.Engine(dg.Engine.CPU, num_threads=1), constants={0: W})
    xs = rng.standard_normal((5, 3)).astype(np.float32)
    want = xs.astype(np.float64) @ (W.astype(np.float64) * np.array([[0.5], [1], [2], [4]])).T
    np.testing.assert_allclose(run(cp, xs)[0], want, rtol=1e-5, atol=1e-5)
    cp.save(tmp_path / "w.dg")
    back = dg.load(tmp_path / "w.dg")
    np.testing.assert_array_equal(back(xs)[0], run(cp, xs)[0])


# -- errors ---------------------------------------------------------------------------------------


def _graph_error(kind, in_dtype, out_dtype, attrs, shape=(4, 3)):
    x = dg.LogicalTensor(0, in_dtype, list(shape))
    y = dg.LogicalTensor(1, out_dtype)
    g = dg.Graph(dg.Engine.CPU)
    g.add_op(dg.Op(0, kind, [x], [y], attrs))
    g.finalize()


@pytest.mark.parametrize("attrs,match", [
    ({"scales": [0.0]}, "positive"),
    ({"scales": [-1.0]}, "positive"),
    ({"scales": [float("nan")]}, "finite"),
    ({"scales": [1.0, 2.0]}, "one scale"),
    ({"scales": [1.0], "zps": [256]}, "range of u8"),
    ({"scales": [1.0], "zps": [-1]}, "range of u8"),
    ({"qtype": "per_channel", "axis": 1, "scales": [1.0, 2.0]}, "3 scales|2 != 3|vs 2"),
    ({"qtype": "per_channel", "axis": 2, "scales": [1.0] * 3}, "out of range"),
    ({"qtype": "per_channel", "axis": 1, "scales": [1.0] * 3, "zps": [1, 2]}, "zero points"),
    ({"qtype": "per_axis", "scales": [1.0]}, "must be one of"),
    ({"scale": [1.0]}, "unknown attribute"),
    ({}, "required"),
])
def test_bad_quantize_attributes_are_graph_errors(attrs, match):
    with pytest.raises((dg.GraphError, dg.ShapeError), match=match):
        _graph_error(K.Quantize, dg.f32, dg.u8, attrs)


def test_quantization_dtypes_are_checked():
    with pytest.raises(dg.DTypeError, match="u8, s8, s4, u4, f8_e4m3 or f8_e5m2"):
        _graph_error(K.Quantize, dg.f32, dg.f32, {"scales": [1.0]})
    with pytest.raises(dg.DTypeError, match="u8, s8, s4, u4, f8_e4m3 or f8_e5m2"):
        _graph_error(K.Dequantize, dg.i32, dg.f32, {"scales": [1.0]})
    with pytest.raises(dg.DTypeError):
        _graph_error(K.Quantize, dg.i32, dg.s8, {"scales": [1.0]})
    with pytest.raises(dg.DTypeError):
        _graph_error(K.Dequantize, dg.s8, dg.i32, {"scales": [1.0]})
    # other ops do not compute on u8 / s8
    with pytest.raises(dg.DTypeError):
        _graph_error(K.ReLU, dg.s8, dg.s8, {})
    with pytest.raises(dg.DTypeError):
        _graph_error(K.TypeCast, dg.f32, dg.u8, {})
    with pytest.raises(dg.DTypeError):
        _graph_error(K.TypeCast, dg.u8, dg.f32, {})


def test_bad_dynamic_scale_shapes_are_shape_errors():
    def compile_dd(shapes, dtypes, attrs):
        compile_op(K.DynamicDequantize, shapes, dtypes, attrs, out_dtypes=dg.f32)

    with pytest.raises(dg.ShapeError, match="one scale"):
        compile_dd([[4, 6], [2]], [dg.s8, dg.f32], {})
    with pytest.raises(dg.ShapeError, match="per-channel"):
        compile_dd([[4, 6], [4]], [dg.s8, dg.f32], {"qtype": "per_channel", "axis": 1})
    with pytest.raises(dg.ShapeError, match="groups of 4"):
        compile_dd([[4, 6], [1, 2]], [dg.s8, dg.f32], {"qtype": "per_group", "group_shape": [4, 4]})
    with pytest.raises(dg.ShapeError, match="zps"):
        compile_dd([[4, 6], [6], [3]], [dg.s8, dg.f32, dg.s8], {"qtype": "per_channel", "axis": 1})
    with pytest.raises(dg.DTypeError):
        compile_dd([[4, 6], [6], [6]], [dg.s8, dg.f32, dg.f32], {"qtype": "per_channel", "axis": 1})
