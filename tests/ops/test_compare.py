"""Comparisons, logical ops and Select against numpy, with numpy broadcasting,
compiled once with dynamic dimensions and run at several shapes.

Results are bools or values picked from the inputs, so comparisons are exact.
"""

import numpy as np
import pytest
from oputil import compile_op, run

import dyngraph as dg

K = dg.OpKind
D = dg.DYNAMIC_DIM

COMPARE = {
    K.Equal: np.equal,
    K.NotEqual: np.not_equal,
    K.Greater: np.greater,
    K.GreaterEqual: np.greater_equal,
    K.Less: np.less,
    K.LessEqual: np.less_equal,
}

seq = dg.Dim("seq", min=1, max=512)
batch = dg.Dim("batch", min=1, max=64)

# (declared shapes, concrete shape pairs): broadcasting cases, every one dynamic
BROADCAST_CASES = [
    pytest.param([[D, 4], [D, 4]], [((1, 4), (1, 4)), ((7, 4), (7, 4)), ((33, 4), (33, 4))], id="same"),
    pytest.param([[seq, 4], [4]], [((1, 4), (4,)), ((7, 4), (4,)), ((33, 4), (4,))], id="row"),
    pytest.param([[seq, 1], [1, seq]], [((1, 1), (1, 1)), ((7, 1), (1, 7)), ((33, 1), (1, 33))], id="outer"),
    pytest.param(
        [[batch, 1, seq], [3, seq]],
        [((1, 1, 1), (3, 1)), ((2, 1, 7), (3, 7)), ((5, 1, 33), (3, 33))],
        id="rank3",
    ),
    pytest.param([[D, 1, 2, D], [1]], [((1, 1, 2, 1), (1,)), ((3, 1, 2, 5), (1,)), ((2, 1, 2, 9), (1,))], id="scalar-like"),
]


def small_values(rng, shape, dtype):
    """Values from a small set, so that equal pairs occur."""
    return rng.integers(-3, 4, shape).astype(dtype.numpy)


@pytest.mark.parametrize("kind", list(COMPARE))
@pytest.mark.parametrize("dtype", [dg.f32, dg.i32, dg.f16, dg.i64])
@pytest.mark.parametrize("decl,shapes", BROADCAST_CASES)
def test_compare_matches_numpy(kind, dtype, decl, shapes, rng):
    cp = compile_op(kind, decl, in_dtypes=dtype, out_dtypes=dg.boolean)
    for sa, sb in shapes:
        a, b = small_values(rng, sa, dtype), small_values(rng, sb, dtype)
        (got,) = run(cp, a, b)
        want = COMPARE[kind](a, b)
        assert got.dtype == np.bool_ and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    assert cp.cache_info().builds == len(shapes)


@pytest.mark.parametrize("kind", list(COMPARE))
def test_compare_with_nan_follows_ieee(kind):
    cp = compile_op(kind, [[D], [D]], out_dtypes=dg.boolean)
    a = np.array([np.nan, 1.0, np.nan, -np.inf, np.inf], np.float32)
    b = np.array([np.nan, np.nan, 2.0, -np.inf, 1.0], np.float32)
    for n in (1, 3, 5):
        (got,) = run(cp, a[:n], b[:n])
        np.testing.assert_array_equal(got, COMPARE[kind](a[:n], b[:n]))


@pytest.mark.parametrize("kind", [K.Equal, K.NotEqual, K.Greater])
def test_compare_bools(kind, rng):
    cp = compile_op(kind, [[D, 3], [3]], in_dtypes=dg.boolean, out_dtypes=dg.boolean)
    for n in (1, 4, 9):
        a, b = rng.random((n, 3)) < 0.5, rng.random(3) < 0.5
        (got,) = run(cp, a, b)
        np.testing.assert_array_equal(got, COMPARE[kind](a, b))


