"""TopK and ArgSort (ops/sort.py) against numpy's stable argsort: several
shapes along a dynamic dimension, every axis, both orders, ties and NaN,
i32 / i64 indices; attribute and dtype errors."""

import numpy as np
import pytest
from oputil import compile_op, run

import dyngraph as dg

K = dg.OpKind
DYN = dg.DYNAMIC_DIM


def order(x, axis, descending):
    """numpy's stable order (lexsort) with torch's NaN placement: NaN above every number."""
    x = np.moveaxis(x, axis, -1)
    nan = np.isnan(x) if x.dtype.kind == "f" else np.zeros(x.shape, bool)
    v = x.astype(np.float64)
    if descending:  # NaN first, then larger values
        idx = np.lexsort((np.where(nan, 0, -v), ~nan), axis=-1)
    else:
        idx = np.lexsort((np.where(nan, 0, v), nan), axis=-1)
    return np.moveaxis(idx, -1, axis)


def with_ties(rng, shape, dtype=np.float32):
    """Values drawn from a few integers: many ties."""
    return rng.integers(-3, 4, shape).astype(dtype)


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_topk_matches_a_stable_sort_at_every_length(engine, rng, largest, axis):
    seq = dg.Dim("seq", min=1, max=64)
    k = 1 if axis == 0 else 3
    cp = compile_op(K.TopK, [[seq, 5, 8]], dg.f32, {"k": k, "axis": axis, "largest": largest},
                    out_dtypes=[dg.f32, dg.i64], n_outputs=2, engine=engine)
    for n in (1, 6, 19):
        x = with_ties(rng, (n, 5, 8)) + rng.standard_normal((n, 5, 8)).astype(np.float32) * (n % 2)
        vals, idx = run(cp, x)
        want = np.take(order(x, axis, largest), np.arange(k), axis=axis)
        assert idx.dtype == np.int64 and idx.shape == want.shape
        np.testing.assert_array_equal(idx, want)
        np.testing.assert_array_equal(vals, np.take_along_axis(x, want, axis=axis))
    assert cp.cache_info().builds == 3


def test_topk_k_may_be_a_dimension_expression(engine, rng):
    """k = seq (the whole axis): a full sort whose length follows the input."""
    seq = dg.Dim("seq", min=1, max=64)
    cp = compile_op(K.TopK, [[2, seq]], dg.f32, {"k": seq, "largest": False}, out_dtypes=[dg.f32, dg.i32],
                    n_outputs=2, engine=engine)
    for n in (1, 4, 33):
        x = with_ties(rng, (2, n))
        vals, idx = run(cp, x)
        assert idx.dtype == np.int32
        np.testing.assert_array_equal(idx, order(x, -1, False))
        np.testing.assert_array_equal(vals, np.sort(x, axis=-1, kind="stable"))


def test_topk_of_integers_and_nan_placement(engine):
    cp = compile_op(K.TopK, [[6]], dg.i32, {"k": 4}, out_dtypes=[dg.i32, dg.i64], n_outputs=2, engine=engine)
    vals, idx = run(cp, np.array([5, -2, 7, 7, 0, 5], np.int32))
    np.testing.assert_array_equal(vals, [7, 7, 5, 5])
    np.testing.assert_array_equal(idx, [2, 3, 0, 5])
    cp = compile_op(K.TopK, [[5]], dg.f32, {"k": 3}, out_dtypes=[dg.f32, dg.i64], n_outputs=2, engine=engine)
    vals, idx = run(cp, np.array([1.0, np.nan, 3.0, np.nan, -np.inf], np.float32))
    np.testing.assert_array_equal(idx, [1, 3, 2])  # NaN above every number, in input order
    cp = compile_op(K.TopK, [[5]], dg.f32, {"k": 5, "largest": False}, out_dtypes=[dg.f32, dg.i64], n_outputs=2,
                    engine=engine)
    vals, idx = run(cp, np.array([1.0, np.nan, 3.0, np.nan, -np.inf], np.float32))
    np.testing.assert_array_equal(idx, [4, 0, 2, 1, 3])


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("axis", [0, -1])
def test_argsort_matches_numpy_stable_at_every_length(engine, rng, descending, axis):
    cp = compile_op(K.ArgSort, [[DYN, DYN]], dg.f32, {"axis": axis, "descending": descending}, out_dtypes=dg.i64,
                    engine=engine)
    for shape in ((1, 1), (3, 17), (40, 2)):
        x = with_ties(rng, shape)
        (idx,) = run(cp, x)
        np.testing.assert_array_equal(idx, order(x, axis, descending))


def test_a_symbolic_k_above_the_axis_is_refused_at_execution(engine):
    n, m = dg.Dim("n", min=1, max=16), dg.Dim("m", min=1, max=16)
    x = dg.LogicalTensor(0, dg.f32, [n])
    v, i = dg.LogicalTensor(1, dg.f32), dg.LogicalTensor(2, dg.i64)
    y, out = dg.LogicalTensor(3, dg.f32, [m]), dg.LogicalTensor(4, dg.f32)
    g = dg.Graph()
    g.add_op(dg.Op(0, K.TopK, [x], [v, i], {"k": m}))
    g.add_op(dg.Op(1, K.Add, [v, y], [out]))
    g.finalize()
    (p,) = g.get_partitions()
    cp = p.compile([x, y], [i, out], engine)
    idx, got = run(cp, np.arange(5, dtype=np.float32), np.zeros(3, np.float32))
    np.testing.assert_array_equal(got, [4, 3, 2])
    np.testing.assert_array_equal(idx, [4, 3, 2])
    with pytest.raises(dg.ShapeError):
        run(cp, np.arange(2, dtype=np.float32), np.zeros(3, np.float32))


def _graph(kind, in_dtype, out_dtypes, attrs, shape=(4, 3)):
    x = dg.LogicalTensor(0, in_dtype, list(shape))
    ys = [dg.LogicalTensor(1 + k, dt) for k, dt in enumerate(out_dtypes)]
    g = dg.Graph(dg.Engine.CPU)
    g.add_op(dg.Op(0, kind, [x], ys, attrs))
    g.finalize()


@pytest.mark.parametrize("attrs,match", [
    ({"k": 0}, "k must be >= 1"),
    ({"k": 4}, "above the size 3"),
    ({"k": 2, "axis": 2}, "out of range|axis"),
    ({"k": 2, "largest": "yes"}, "bool"),
    ({"kk": 2}, "unknown attribute"),
    ({}, "required"),
])
def test_bad_topk_attributes_are_graph_errors(attrs, match):
    with pytest.raises((dg.GraphError, dg.ShapeError), match=match):
        _graph(K.TopK, dg.f32, [dg.f32, dg.i64], attrs)


def test_bad_argsort_attributes_and_dtypes():
    with pytest.raises((dg.GraphError, dg.ShapeError), match="out of range|axis"):
        _graph(K.ArgSort, dg.f32, [dg.i64], {"axis": -3})
    with pytest.raises(dg.GraphError, match="must be one of|bool"):
        _graph(K.ArgSort, dg.f32, [dg.i64], {"descending": 2})
    with pytest.raises(dg.DTypeError):
        _graph(K.ArgSort, dg.boolean, [dg.i64], {})
    with pytest.raises(dg.DTypeError):
        _graph(K.TopK, dg.boolean, [dg.boolean, dg.i64], {"k": 1})
    with pytest.raises(dg.DTypeError):
        _graph(K.TopK, dg.f32, [dg.f32, dg.f32], {"k": 1})  # indices must be integers
