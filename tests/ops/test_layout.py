"""StaticReshape, StaticTranspose, Concat, Slice and TypeCast against numpy.

Every test compiles its op once with dynamic dimensions and runs several
concrete shapes through that one compiled partition. These ops move or
convert data without arithmetic, so results must equal numpy's exactly.
"""

import numpy as np
import pytest

import dyngraph as dg
from oputil import compile_op, run

D = dg.DYNAMIC_DIM
K = dg.OpKind
INT64_MAX = 2**63 - 1


def arange(shape, dtype=np.float32):
    """Distinct values, so any misplaced element shows."""
    return np.arange(int(np.prod(shape))).reshape(shape).astype(dtype)


def out_shape(cp):
    return [str(d) for d in cp.get_outputs()[0].shape]


# -- StaticReshape -------------------------------------------------------------------

RESHAPES = [
    # (input shape as compiled, target, special_zero, concrete input shapes)
    ([D, 6], [-1, 3, 2], False, [(1, 6), (4, 6), (9, 6)]),
    ([D, 4, 3], [-1, 12], False, [(1, 4, 3), (2, 4, 3), (7, 4, 3)]),
    ([D, 4, 3], [0, -1], True, [(1, 4, 3), (2, 4, 3), (7, 4, 3)]),
    ([2, D, 6], [0, -1, 3], True, [(2, 1, 6), (2, 5, 6), (2, 8, 6)]),
    ([D, 4, 3], [0, 0, 3], True, [(1, 4, 3), (3, 4, 3), (6, 4, 3)]),
    ([D, D], [-1], False, [(1, 1), (3, 5), (8, 2)]),
    ([D, 8], [2, -1, 4], False, [(1, 8), (3, 8), (10, 8)]),
]


@pytest.mark.parametrize("in_shape, target, special_zero, shapes", RESHAPES, ids=lambda v: str(v))
def test_reshape_matches_numpy(in_shape, target, special_zero, shapes):
    cp = compile_op(K.StaticReshape, [in_shape], attrs={"shape": target, "special_zero": special_zero})
    for shape in shapes:
        x = arange(shape)
        want = [shape[i] if (t == 0 and special_zero) else t for i, t in enumerate(target)]
        (y,) = run(cp, x)
        np.testing.assert_array_equal(y, x.reshape(want))


def test_reshape_to_dimension_expressions():
    seq = dg.Dim("seq", max=64)
    cp = compile_op(K.StaticReshape, [[seq, 4, 3]], attrs={"shape": [2 * seq, 2, 3]})
    assert out_shape(cp) == ["2*seq", "2", "3"]
    for s in (1, 3, 10):
        x = arange((s, 4, 3))
        (y,) = run(cp, x)
        np.testing.assert_array_equal(y, x.reshape(2 * s, 2, 3))


def test_reshape_splits_a_dimension_by_its_symbol():
    seq = dg.Dim("seq", max=64)
    cp = compile_op(K.StaticReshape, [[2 * seq, 6]], attrs={"shape": [seq, -1, 3]})
    for s in (1, 2, 9):
        x = arange((2 * s, 6))
        (y,) = run(cp, x)
        np.testing.assert_array_equal(y, x.reshape(s, -1, 3))


@pytest.mark.parametrize(
    "in_shape, target, want",
    [
        # functions of the dimension (a Dim at compile, an int at execution)
        (lambda s: [s, 6], lambda s: [s, -1], ["seq", "6"]),
        (lambda s: [s, 2, 3], lambda s: [s, -1], ["seq", "6"]),
        (lambda s: [s, 4, 3], lambda s: [0, -1], ["seq", "12"]),
        (lambda s: [s, 8], lambda s: [2 * s, -1], ["2*seq", "4"]),
        (lambda s: [s, 8], lambda s: [-1, 4], ["2*seq", "4"]),
    ],
    ids=["seq,6->seq,-1", "seq,2,3->seq,-1", "seq,4,3->0,-1", "seq,8->2*seq,-1", "seq,8->-1,4"],
)
def test_reshape_infers_minus_one_symbolically(in_shape, target, want):
    """-1 is the element count divided by the known dimensions, simplified:
    [seq, 6] -> [seq, -1] gives [seq, 6], a static 6."""
    seq = dg.Dim("seq", max=64)
    cp = compile_op(K.StaticReshape, [in_shape(seq)], attrs={"shape": target(seq), "special_zero": True})
    assert out_shape(cp) == want
    for s in (1, 4):
        x = arange(tuple(in_shape(s)))
        (y,) = run(cp, x)
        np.testing.assert_array_equal(y, x.reshape([x.shape[i] if t == 0 else t for i, t in enumerate(target(s))]))