def test_compare_bf16(rng):
    cp = compile_op(K.Less, [[D, 4], [D, 4]], in_dtypes=dg.bf16, out_dtypes=dg.boolean)
    for n in (1, 5, 17):
        # bf16 bits of small integers (exact in bf16): float32 bits >> 16
        af, bf = rng.integers(-3, 4, (n, 4)).astype(np.float32), rng.integers(-3, 4, (n, 4)).astype(np.float32)
        a, b = (af.view(np.uint32) >> 16).astype(np.uint16), (bf.view(np.uint32) >> 16).astype(np.uint16)
        (got,) = run(cp, a, b)
        np.testing.assert_array_equal(got, af < bf)


def test_compare_of_mismatched_dtypes_is_a_dtype_error():
    g = dg.Graph()
    g.add_op(dg.Op(0, K.Less, [dg.LogicalTensor(0, dg.f32, [D]), dg.LogicalTensor(1, dg.i32, [D])],
                   [dg.LogicalTensor(2, dg.boolean)]))
    with pytest.raises(dg.DTypeError, match="input 1 has dtype i32, input 0 has f32"):
        g.finalize()


def test_compare_output_is_bool():
    g = dg.Graph()
    g.add_op(dg.Op(0, K.Equal, [dg.LogicalTensor(0, dg.f32, [D]), dg.LogicalTensor(1, dg.f32, [D])],
                   [dg.LogicalTensor(2, dg.f32)]))
    with pytest.raises(dg.DTypeError, match="bool"):
        g.finalize()


def test_compare_static_shapes_that_do_not_broadcast_is_a_shape_error():
    g = dg.Graph()
    g.add_op(dg.Op(0, K.Less, [dg.LogicalTensor(0, dg.f32, [D, 3]), dg.LogicalTensor(1, dg.f32, [4])],
                   [dg.LogicalTensor(2, dg.boolean)]))
    with pytest.raises(dg.ShapeError, match="broadcast"):
        g.finalize()


def test_compare_dynamic_shapes_that_do_not_broadcast_fail_at_execution(rng):
    cp = compile_op(K.Less, [[D, 3], [D, 3]], out_dtypes=dg.boolean)
    (got,) = run(cp, np.zeros((4, 3), np.float32), np.ones((4, 3), np.float32))
    assert got.all()
    with pytest.raises(dg.ShapeError, match="broadcast"):
        run(cp, np.zeros((4, 3), np.float32), np.ones((5, 3), np.float32))


def test_compare_auto_broadcast_none_needs_equal_shapes(rng):
    cp = compile_op(K.GreaterEqual, [[seq, 2], [seq, 2]], attrs={"auto_broadcast": "none"}, out_dtypes=dg.boolean)
    for n in (1, 6):
        a, b = small_values(rng, (n, 2), dg.f32), small_values(rng, (n, 2), dg.f32)
        np.testing.assert_array_equal(run(cp, a, b)[0], a >= b)
    g = dg.Graph()
    g.add_op(dg.Op(0, K.Less, [dg.LogicalTensor(0, dg.f32, [D, 3]), dg.LogicalTensor(1, dg.f32, [3])],
                   [dg.LogicalTensor(2, dg.boolean)], {"auto_broadcast": "none"}))
    with pytest.raises(dg.ShapeError, match="equal shapes"):
        g.finalize()


# -- logical ops --------------------------------------------------------------------

LOGICAL = {K.LogicalAnd: np.logical_and, K.LogicalOr: np.logical_or}


@pytest.mark.parametrize("kind", list(LOGICAL))
@pytest.mark.parametrize("decl,shapes", BROADCAST_CASES)
def test_logical_binary_matches_numpy(kind, decl, shapes, rng):
    cp = compile_op(kind, decl, in_dtypes=dg.boolean, out_dtypes=dg.boolean)
    for sa, sb in shapes:
        a, b = rng.random(sa) < 0.5, rng.random(sb) < 0.5
        (got,) = run(cp, a, b)
        np.testing.assert_array_equal(got, LOGICAL[kind](a, b))


