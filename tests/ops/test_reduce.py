"""ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd and ArgMax against numpy.

Every test compiles its op once with dynamic dimensions and runs several
concrete shapes through that one compiled partition.
"""

import numpy as np
import pytest

import dyngraph as dg
from oputil import compile_op, run

D = dg.DYNAMIC_DIM
K = dg.OpKind

REDUCE = {K.ReduceSum: np.sum, K.ReduceMean: np.mean, K.ReduceMax: np.max, K.ReduceMin: np.min}

# ggml sums f32 rows in double and rounds the sum once to f32 (the mean is
# then divided by n in f32): at most 2 roundings, 2**-23 relative, whatever
# the number of terms. The largest relative error measured is 8e-8.
SUM_RTOL = 2.0**-22
# f16 results are computed in f32 and rounded once to f16 (half an ulp, 2**-11).
F16_RTOL = 5e-4

AXES = [[1], [-1], [0, 2], [2, 0], [-3, -1], [0, 1, 2], [1, -1]]
SHAPES = [(1, 4, 1), (3, 4, 5), (6, 4, 130)]


def reference(kind, x, axes, keep_dims):
    return REDUCE[kind](x.astype(np.float64), axis=tuple(axes), keepdims=keep_dims)


@pytest.mark.parametrize("keep_dims", [False, True])
@pytest.mark.parametrize("axes", AXES, ids=str)
@pytest.mark.parametrize("kind", [K.ReduceSum, K.ReduceMean], ids=lambda k: k.name)
def test_sum_and_mean_match_numpy(kind, axes, keep_dims, rng):
    cp = compile_op(kind, [[D, 4, D]], attrs={"axes": axes, "keep_dims": keep_dims})
    for shape in SHAPES:
        x = rng.standard_normal(shape).astype(np.float32)
        (y,) = run(cp, x)
        ref = reference(kind, x, axes, keep_dims)
        assert y.shape == ref.shape
        np.testing.assert_allclose(y, ref, rtol=SUM_RTOL, atol=0)


@pytest.mark.parametrize("keep_dims", [False, True])
@pytest.mark.parametrize("axes", AXES, ids=str)
@pytest.mark.parametrize("kind", [K.ReduceMax, K.ReduceMin], ids=lambda k: k.name)
def test_max_and_min_match_numpy_exactly(kind, axes, keep_dims, rng):
    cp = compile_op(kind, [[D, 4, D]], attrs={"axes": axes, "keep_dims": keep_dims})
    for shape in SHAPES:
        x = rng.standard_normal(shape).astype(np.float32)
        (y,) = run(cp, x)
        np.testing.assert_array_equal(y, REDUCE[kind](x, axis=tuple(axes), keepdims=keep_dims))


@pytest.mark.parametrize("kind", list(REDUCE), ids=lambda k: k.name)
def test_reduce_over_every_axis_gives_a_scalar(kind, rng):
    cp = compile_op(kind, [[D, D]], attrs={"axes": [0, 1]})
    for shape in [(1, 1), (2, 3), (40, 50)]:
        x = rng.standard_normal(shape).astype(np.float32)
        (y,) = run(cp, x)
        assert y.shape == ()
        np.testing.assert_allclose(y, reference(kind, x, (0, 1), False), rtol=SUM_RTOL, atol=0)


@pytest.mark.parametrize("kind", list(REDUCE), ids=lambda k: k.name)
def test_reduce_of_a_named_dynamic_dim_over_a_rank_4_input(kind, rng):
    seq = dg.Dim("seq", max=64)
    cp = compile_op(kind, [[2, seq, 3, seq]], attrs={"axes": [1, 3], "keep_dims": True})
    for s in (1, 5, 17):
        x = rng.standard_normal((2, s, 3, s)).astype(np.float32)
        (y,) = run(cp, x)
        assert y.shape == (2, 1, 3, 1)
        np.testing.assert_allclose(y, reference(kind, x, (1, 3), True), rtol=SUM_RTOL, atol=0)


@pytest.mark.parametrize("dtype", [dg.i32, dg.i64], ids=str)
@pytest.mark.parametrize("kind", [K.ReduceSum, K.ReduceMax, K.ReduceMin], ids=lambda k: k.name)
def test_integer_reductions_are_exact(kind, dtype, rng):
    cp = compile_op(kind, [[D, 5, D]], in_dtypes=dtype, attrs={"axes": [0, -1]})
    for shape in [(1, 5, 1), (3, 5, 4), (9, 5, 31)]:
        x = rng.integers(-1000, 1000, shape).astype(dtype.numpy)
        (y,) = run(cp, x)
        assert y.dtype == dtype.numpy
        np.testing.assert_array_equal(y, REDUCE[kind](x, axis=(0, 2)))


def test_mean_of_integers_is_a_dtype_error():
    with pytest.raises(dg.DTypeError, match="floating-point"):
        compile_op(K.ReduceMean, [[D, 5]], in_dtypes=dg.i32, attrs={"axes": [1]})


@pytest.mark.parametrize("kind", list(REDUCE), ids=lambda k: k.name)
def test_f16_reductions_round_once_to_f16(kind, rng):
    cp = compile_op(kind, [[D, 16]], in_dtypes=dg.f16, attrs={"axes": [1]})
    for n in (1, 3, 20):
        x = rng.standard_normal((n, 16)).astype(np.float16)
        (y,) = run(cp, x)
        assert y.dtype == np.float16
        np.testing.assert_allclose(y.astype(np.float64), reference(kind, x, (1,), False), rtol=F16_RTOL, atol=0)