def test_reshape_that_does_not_divide_at_execution_is_a_shape_error():
    cp = compile_op(K.StaticReshape, [[D, 3]], attrs={"shape": [-1, 2]})
    (y,) = run(cp, arange((4, 3)))
    np.testing.assert_array_equal(y, arange((4, 3)).reshape(-1, 2))
    with pytest.raises(dg.ShapeError, match="divide"):
        run(cp, arange((3, 3)))
    (y,) = run(cp, arange((6, 3)))  # the partition is still usable
    np.testing.assert_array_equal(y, arange((6, 3)).reshape(-1, 2))


def test_reshape_whose_element_count_differs_at_execution_is_a_shape_error():
    cp = compile_op(K.StaticReshape, [[D, D]], attrs={"shape": [4, -1, 2]})
    with pytest.raises(dg.ShapeError):
        run(cp, arange((3, 2)))
    (y,) = run(cp, arange((2, 8)))
    np.testing.assert_array_equal(y, arange((2, 8)).reshape(4, -1, 2))


@pytest.mark.parametrize(
    "in_shape, target, special_zero, match",
    [
        ([D, 6], [-1, -1], False, "more than one -1"),
        ([4, 6], [5, 5], False, "element count"),
        ([4, 6], [-1, 5], False, "divide"),
        ([D, 6], [0, 3], False, "invalid dimension 0"),
        ([D, 6], [-2, 3], False, "invalid dimension -2"),
        ([D, 6], [0, 0, 0, -1], True, "does not have"),
    ],
    ids=str,
)
def test_invalid_reshape_target_is_a_shape_error_at_compile(in_shape, target, special_zero, match):
    with pytest.raises(dg.ShapeError, match=match):
        compile_op(K.StaticReshape, [in_shape], attrs={"shape": target, "special_zero": special_zero})


def test_reshape_with_a_provably_different_symbolic_count_is_a_shape_error_at_compile():
    seq = dg.Dim("seq", max=64)
    with pytest.raises(dg.ShapeError, match="element count"):
        compile_op(K.StaticReshape, [[seq, 4]], attrs={"shape": [seq, 3]})


def test_reshape_to_a_dimension_no_input_has_is_a_compile_error():
    seq, other = dg.Dim("seq"), dg.Dim("other")
    with pytest.raises(dg.CompileError, match="other"):
        compile_op(K.StaticReshape, [[seq, 6]], attrs={"shape": [other, -1]})


# -- StaticTranspose -----------------------------------------------------------------


@pytest.mark.parametrize("order", [[], [0, 1, 2], [1, 0, 2], [2, 0, 1], [-1, -3, -2], [0, -1, 1]], ids=str)
def test_transpose_matches_numpy(order):
    cp = compile_op(K.StaticTranspose, [[D, 4, D]], attrs={"order": order})
    for shape in [(1, 4, 1), (2, 4, 3), (5, 4, 7)]:
        x = arange(shape)
        (y,) = run(cp, x)
        np.testing.assert_array_equal(y, np.transpose(x, order or None))


@pytest.mark.parametrize("order", [[], [3, 1, 0, 2], [0, 2, 1, 3], [-2, -1, -4, -3]], ids=str)
def test_transpose_rank_4_matches_numpy(order):
    cp = compile_op(K.StaticTranspose, [[D, 2, D, 3]], attrs={"order": order})
    for shape in [(1, 2, 1, 3), (2, 2, 5, 3), (4, 2, 3, 3)]:
        x = arange(shape)
        (y,) = run(cp, x)
        np.testing.assert_array_equal(y, np.transpose(x, order or None))