@pytest.mark.parametrize("decl,shapes", [([D], [(1,), (8,), (33,)]), ([2, D, 3], [(2, 1, 3), (2, 5, 3), (2, 9, 3)])])
def test_logical_not_matches_numpy(decl, shapes, rng):
    cp = compile_op(K.LogicalNot, [decl], in_dtypes=dg.boolean, out_dtypes=dg.boolean)
    for shape in shapes:
        a = rng.random(shape) < 0.5
        (got,) = run(cp, a)
        np.testing.assert_array_equal(got, np.logical_not(a))


@pytest.mark.parametrize("kind", [K.LogicalAnd, K.LogicalOr, K.LogicalNot])
def test_logical_ops_on_non_bool_inputs_are_dtype_errors(kind):
    n = 1 if kind is K.LogicalNot else 2
    ins = [dg.LogicalTensor(i, dg.i32, [D]) for i in range(n)]
    g = dg.Graph()
    g.add_op(dg.Op(0, kind, ins, [dg.LogicalTensor(5, dg.boolean)]))
    with pytest.raises(dg.DTypeError, match="bool"):
        g.finalize()


def test_logical_ops_chain_with_comparisons(rng):
    """(a > 0) and not (b == c): bools stay 0/1 between the ops."""
    a, b, c = (dg.LogicalTensor(i, dg.f32, [seq, 3], name=n) for i, n in enumerate("abc"))
    zero = dg.LogicalTensor(3, dg.f32, [1], property=dg.CONSTANT)
    t = [dg.LogicalTensor(10 + i, dg.boolean) for i in range(4)]
    g = dg.Graph()
    g.add_op(dg.Op(0, K.Greater, [a, zero], [t[0]]))
    g.add_op(dg.Op(1, K.Equal, [b, c], [t[1]]))
    g.add_op(dg.Op(2, K.LogicalNot, [t[1]], [t[2]]))
    g.add_op(dg.Op(3, K.LogicalAnd, [t[0], t[2]], [t[3]]))
    g.finalize()
    (part,) = g.get_partitions()
    cp = part.compile([a, b, c, zero], [t[3]], dg.Engine(dg.Engine.CPU, num_threads=1), constants={3: np.zeros(1, np.float32)})
    for n in (1, 7, 33):
        av, bv, cv = (small_values(rng, (n, 3), dg.f32) for _ in range(3))
        (got,) = run(cp, av, bv, cv)
        np.testing.assert_array_equal(got, (av > 0) & ~(bv == cv))


# -- Select ----------------------------------------------------------------------------

SELECT_CASES = [
    pytest.param([[D, 4], [D, 4], [D, 4]], [(1, 4), (1, 4), (1, 4)], [(7, 4)] * 3, [(33, 4)] * 3, id="same"),
    pytest.param([[seq, 1], [seq, 4], []], [(1, 1), (1, 4), ()], [(7, 1), (7, 4), ()], [(33, 1), (33, 4), ()], id="scalar-else"),
    pytest.param([[seq, seq], [1], [seq, 1]], [(1, 1), (1,), (1, 1)], [(7, 7), (1,), (7, 1)], [(33, 33), (1,), (33, 1)],
                 id="mask-like"),
    pytest.param([[4], [batch, 1, 4], [batch, seq, 1]], [(4,), (1, 1, 4), (1, 1, 1)], [(4,), (2, 1, 4), (2, 7, 1)],
                 [(4,), (3, 1, 4), (3, 33, 1)], id="all-three"),
]


def _values(rng, shape, dtype):
    if dtype is dg.boolean:
        return rng.random(shape) < 0.5
    return rng.integers(-100, 100, shape).astype(dtype.numpy)


