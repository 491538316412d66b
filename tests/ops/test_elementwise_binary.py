"""Pow with a tensor exponent, SquaredDifference and FloorDivide (numpy
broadcasting), Expand (numpy broadcast_to) and Reorder (a copy) against
numpy, each compiled once with dynamic dimensions and run at three shapes."""

import numpy as np
import pytest

import dyngraph as dg
from oputil import compile_op, run

K = dg.OpKind
EPS = 2.0**-23
N, M = dg.Dim("n"), dg.Dim("m")
BINDINGS = [(1, 1), (3, 5), (17, 9)]

# (shape of a, shape of b) with n, m as the dims of BINDINGS
CASES = {
    "same": (["n", "m"], ["n", "m"]),
    "b_row": (["n", "m"], ["m"]),
    "a_column": (["n", 1], ["n", "m"]),
    "both": ([2, "n", 1], [1, "m"]),
}


def shapes(case, n, m):
    return [tuple({"n": n, "m": m}.get(d, d) for d in s) for s in CASES[case]]


def compiled(kind, case, dtype=dg.f32):
    decl = [[{"n": N, "m": M}.get(d, d) for d in s] for s in CASES[case]]
    return compile_op(kind, decl, in_dtypes=dtype)


@pytest.mark.parametrize("case", CASES)
def test_pow_of_two_tensors_matches_numpy(case, rng):
    cp = compiled(K.Pow, case)
    for n, m in BINDINGS:
        sa, sb = shapes(case, n, m)
        a = rng.uniform(0.1, 4, sa).astype(np.float32)
        b = rng.uniform(-3, 3, sb).astype(np.float32)
        (got,) = run(cp, a, b)
        want = np.power(a.astype(np.float64), b.astype(np.float64))
        np.testing.assert_allclose(got, want, rtol=EPS, atol=0)  # glibc powf: correctly rounded here


def test_pow_of_a_negative_base_follows_numpy():
    cp = compile_op(K.Pow, [[N], [N]])
    a = np.array([-2.0, -2.0, -8.0, 0.0, 0.0, -0.0, np.nan, 1.0], np.float32)
    b = np.array([2.0, 3.0, 1 / 3, 0.0, -1.0, 3.0, 0.0, np.nan], np.float32)
    (got,) = run(cp, a, b)
    with np.errstate(all="ignore"):
        want = np.power(a, b)
    np.testing.assert_array_equal(got, want)  # NaN where numpy has NaN, inf at 0 ** -1, 1 for x ** 0


def test_pow_with_an_exponent_input_keeps_beta_at_one():
    with pytest.raises(dg.ShapeError, match="beta must stay 1"):
        compile_op(K.Pow, [[N], [N]], attrs={"beta": 2.0})


@pytest.mark.parametrize("case", CASES)
def test_squared_difference_matches_numpy(case, rng):
    cp = compiled(K.SquaredDifference, case)
    for n, m in BINDINGS:
        a, b = (rng.standard_normal(s).astype(np.float32) for s in shapes(case, n, m))
        (got,) = run(cp, a, b)
        np.testing.assert_array_equal(got, np.square(a - b))  # two roundings, in the same order as numpy


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", [dg.f32, dg.i32])
def test_floor_divide_matches_numpy_exactly(case, dtype, rng):
    cp = compiled(K.FloorDivide, case, dtype)
    for n, m in BINDINGS:
        sa, sb = shapes(case, n, m)
        if dtype is dg.f32:
            a = (rng.standard_normal(sa) * 10).astype(np.float32)
            b = (rng.standard_normal(sb) * 3).astype(np.float32)
        else:
            a = rng.integers(-100, 100, sa).astype(np.int32)
            b = rng.integers(1, 9, sb).astype(np.int32) * rng.choice([-1, 1], sb).astype(np.int32)
        (got,) = run(cp, a, b)
        np.testing.assert_array_equal(got, np.floor_divide(a, b))


def test_floor_divide_is_the_floor_of_the_exact_quotient():
    """1 // 0.1 is 9 (0.1 in f32 is a little above 0.1), although 1 / 0.1 rounds to 10."""
    cp = compile_op(K.FloorDivide, [[N], [N]])
    a = np.array([1.0, -1.0, 7.0, -7.0, 0.0, -0.0, 5.0, np.inf, 3.0], np.float32)
    b = np.array([0.1, 0.1, 2.0, 2.0, -3.0, 3.0, 0.0, 2.0, -np.inf], np.float32)
    (got,) = run(cp, a, b)
    with np.errstate(all="ignore"):
        want = np.floor_divide(a, b)
    np.testing.assert_array_equal(got, want)
    assert got[0] == 9.0 and np.array_equal(np.signbit(got), np.signbit(want))


def test_integer_floor_divide_by_zero_is_zero_like_numpy():
    cp = compile_op(K.FloorDivide, [[N], [N]], in_dtypes=dg.i32)
    a = np.array([7, -7, 0, np.iinfo(np.int32).min], np.int32)
    b = np.array([0, 0, 0, -1], np.int32)
    (got,) = run(cp, a, b)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(got, np.floor_divide(a, b))


def test_floor_divide_of_bools_is_a_dtype_error():
    with pytest.raises(dg.DTypeError):
        compile_op(K.FloorDivide, [[N], [N]], in_dtypes=dg.boolean)


def test_expand_sizes_come_from_the_inputs(rng):
    """x [n, 1] broadcast to [2, n, m] where y [m] gives m (Expand alone could not know m)."""
    b = dg.GraphBuilder()
    x = b.input("x", dg.f32, [N, 1])
    y = b.input("y", dg.f32, [M])
    e = b.expand(x, shape=[2, N, M])
    assert e.shape == (2, N, M)
    b.output(b.add(e, y))
    cp = b.compile(dg.Engine(num_threads=1))
    for n, m in BINDINGS:
        xv = rng.standard_normal((n, 1)).astype(np.float32)
        yv = rng.standard_normal(m).astype(np.float32)
        (got,) = cp(xv, yv)
        np.testing.assert_array_equal(got, np.broadcast_to(xv, (2, n, m)) + yv)


@pytest.mark.parametrize("dtype", [dg.f32, dg.i32, dg.boolean])
def test_expand_of_each_dtype(dtype, rng):
    cp = compile_op(K.Expand, [[N, 1]], in_dtypes=dtype, attrs={"shape": [3, N, 4]})
    for n in (1, 2, 7):
        x = rng.integers(0, 2, (n, 1)).astype(dtype.numpy)
        (got,) = run(cp, x)
        np.testing.assert_array_equal(got, np.broadcast_to(x, (3, n, 4)))


@pytest.mark.parametrize("shape,target,match", [
    ([3, 2], [3], "lower rank"),
    ([3, 2], [3, 4], r"3 != 2|2 != 4"),
])
def test_expand_to_a_shape_it_does_not_broadcast_to_is_a_shape_error(shape, target, match):
    with pytest.raises(dg.ShapeError, match=match):
        compile_op(K.Expand, [shape], attrs={"shape": target})


@pytest.mark.parametrize("dtype", [dg.f32, dg.i64, dg.bf16])
def test_reorder_is_a_copy(dtype, rng):
    cp = compile_op(K.Reorder, [[N, 3]], in_dtypes=dtype)
    for n in (1, 4, 30):
        x = rng.integers(-9, 9, (n, 3)).astype(np.float32 if dtype is dg.bf16 else dtype.numpy)
        if dtype is dg.bf16:
            x = (x.view(np.uint32) >> 16).astype(np.uint16)
        (got,) = run(cp, x)
        np.testing.assert_array_equal(np.asarray(got).view(x.dtype), x)