@pytest.mark.parametrize("kind", [K.ReduceMax, K.ReduceMin], ids=lambda k: k.name)
def test_max_and_min_propagate_nan_like_numpy(kind, rng):
    cp = compile_op(kind, [[D, 6]], attrs={"axes": [1]})
    for n in (1, 3, 8):
        x = rng.standard_normal((n, 6)).astype(np.float32)
        x[0, 0] = np.nan  # first element of a row
        x[-1, 3] = np.nan  # inside a row
        (y,) = run(cp, x)
        np.testing.assert_array_equal(y, REDUCE[kind](x, axis=1))


def test_sum_of_many_terms_keeps_float32_accuracy(rng):
    cp = compile_op(K.ReduceSum, [[D, D]], attrs={"axes": [1]})
    for shape in [(1, 1000), (2, 20000), (3, 100000)]:
        x = (1 + rng.random(shape)).astype(np.float32)  # all positive: no cancellation
        (y,) = run(cp, x)
        np.testing.assert_allclose(y, x.astype(np.float64).sum(axis=1), rtol=SUM_RTOL, atol=0)


@pytest.mark.parametrize("axes", [[1, 1], [1, -2], [0, 2, -1]], ids=str)
def test_repeated_axis_is_a_shape_error(axes):
    with pytest.raises(dg.ShapeError, match="repeats an axis"):
        compile_op(K.ReduceSum, [[D, 4, D]], attrs={"axes": axes})


@pytest.mark.parametrize("axes", [[3], [-4], [0, 5]], ids=str)
def test_axis_out_of_range_is_a_shape_error(axes):
    with pytest.raises(dg.ShapeError, match="out of range"):
        compile_op(K.ReduceMax, [[D, 4, D]], attrs={"axes": axes})


def test_empty_axes_is_a_shape_error():
    with pytest.raises(dg.ShapeError, match="at least one axis"):
        compile_op(K.ReduceSum, [[D, 4]], attrs={"axes": []})


def test_reduce_of_bool_is_a_dtype_error():
    with pytest.raises(dg.DTypeError):
        compile_op(K.ReduceSum, [[D, 4]], in_dtypes=dg.boolean, attrs={"axes": [1]})


# -- ReduceProd ------------------------------------------------------------------


@pytest.mark.parametrize("keep_dims", [False, True])
@pytest.mark.parametrize("axes", [[1], [0, 2], [-1]], ids=str)
def test_prod_matches_numpy(axes, keep_dims, rng):
    cp = compile_op(K.ReduceProd, [[D, 4, D]], attrs={"axes": axes, "keep_dims": keep_dims})
    for shape in SHAPES:
        x = rng.uniform(0.5, 1.5, shape).astype(np.float32) * rng.choice([-1, 1], shape).astype(np.float32)
        (y,) = run(cp, x)
        ref = np.prod(x.astype(np.float64), axis=tuple(axes), keepdims=keep_dims)
        # one f32 rounding per factor, in order: n roundings of 2**-24 (n up to 4 * 130 here)
        n = int(np.prod([shape[a] for a in axes]))
        np.testing.assert_allclose(y, ref, rtol=n * 2.0**-24, atol=0)


def test_prod_of_integers_wraps_like_numpy(rng):
    cp = compile_op(K.ReduceProd, [[D, 6]], in_dtypes=dg.i32, attrs={"axes": [1]})
    for n in (1, 3, 9):
        x = rng.integers(-300, 300, (n, 6)).astype(np.int32)
        (y,) = run(cp, x)
        np.testing.assert_array_equal(y, np.prod(x, axis=1, dtype=np.int32))


# -- ArgMax ----------------------------------------------------------------------


@pytest.mark.parametrize("keep_dims", [False, True])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("dtype", [dg.f32, dg.i32, dg.f16])
def test_argmax_matches_numpy(axis, keep_dims, dtype, rng):
    cp = compile_op(K.ArgMax, [[D, 4, D]], in_dtypes=dtype, attrs={"axis": axis, "keep_dims": keep_dims})
    for shape in SHAPES:
        x = rng.integers(-4, 4, shape).astype(dtype.numpy)  # small integers: many ties, the first wins
        (y,) = run(cp, x)
        want = np.argmax(x, axis=axis, keepdims=keep_dims)
        assert y.dtype == np.int64
        np.testing.assert_array_equal(y, want)


def test_argmax_picks_the_first_nan_like_numpy():
    cp = compile_op(K.ArgMax, [[D]], attrs={"axis": 0})
    for x in ([1.0, np.nan, 5.0, np.nan], [np.inf, 2.0, np.inf], [-np.inf], [3.0, 7.0, 7.0, np.nan]):
        x = np.array(x, np.float32)
        (y,) = run(cp, x)
        assert int(y) == int(np.argmax(x)), x


def test_argmax_of_a_bool_is_a_dtype_error():
    with pytest.raises(dg.DTypeError):
        compile_op(K.ArgMax, [[D]], in_dtypes=dg.boolean, attrs={"axis": 0})