@pytest.mark.parametrize("dtype", [dg.f32, dg.i32, dg.i64, dg.f16, dg.boolean])
@pytest.mark.parametrize("decl,s1,s2,s3", SELECT_CASES)
def test_select_matches_numpy_where(dtype, decl, s1, s2, s3, rng):
    cp = compile_op(K.Select, decl, in_dtypes=[dg.boolean, dtype, dtype], out_dtypes=dtype)
    for sc, sa, sb in (s1, s2, s3):
        cond = rng.random(sc) < 0.5
        a, b = _values(rng, sa, dtype), _values(rng, sb, dtype)
        (got,) = run(cp, cond, a, b)
        want = np.where(cond, a, b)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    assert cp.cache_info().builds == 3


def test_select_bf16(rng):
    cp = compile_op(K.Select, [[D, 3], [D, 3], [1]], in_dtypes=[dg.boolean, dg.bf16, dg.bf16], out_dtypes=dg.bf16)
    for n in (1, 4, 9):
        cond = rng.random((n, 3)) < 0.5
        a = rng.integers(0, 0x7F80, (n, 3)).astype(np.uint16)  # finite, non-negative bf16 bit patterns
        b = np.array([0x3FC0], np.uint16)  # 1.5
        (got,) = run(cp, cond, a, b)
        np.testing.assert_array_equal(np.asarray(got).view(np.uint16), np.where(cond, a, b))


def test_select_with_a_non_bool_condition_is_a_dtype_error():
    g = dg.Graph()
    ins = [dg.LogicalTensor(0, dg.i32, [D]), dg.LogicalTensor(1, dg.f32, [D]), dg.LogicalTensor(2, dg.f32, [D])]
    g.add_op(dg.Op(0, K.Select, ins, [dg.LogicalTensor(3, dg.f32)]))
    with pytest.raises(dg.DTypeError, match="condition"):
        g.finalize()


def test_select_with_mismatched_then_else_is_a_dtype_error():
    g = dg.Graph()
    ins = [dg.LogicalTensor(0, dg.boolean, [D]), dg.LogicalTensor(1, dg.f32, [D]), dg.LogicalTensor(2, dg.f16, [D])]
    g.add_op(dg.Op(0, K.Select, ins, [dg.LogicalTensor(3, dg.f32)]))
    with pytest.raises(dg.DTypeError, match="else"):
        g.finalize()


def test_select_shapes_that_do_not_broadcast_is_a_shape_error():
    g = dg.Graph()
    ins = [dg.LogicalTensor(0, dg.boolean, [D, 2]), dg.LogicalTensor(1, dg.f32, [D, 3]), dg.LogicalTensor(2, dg.f32, [1])]
    g.add_op(dg.Op(0, K.Select, ins, [dg.LogicalTensor(3, dg.f32)]))
    with pytest.raises(dg.ShapeError, match="broadcast"):
        g.finalize()


def test_logical_and_select_with_several_threads(rng):
    """The kernels split rows across threads: same results."""
    eng = dg.Engine(dg.Engine.CPU, num_threads=2)
    cp = compile_op(K.LogicalOr, [[D, 1, D], [D, 1]], in_dtypes=dg.boolean, out_dtypes=dg.boolean, engine=eng)
    for sa, sb in (((1, 1, 1), (1, 1)), ((3, 1, 40), (17, 1))):
        a, b = rng.random(sa) < 0.5, rng.random(sb) < 0.5
        np.testing.assert_array_equal(run(cp, a, b)[0], a | b)
    cp = compile_op(K.Select, [[D, D], [D, 1], [1]], in_dtypes=[dg.boolean, dg.f32, dg.f32], out_dtypes=dg.f32, engine=eng)
    for n, m in ((1, 1), (37, 5), (3, 64)):
        cond, a, b = rng.random((n, m)) < 0.5, rng.standard_normal((n, 1)).astype(np.float32), np.ones(1, np.float32)
        np.testing.assert_array_equal(run(cp, cond, a, b)[0], np.where(cond, a, b))