@pytest.mark.parametrize("dtype", [dg.f16, dg.i32, dg.i64, dg.boolean], ids=str)
def test_transpose_of_other_dtypes(dtype):
    cp = compile_op(K.StaticTranspose, [[D, 3, D]], in_dtypes=dtype, attrs={"order": [2, 0, 1]})
    for shape in [(1, 3, 1), (2, 3, 4), (3, 3, 9)]:
        x = (arange(shape, np.int64) % 7).astype(dtype.numpy)
        (y,) = run(cp, x)
        np.testing.assert_array_equal(y, x.transpose(2, 0, 1))


@pytest.mark.parametrize(
    "order, match",
    [
        ([0, 0, 1], "repeats an axis"),
        ([0, -3, 1], "repeats an axis"),
        ([0, 1, 3], "out of range"),
        ([-4, 0, 1], "out of range"),
        ([1, 0], "has 2 axes"),
    ],
    ids=str,
)
def test_invalid_transpose_order_is_a_shape_error(order, match):
    with pytest.raises(dg.ShapeError, match=match):
        compile_op(K.StaticTranspose, [[D, 4, D]], attrs={"order": order})


# -- Concat --------------------------------------------------------------------------


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2, -3])
def test_concat_of_two_along_any_dynamic_axis(axis):
    a = axis % 3
    in_shape = [[D if d == a else 3 for d in range(3)], [D if d == a else 3 for d in range(3)]]
    cp = compile_op(K.Concat, in_shape, attrs={"axis": axis})
    for n0, n1 in [(1, 1), (2, 5), (7, 3)]:
        xs = [arange(tuple(n if d == a else 3 for d in range(3))) + 1000 * k for k, n in enumerate((n0, n1))]
        (y,) = run(cp, *xs)
        np.testing.assert_array_equal(y, np.concatenate(xs, axis=axis))


@pytest.mark.parametrize("n_inputs", [3, 4, 6])
def test_concat_of_several_inputs(n_inputs):
    cp = compile_op(K.Concat, [[2, D, 3]] * n_inputs, attrs={"axis": 1})
    for sizes in [[1] * n_inputs, list(range(1, n_inputs + 1)), [5, 1] * (n_inputs // 2) + [2] * (n_inputs % 2)]:
        xs = [arange((2, n, 3)) + 1000 * k for k, n in enumerate(sizes)]
        (y,) = run(cp, *xs)
        np.testing.assert_array_equal(y, np.concatenate(xs, axis=1))


def test_concat_along_a_static_axis_with_shared_dynamic_dims():
    seq = dg.Dim("seq", max=64)
    cp = compile_op(K.Concat, [[seq, 4], [seq, 2], [seq, 1]], attrs={"axis": -1})
    assert out_shape(cp) == ["seq", "7"]
    for s in (1, 3, 11):
        xs = [arange((s, 4)), arange((s, 2)) + 100, arange((s, 1)) + 200]
        (y,) = run(cp, *xs)
        np.testing.assert_array_equal(y, np.concatenate(xs, axis=-1))


def test_concat_past_and_new_along_a_named_axis():
    past, seq = dg.Dim("past", max=64), dg.Dim("seq", max=64)
    cp = compile_op(K.Concat, [[2, past, 4], [2, seq, 4]], attrs={"axis": 1})
    assert out_shape(cp) == ["2", "past + seq", "4"]
    for p, s in [(1, 1), (5, 1), (3, 7)]:
        xs = [arange((2, p, 4)), arange((2, s, 4)) + 500]
        (y,) = run(cp, *xs)
        np.testing.assert_array_equal(y, np.concatenate(xs, axis=1))


@pytest.mark.parametrize("dtype", [dg.f16, dg.bf16, dg.i32, dg.i64, dg.boolean], ids=str)
def test_concat_of_other_dtypes(dtype):
    cp = compile_op(K.Concat, [[D, 3], [D, 3]], in_dtypes=dtype, attrs={"axis": 0})
    np_type = dtype.numpy
    for n0, n1 in [(1, 1), (2, 4), (5, 3)]:
        xs = [(arange((n0, 3), np.int64) % 5).astype(np_type), (arange((n1, 3), np.int64) % 3 + 1).astype(np_type)]
        (y,) = run(cp, *xs)
        np.testing.assert_array_equal(y, np.concatenate(xs, axis=0))


@pytest.mark.parametrize(
    "shapes, axis, match",
    [
        ([[D, 3], [D, 4]], 0, "dimension 1"),
        ([[2, D], [3, D]], 1, "dimension 0"),
        ([[D, 3], [D, 3, 1]], 0, "rank"),
        ([[D, 3], [D, 3]], 2, "out of range"),
        ([[D, 3], [D, 3]], -3, "out of range"),
    ],
    ids=str,
)
def test_concat_with_mismatched_inputs_is_a_shape_error(shapes, axis, match):
    with pytest.raises(dg.ShapeError, match=match):
        compile_op(K.Concat, shapes, attrs={"axis": axis})


def test_concat_rule_counts_a_repeated_input_and_names_the_first_bad_one():
    """The rule checks each distinct input once (a saved file may repeat one thousands of
    times) yet sums every use along the axis, and an error names the bad input's first
    position."""
    from dyngraph.op_pipeline import infer_new_op
    from dyngraph.ops import TensorType, schema_of
    from dyngraph.symbolic import Expr, Symbol, sym_sum

    seq = Expr.symbol(Symbol("seq", 1, 64))
    a = TensorType(dg.f32, (Expr.const(2), seq))
    b = TensorType(dg.f32, (Expr.const(2), Expr.const(3)))
    schema = schema_of(K.Concat)
    (out,), _, _ = infer_new_op(schema, {"axis": 1}, [a] * 3000 + [b] * 2 + [a], 1, "concat")
    assert out.shape == (Expr.const(2), seq * 3001 + 6)
    assert sym_sum([seq, 2, seq, -seq]) == seq + 2 and sym_sum([]) == Expr.const(0)
    bad = TensorType(dg.f32, (Expr.const(4), seq))
    with pytest.raises(dg.ShapeError, match="input 2001 dimension 0"):
        infer_new_op(schema, {"axis": 1}, [a] * 2001 + [bad] + [a] * 5 + [bad], 1, "concat")
    with pytest.raises(dg.DTypeError, match="input 1001 has dtype f16, input 0 has f32"):
        infer_new_op(schema, {"axis": 1}, [a] * 1001 + [TensorType(dg.f16, a.shape)] * 3, 1, "concat")


def test_concat_whose_symbolic_dims_always_differ_is_a_shape_error_at_compile():
    seq = dg.Dim("seq", max=64)
    with pytest.raises(dg.ShapeError, match="dimension 0"):
        compile_op(K.Concat, [[seq, 3], [seq + 1, 3]], attrs={"axis": 1})


def test_concat_of_mixed_dtypes_is_a_dtype_error():
    with pytest.raises(dg.DTypeError):
        compile_op(K.Concat, [[D, 3], [D, 3]], in_dtypes=[dg.f32, dg.f16], attrs={"axis": 0})


def test_concat_whose_dynamic_dims_differ_at_execution_is_a_shape_error():
    cp = compile_op(K.Concat, [[D, D], [D, D]], attrs={"axis": 0})
    with pytest.raises(dg.ShapeError, match="dimension 1"):
        run(cp, arange((2, 3)), arange((2, 4)))
    (y,) = run(cp, arange((2, 4)), arange((1, 4)))
    np.testing.assert_array_equal(y, np.concatenate([arange((2, 4)), arange((1, 4))]))


# -- Slice ---------------------------------------------------------------------------

SLICES = [
    # (begin, end, axes, steps)
    ([1], [3], [1], []),
    ([-4], [-1], [1], []),
    ([2], [100], [1], []),
    ([2], [INT64_MAX], [1], []),
    ([-100], [5], [1], []),
    ([0], [INT64_MAX], [2], [2]),
    ([1], [-1], [-1], [3]),
    ([1, 0, 1], [-1, 9, 100], [0, 1, 2], [2, 3, 2]),
    ([1, 2], [-1, 7], [], []),  # default axes: the first len(begin)
    ([-2, 1], [INT64_MAX, 8], [-1, -2], [1, 4]),
]


def numpy_slice(x, begin, end, axes, steps):
    axes = axes or list(range(len(begin)))
    steps = steps or [1] * len(axes)
    idx = [slice(None)] * x.ndim
    for b, e, a, s in zip(begin, end, axes, steps):
        idx[a] = slice(b, e, s)
    return x[tuple(idx)]


@pytest.mark.parametrize("begin, end, axes, steps", SLICES, ids=str)
def test_slice_matches_numpy(begin, end, axes, steps):
    attrs = {"begin": begin, "end": end}
    if axes:
        attrs["axes"] = axes
    if steps:
        attrs["steps"] = steps
    cp = compile_op(K.Slice, [[D, 9, D]], attrs=attrs)
    for shape in [(3, 9, 4), (4, 9, 7), (8, 9, 13)]:
        x = arange(shape)
        (y,) = run(cp, x)
        np.testing.assert_array_equal(y, numpy_slice(x, begin, end, axes, steps))


@pytest.mark.parametrize("dtype", [dg.f16, dg.bf16, dg.i32, dg.i64, dg.boolean], ids=str)
def test_slice_with_an_innermost_step_of_other_dtypes(dtype):
    cp = compile_op(K.Slice, [[D, D]], in_dtypes=dtype, attrs={"begin": [1, 1], "end": [INT64_MAX, INT64_MAX], "steps": [2, 3]})
    np_type = dtype.numpy
    for shape in [(2, 2), (5, 8), (9, 31)]:
        x = (arange(shape, np.int64) % 5).astype(np_type)
        (y,) = run(cp, x)
        np.testing.assert_array_equal(y, x[1::2, 1::3])


def test_slice_to_a_symbolic_end():
    seq = dg.Dim("seq", max=16)
    cp = compile_op(K.Slice, [[seq, 16]], attrs={"begin": [0], "end": [seq], "axes": [1]})
    assert out_shape(cp) == ["seq", "seq"]
    for s in (1, 5, 16):
        x = arange((s, 16))
        (y,) = run(cp, x)
        np.testing.assert_array_equal(y, x[:, :s])


def test_slice_to_a_symbolic_end_past_the_dimension_is_clamped():
    seq = dg.Dim("seq", max=64)
    cp = compile_op(K.Slice, [[seq, 16]], attrs={"begin": [1], "end": [2 * seq], "axes": [1]})
    for s in (1, 5, 8, 30):
        x = arange((s, 16))
        (y,) = run(cp, x)
        np.testing.assert_array_equal(y, x[:, 1 : 2 * s])


def test_slice_from_a_symbolic_negative_begin_counts_from_the_end():
    """x[:, -seq:], the last seq columns (a KV-cache window)."""
    seq = dg.Dim("seq", max=16)
    cp = compile_op(K.Slice, [[seq, 16]], attrs={"begin": [-seq], "end": [INT64_MAX], "axes": [1]})
    assert out_shape(cp) == ["seq", "seq"]
    for s in (1, 5, 16):
        x = arange((s, 16))
        (y,) = run(cp, x)
        np.testing.assert_array_equal(y, x[:, -s:])


def test_the_last_element_of_any_dimension_is_one_wide_and_broadcasts():
    """x - x[:, -1:] on a dimension whose expression may be 0 for some values of its symbols
    (seq // 4 at seq < 4; a chunked scan's padded length over its chunk count): a dimension is
    at least 1, so the slice is one wide, not dim - max(dim - 1, 0), and it broadcasts."""
    seq = dg.Dim("seq", max=64)
    b = dg.GraphBuilder()
    x = b.input("x", dg.f32, [seq, seq // 4])
    last = b.op(K.Slice, [x], {"begin": [-1], "end": [INT64_MAX], "axes": [1]})
    b.output(last, b.op(K.Subtract, [x, last]))
    cp = b.compile(dg.Engine(dg.Engine.CPU, num_threads=1))
    assert out_shape(cp) == ["seq", "1"]
    for n in (4, 9, 40):
        a = arange((n, n // 4))
        got_last, got_diff = cp(a)
        np.testing.assert_array_equal(got_last, a[:, -1:])
        np.testing.assert_array_equal(got_diff, a - a[:, -1:])


def test_a_window_of_the_last_seq_rows_of_a_one_row_bias_broadcasts():
    """bias[-seq:, -seq:] on a [1, 16] bias (MPT's ALiBi): the rows are min(1, seq) = 1, which the
    symbols' ranges decide (seq >= 1), so the window broadcasts over [seq, seq] scores."""
    seq = dg.Dim("seq", max=16)
    b = dg.GraphBuilder()
    x = b.input("x", dg.f32, [seq, seq])
    bias = b.input("bias", dg.f32, [1, 16])
    window = b.op(K.Slice, [bias], {"begin": [-seq, -seq], "end": [INT64_MAX, INT64_MAX], "axes": [0, 1]})
    b.output(b.op(K.Add, [x, window]))
    cp = b.compile(dg.Engine(dg.Engine.CPU, num_threads=1))
    assert out_shape(cp) == ["seq", "seq"]
    w = arange((1, 16))
    for n in (1, 5, 16):
        a = arange((n, n))
        np.testing.assert_array_equal(cp(a, w)[0], a + w[-n:, -n:])


def test_slice_with_a_symbolic_bound_of_either_sign_follows_numpy():
    """begin = seq - 4 is negative for seq < 4 (counts from the end) and not below."""
    seq = dg.Dim("seq", max=12)
    cp = compile_op(K.Slice, [[seq, 12]], attrs={"begin": [seq - 4], "end": [INT64_MAX], "axes": [1]})
    for s in (1, 3, 4, 7, 12):
        x = arange((s, 12))
        (y,) = run(cp, x)
        np.testing.assert_array_equal(y, x[:, s - 4 :])


def test_slice_that_is_empty_at_execution_is_a_shape_error():
    cp = compile_op(K.Slice, [[D, 4]], attrs={"begin": [2], "end": [INT64_MAX]})
    with pytest.raises(dg.ShapeError, match="positive"):
        run(cp, arange((2, 4)))
    (y,) = run(cp, arange((5, 4)))
    np.testing.assert_array_equal(y, arange((5, 4))[2:])


@pytest.mark.parametrize(
    "attrs, match",
    [
        ({"begin": [3], "end": [3], "axes": [1]}, "empty"),
        ({"begin": [-2], "end": [-5], "axes": [1]}, "empty"),
        ({"begin": [0, 0], "end": [2, 2], "axes": [1, -1]}, "repeats an axis"),
        ({"begin": [0], "end": [2], "axes": [2]}, "out of range"),
        ({"begin": [0, 0], "end": [2], "axes": [1]}, "same length"),
    ],
    ids=str,
)
def test_invalid_slice_is_a_shape_error(attrs, match):
    with pytest.raises(dg.ShapeError, match=match):
        compile_op(K.Slice, [[D, 6]], attrs=attrs)


@pytest.mark.parametrize("steps", [[0], [-1]])
def test_slice_steps_must_be_positive(steps):
    with pytest.raises(dg.GraphError, match="'steps' must be >= 1"):
        compile_op(K.Slice, [[D, 6]], attrs={"begin": [0], "end": [2], "axes": [1], "steps": steps})


def compile_slice_then(kind, attrs, out_dtype=dg.f32):
    """x[:, 1:, 2:7] (a strided view, not a copy) feeding one more op."""
    x = dg.LogicalTensor(0, dg.f32, [D, 5, 9])
    view = dg.LogicalTensor(1, dg.f32, None)
    y = dg.LogicalTensor(2, out_dtype, None)
    g = dg.Graph(dg.Engine.CPU)
    g.add_op(dg.Op(0, K.Slice, [x], [view], {"begin": [1, 2], "end": [INT64_MAX, 7], "axes": [1, 2]}))
    g.add_op(dg.Op(1, kind, [view], [y], attrs))
    g.finalize()
    (part,) = g.get_partitions()
    return part.compile([x], [y], dg.Engine(dg.Engine.CPU, num_threads=1))


@pytest.mark.parametrize(
    "kind, attrs, out_dtype, ref",
    [
        (K.StaticTranspose, {"order": [2, 0, 1]}, dg.f32, lambda v: v.transpose(2, 0, 1)),
        (K.StaticReshape, {"shape": [-1, 5]}, dg.f32, lambda v: v.reshape(-1, 5)),
        (K.Slice, {"begin": [1], "end": [INT64_MAX], "axes": [2], "steps": [2]}, dg.f32, lambda v: v[:, :, 1::2]),
        (K.TypeCast, {}, dg.f16, lambda v: v.astype(np.float16)),
        (K.ReduceMax, {"axes": [0, 2]}, dg.f32, lambda v: v.max(axis=(0, 2))),
    ],
    ids=["transpose", "reshape", "slice", "cast", "reduce_max"],
)
def test_a_sliced_view_feeds_the_next_op(kind, attrs, out_dtype, ref):
    cp = compile_slice_then(kind, attrs, out_dtype)
    for n in (1, 3, 6):
        x = arange((n, 5, 9))
        (y,) = cp(x)
        np.testing.assert_array_equal(y, ref(x[:, 1:, 2:7]))


# -- TypeCast ------------------------------------------------------------------------


def bf16_bits(x):
    """float32 -> bfloat16 bits, rounding to nearest even (no NaNs in x)."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_to_f32(bits):
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


ROWS = (1, 3, 8)


def floats(rng, n, scale=1000.0):
    """Rows of 8 float32 values: random ones plus the edge cases of truncation."""
    x = (scale * rng.standard_normal((n, 8))).astype(np.float32)
    x[0, :6] = [-2.7, -0.5, -0.0, 0.5, 2.9999998, -1.0]
    return x


@pytest.mark.parametrize("dst", [dg.f16, dg.i32, dg.i64], ids=str)
def test_cast_from_f32_matches_numpy_astype(dst, rng):
    """f32 -> i32 / i64 truncates toward zero; f32 -> f16 rounds to nearest even."""
    cp = compile_op(K.TypeCast, [[D, 8]], out_dtypes=dst)
    for n in ROWS:
        x = floats(rng, n)
        (y,) = run(cp, x)
        assert y.dtype == dst.numpy
        np.testing.assert_array_equal(y, x.astype(dst.numpy))


def test_cast_f32_to_f16_rounds_ties_to_even_and_overflows_to_inf():
    cp = compile_op(K.TypeCast, [[D, 6]], out_dtypes=dg.f16)
    base = np.array([1 + 2.0**-11, 1 + 3 * 2.0**-11, 65520.0, -1e6, 2.0**-25, 3 * 2.0**-26], np.float32)
    for n in ROWS:
        x = np.tile(base, (n, 1))
        (y,) = run(cp, x)
        with np.errstate(over="ignore"):  # -1e6 overflows to -inf, on purpose
            want = x.astype(np.float16)
        np.testing.assert_array_equal(y.view(np.uint16), want.view(np.uint16))


def test_cast_f32_to_bf16_rounds_to_nearest_even(rng):
    cp = compile_op(K.TypeCast, [[D, 8]], out_dtypes=dg.bf16)
    ties = np.array([0x3F808000, 0x3F818000, 0xBF808000, 0x3F808001], np.uint32).view(np.float32)
    for n in ROWS:
        x = floats(rng, n)
        x[-1, 4:] = ties  # halfway cases and just above halfway
        (y,) = run(cp, x)
        np.testing.assert_array_equal(y.view(np.uint16), bf16_bits(x))


@pytest.mark.parametrize("dst", [dg.f32, dg.f16, dg.i32, dg.boolean], ids=str)
def test_cast_from_bf16_matches_numpy(dst, rng):
    cp = compile_op(K.TypeCast, [[D, 8]], in_dtypes=dg.bf16, out_dtypes=dst)
    for n in ROWS:
        xf = floats(rng, n, scale=100.0)
        xf[-1, -1] = 0.0
        bits = bf16_bits(xf)
        (y,) = run(cp, bits)
        np.testing.assert_array_equal(y, bf16_to_f32(bits).astype(dst.numpy))


@pytest.mark.parametrize("dst", [dg.f32, dg.bf16, dg.i32, dg.i64, dg.boolean], ids=str)
def test_cast_from_f16_matches_numpy(dst, rng):
    cp = compile_op(K.TypeCast, [[D, 8]], in_dtypes=dg.f16, out_dtypes=dst)
    for n in ROWS:
        x = floats(rng, n, scale=100.0).astype(np.float16)
        x[-1, -2:] = [0.0, 6e-8]  # zero and the smallest f16 subnormal
        (y,) = run(cp, x)
        want = bf16_bits(x.astype(np.float32)) if dst is dg.bf16 else x.astype(dst.numpy)
        np.testing.assert_array_equal(y.view(np.uint16) if dst is dg.bf16 else y, want)


@pytest.mark.parametrize("dst", [dg.f32, dg.f16, dg.bf16, dg.i64, dg.boolean], ids=str)
def test_cast_from_i32_matches_numpy(dst, rng):
    cp = compile_op(K.TypeCast, [[D, 8]], in_dtypes=dg.i32, out_dtypes=dst)
    # f16 holds integers up to 65504; beyond 2**24 ints reach bf16 through a
    # rounding to f32 first, so the test keeps them within f32's exact range.
    hi = 60000 if dst is dg.f16 else 2**24
    for n in ROWS:
        x = rng.integers(-hi, hi, (n, 8)).astype(np.int32)
        x[0, :4] = [0, 1, -1, hi - 1]
        (y,) = run(cp, x)
        want = bf16_bits(x.astype(np.float32)) if dst is dg.bf16 else x.astype(dst.numpy)
        np.testing.assert_array_equal(y.view(np.uint16) if dst is dg.bf16 else y, want)


def test_cast_i32_to_f32_rounds_large_integers_to_nearest_even():
    cp = compile_op(K.TypeCast, [[D, 6]], in_dtypes=dg.i32, out_dtypes=dg.f32)
    base = np.array([2**24 + 1, 2**24 + 3, -(2**24) - 1, 2**31 - 1, -(2**31), 123456789], np.int32)
    for n in ROWS:
        x = np.tile(base, (n, 1))
        (y,) = run(cp, x)
        np.testing.assert_array_equal(y, x.astype(np.float32))


@pytest.mark.parametrize("dst", [dg.f32, dg.f16, dg.i32, dg.boolean], ids=str)
def test_cast_from_i64_matches_numpy(dst, rng):
    cp = compile_op(K.TypeCast, [[D, 8]], in_dtypes=dg.i64, out_dtypes=dst)
    for n in ROWS:
        x = rng.integers(-60000, 60000, (n, 8)).astype(np.int64)
        x[0, :3] = [0, 1, -1]
        (y,) = run(cp, x)
        np.testing.assert_array_equal(y, x.astype(dst.numpy))


def test_cast_of_an_i64_beyond_32_bits_is_an_execution_error():
    """The backend computes integers in 32 bits: a wider value is refused, not wrapped."""
    cp = compile_op(K.TypeCast, [[D]], in_dtypes=dg.i64, out_dtypes=dg.f32)
    with pytest.raises(dg.ExecutionError, match="32-bit"):
        run(cp, np.array([1, 2**40], np.int64))
    (y,) = run(cp, np.array([1, -(2**31)], np.int64))
    np.testing.assert_array_equal(y, [1.0, -(2.0**31)])


@pytest.mark.parametrize("src", [dg.f32, dg.f16], ids=str)
def test_cast_float_to_bool_is_nonzero(src):
    """True for every nonzero value: NaN, infinities and subnormals included; -0.0 is False."""
    tiny = np.float32(1e-45) if src is dg.f32 else np.float16(6e-8)
    base = np.array([0.0, -0.0, 0.5, -3.0, np.nan, np.inf, -np.inf, tiny], src.numpy)
    cp = compile_op(K.TypeCast, [[D, 8]], in_dtypes=src, out_dtypes=dg.boolean)
    for n in ROWS:
        x = np.tile(base, (n, 1))
        (y,) = run(cp, x)
        assert y.dtype == np.bool_
        np.testing.assert_array_equal(y, x.astype(bool))


@pytest.mark.parametrize("dst", [dg.f32, dg.f16, dg.bf16, dg.i32, dg.i64], ids=str)
def test_cast_bool_to_numbers_gives_zero_and_one(dst, rng):
    cp = compile_op(K.TypeCast, [[D, 8]], in_dtypes=dg.boolean, out_dtypes=dst)
    for n in ROWS:
        x = rng.random((n, 8)) < 0.5
        (y,) = run(cp, x)
        want = bf16_bits(x.astype(np.float32)) if dst is dg.bf16 else x.astype(dst.numpy)
        np.testing.assert_array_equal(y.view(np.uint16) if dst is dg.bf16 else y, want)


def test_cast_of_a_dynamic_rank_3_tensor(rng):
    cp = compile_op(K.TypeCast, [[D, 3, D]], out_dtypes=dg.f16)
    for shape in [(1, 3, 1), (2, 3, 17), (5, 3, 4)]:
        x = rng.standard_normal(shape).astype(np.float32)
        (y,) = run(cp, x)
        np.testing.assert_array_equal(y, x.astype(np.float16))
