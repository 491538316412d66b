"""Tensors of rank 5 and 6 (ggml has 4 dimensions): each op kind that takes
them (``high_rank`` in its registration) against numpy, with dynamic
dimensions; the others refuse them with an error naming the op.

Above rank 4 the backend holds a tensor folded (its outer axes merged into
ggml's fourth dimension). Elementwise ops merge the axes every input treats
alike (broadcast or not) and, where more than 4 groups remain, broadcast an
input by a copy first; transposes, slices and reductions copy through our
strided kernel; concat and softmax view their input as [outer, axis, inner];
MatMul broadcasts an operand whose batch axes are neither all 1 nor the
output's by a copy, then multiplies the folded batches; LayerNorm and RMSNorm
merge their normalized axes; BiasAdd (NCX) views its input as [N, C, rest].
"""

import itertools

import numpy as np
import pytest

import dyngraph as dg
from dyngraph.compiled_partition import CompiledPartition
from dyngraph.program import OpSpec, Program, TensorSpec
from dyngraph.symbolic import Expr
from oputil import compile_op, run

K = dg.OpKind
N, M = dg.Dim("n"), dg.Dim("m")
SIZES = [(1, 1), (2, 3), (3, 5)]  # values of (n, m)


def shape_of(decl, n, m):
    return tuple(n if d is N else m if d is M else d for d in decl)


def randn(rng, shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


BROADCAST = {
    "same": ([2, N, 3, M, 2], [2, N, 3, M, 2]),
    "trailing": ([2, N, 3, M, 2], [M, 2]),
    "leading": ([2, N, 1, 1, 1, 4], [2, N, 3, 2, 1, 1]),
    # broadcast on every other axis: 6 groups, more than ggml's 4 - the first input is broadcast by a copy
    "alternating": ([2, 1, 3, 1, 2, 1], [1, N, 1, M, 1, 3]),
}


@pytest.mark.parametrize("case", BROADCAST)
@pytest.mark.parametrize("kind,fn", [(K.Add, np.add), (K.Multiply, np.multiply), (K.Maximum, np.maximum),
                                     (K.SquaredDifference, lambda a, b: np.square(a - b))], ids=lambda v: getattr(v, "name", ""))
def test_binary_ops_broadcast_at_rank_5_and_6(kind, fn, case, rng):
    sa, sb = BROADCAST[case]
    cp = compile_op(kind, [sa, sb])
    for n, m in SIZES:
        a, b = randn(rng, shape_of(sa, n, m)), randn(rng, shape_of(sb, n, m))
        (got,) = run(cp, a, b)
        np.testing.assert_array_equal(got, fn(a, b))


def test_integer_and_bool_elementwise_at_rank_6(rng):
    cp = compile_op(K.Subtract, [[2, N, 1, 3, M, 2], [N, 4, 1, 1, 2]], in_dtypes=dg.i32)
    sel = compile_op(K.Select, [[1, N, 2, 1, 3], [2, 1, 2, M, 1], [1]], in_dtypes=[dg.boolean, dg.f32, dg.f32])
    for n, m in SIZES:
        a = rng.integers(-9, 9, (2, n, 1, 3, m, 2)).astype(np.int32)
        b = rng.integers(-9, 9, (n, 4, 1, 1, 2)).astype(np.int32)
        np.testing.assert_array_equal(run(cp, a, b)[0], a - b)
        c = rng.random((1, n, 2, 1, 3)) > 0.5
        x, y = randn(rng, (2, 1, 2, m, 1)), randn(rng, (1,))
        np.testing.assert_array_equal(run(sel, c, x, y)[0], np.where(c, x, y))


@pytest.mark.parametrize("kind,attrs,fn", [
    (K.Tanh, {}, np.tanh), (K.Clamp, {"min": -0.5, "max": 0.5}, lambda x: np.clip(x, -0.5, 0.5)),
    (K.Round, {}, np.round),
], ids=lambda v: getattr(v, "name", ""))
def test_unary_ops_at_rank_6(kind, attrs, fn, rng):
    cp = compile_op(kind, [[N, 2, 1, M, 3, 2]], attrs=attrs)
    for n, m in SIZES:
        x = randn(rng, (n, 2, 1, m, 3, 2)) * 2
        np.testing.assert_allclose(run(cp, x)[0], fn(x), rtol=2e-7, atol=0)


def test_type_cast_and_compare_at_rank_5(rng):
    cast = compile_op(K.TypeCast, [[N, 2, 3, M, 2]], out_dtypes=dg.i32)
    less = compile_op(K.Less, [[N, 2, 3, M, 2], [2]], out_dtypes=dg.boolean)
    for n, m in SIZES:
        x = randn(rng, (n, 2, 3, m, 2)) * 10
        np.testing.assert_array_equal(run(cast, x)[0], x.astype(np.int32))
        y = randn(rng, (2,))
        np.testing.assert_array_equal(run(less, x, y)[0], x < y)


def test_reshape_up_to_rank_6_and_back(rng):
    b = dg.GraphBuilder()
    x = b.input("x", dg.f32, [N, 24])
    y = b.static_reshape(x, shape=[N, 2, 1, 3, 2, 2])
    z = b.static_reshape(b.relu(y), shape=[N * 2, 12])
    assert y.shape == (N, 2, 1, 3, 2, 2)
    b.output(y, z)
    cp = b.compile(dg.Engine(num_threads=1))
    for n in (1, 4, 7):
        xv = randn(rng, (n, 24))
        got_y, got_z = cp(xv)
        np.testing.assert_array_equal(got_y, xv.reshape(n, 2, 1, 3, 2, 2))
        np.testing.assert_array_equal(got_z, np.maximum(xv, 0).reshape(n * 2, 12))


PERMS5 = [[0, 3, 2, 1, 4], [4, 3, 2, 1, 0], [1, 2, 0, 4, 3], [0, 1, 2, 4, 3]]


@pytest.mark.parametrize("perm", PERMS5 + [[5, 0, 4, 1, 3, 2], [0, 2, 1, 3, 5, 4]], ids=str)
def test_transpose_at_rank_5_and_6(perm, rng):
    decl = [N, 3, M, 2, 4, 2][: len(perm)]
    cp = compile_op(K.StaticTranspose, [decl], attrs={"order": perm})
    for n, m in SIZES:
        x = randn(rng, shape_of(decl, n, m))
        np.testing.assert_array_equal(run(cp, x)[0], x.transpose(perm))


def test_strided_copies_split_across_threads(rng):
    eng = dg.Engine(num_threads=2)
    cp = compile_op(K.StaticTranspose, [[N, 3, M, 2, 4, 2]], attrs={"order": [5, 0, 4, 1, 3, 2]}, engine=eng)
    bc = compile_op(K.Add, BROADCAST["alternating"], engine=eng)
    for n, m in [(1, 1), (7, 5), (16, 3)]:
        x = randn(rng, (n, 3, m, 2, 4, 2))
        np.testing.assert_array_equal(run(cp, x)[0], x.transpose(5, 0, 4, 1, 3, 2))
        a, b = randn(rng, (2, 1, 3, 1, 2, 1)), randn(rng, (1, n, 1, m, 1, 3))
        np.testing.assert_array_equal(run(bc, a, b)[0], a + b)


def test_transpose_of_a_strided_view_at_rank_5(rng):
    """A slice (a strided copy) then a transpose: Bloom's select of a fused QKV, then its heads to the front."""
    b = dg.GraphBuilder()
    x = b.input("x", dg.f32, [1, N, 4, 3, 8])
    q = b.slice(x, begin=[1], end=[2], axes=[3])
    y = b.static_transpose(q, order=[0, 2, 1, 3, 4])
    b.output(b.static_reshape(y, shape=[4, N, 8]))
    cp = b.compile(dg.Engine(num_threads=1))
    for n in (1, 5, 9):
        xv = randn(rng, (1, n, 4, 3, 8))
        np.testing.assert_array_equal(cp(xv)[0], xv[:, :, :, 1:2].transpose(0, 2, 1, 3, 4).reshape(4, n, 8))


@pytest.mark.parametrize("begin,end,axes,steps", [
    ([0], [1], [3], [1]), ([1, -2], [3, 100], [1, 4], [1, 1]), ([0, 1], [100, 100], [2, 5], [2, 3]), ([-1], [100], [0], [1]),
], ids=["select", "two_axes", "strided", "last_row"])
def test_slice_at_rank_6(begin, end, axes, steps, rng):
    decl = [N, 3, 5, 3, 2, 7]
    cp = compile_op(K.Slice, [decl], attrs={"begin": begin, "end": end, "axes": axes, "steps": steps})
    for n in (1, 3, 6):
        x = randn(rng, (n, 3, 5, 3, 2, 7))
        idx = [slice(None)] * 6
        for b_, e, a, s in zip(begin, end, axes, steps):
            idx[a] = slice(b_, e, s)
        np.testing.assert_array_equal(run(cp, x)[0], x[tuple(idx)])


@pytest.mark.parametrize("axis", range(5))
def test_concat_at_rank_5(axis, rng):
    decl = [N, 2, 3, M, 2]
    cp = compile_op(K.Concat, [decl, decl, decl], attrs={"axis": axis})
    for n, m in SIZES:
        xs = [randn(rng, shape_of(decl, n, m)) for _ in range(3)]
        np.testing.assert_array_equal(run(cp, *xs)[0], np.concatenate(xs, axis))


@pytest.mark.parametrize("axis", [0, 2, 4, -1])
def test_softmax_at_rank_5(axis, rng):
    cp = compile_op(K.SoftMax, [[N, 2, 3, M, 4]], attrs={"axis": axis})
    for n, m in SIZES:
        x = randn(rng, (n, 2, 3, m, 4))
        e = np.exp(x.astype(np.float64) - x.max(axis, keepdims=True))
        np.testing.assert_allclose(run(cp, x)[0], e / e.sum(axis, keepdims=True), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("axes", [[1], [0, 2, 4], [5], [1, 3, 5], [0, 1, 2, 3, 4, 5]], ids=str)
@pytest.mark.parametrize("kind,fn", [(K.ReduceSum, np.sum), (K.ReduceMax, np.max), (K.ReduceProd, np.prod)],
                         ids=lambda v: getattr(v, "name", ""))
def test_reduce_at_rank_6(kind, fn, axes, rng):
    decl = [N, 2, 3, M, 2, 3]
    cp = compile_op(kind, [decl], attrs={"axes": axes, "keep_dims": True})
    for n, m in SIZES:
        x = randn(rng, shape_of(decl, n, m))
        want = fn(x.astype(np.float64), axis=tuple(axes), keepdims=True)
        np.testing.assert_allclose(run(cp, x)[0], want, rtol=1e-5, atol=1e-6)


def test_argmax_and_expand_at_rank_5(rng):
    am = compile_op(K.ArgMax, [[N, 2, 3, M, 4]], attrs={"axis": 2})
    ex = compile_op(K.Expand, [[N, 1, M]], attrs={"shape": [2, 3, N, 4, M]})
    for n, m in SIZES:
        x = randn(rng, (n, 2, 3, m, 4))
        np.testing.assert_array_equal(run(am, x)[0], np.argmax(x, 2))
        y = randn(rng, (n, 1, m))
        np.testing.assert_array_equal(run(ex, y)[0], np.broadcast_to(y, (2, 3, n, 4, m)))


MATMULS = {
    "weights": ([2, N, 3, M, 4], [4, 5], {}),  # a 2-D weight under a rank-5 batch
    "same_batch": ([2, N, 3, M, 4], [2, N, 3, 4, 5], {"transpose_a": False}),
    "broadcast_batch": ([2, N, 1, M, 4], [1, 1, 3, 5, 4], {"transpose_b": True}),  # each side broadcasts somewhere
    "rank6_transposed": ([N, 2, 1, 3, 4, M], [3, 4, 5], {"transpose_a": True}),
}


@pytest.mark.parametrize("case", MATMULS)
def test_matmul_with_rank_5_and_6_batches(case, rng):
    sa, sb, attrs = MATMULS[case]
    cp = compile_op(K.MatMul, [sa, sb], attrs=attrs)
    for n, m in SIZES:
        a, b = randn(rng, shape_of(sa, n, m)), randn(rng, shape_of(sb, n, m))
        a64 = np.swapaxes(a, -1, -2) if attrs.get("transpose_a") else a
        b64 = np.swapaxes(b, -1, -2) if attrs.get("transpose_b") else b
        want = np.matmul(a64.astype(np.float64), b64.astype(np.float64))
        np.testing.assert_allclose(run(cp, a, b)[0], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [dg.f16, dg.bf16])
def test_matmul_of_half_precision_rank_5_batches_broadcast_by_a_copy(dtype, rng):
    # a's batch is broadcast over axis 2, b's over axes 0 and 1: both sides are copied to the output's batch
    sa, sb = [2, N, 1, M, 8], [1, 1, 3, 8, 5]
    cp = compile_op(K.MatMul, [sa, sb], in_dtypes=dtype)
    for n, m in SIZES:
        a, b = randn(rng, shape_of(sa, n, m)), randn(rng, shape_of(sb, n, m))
        if dtype is dg.f16:
            a, b = a.astype(np.float16), b.astype(np.float16)
            (got,) = run(cp, a, b)
        else:  # bf16 values: f32 with the low 16 bits cleared, passed as their bit patterns
            a, b = [(x.view(np.uint32) & 0xFFFF0000).view(np.float32) for x in (a, b)]
            (got,) = run(cp, *[(x.view(np.uint32) >> 16).astype(np.uint16).view(dg.bf16.numpy) for x in (a, b)])
            got = (np.asarray(got).view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        want = np.matmul(a.astype(np.float64), b.astype(np.float64))
        # exact products of 8 half-precision pairs summed in f32, rounded once to f16 / bf16
        u = 2.0**-11 if dtype is dg.f16 else 2.0**-8
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=u, atol=u)


def test_matmul_with_a_bias_of_a_rank_5_batch(rng):
    cp = compile_op(K.MatMul, [[2, N, 3, 1, 4], [4, 5], [2, 1, 3, 1, 5]])
    for n in (1, 4):
        a, b, c = randn(rng, (2, n, 3, 1, 4)), randn(rng, (4, 5)), randn(rng, (2, 1, 3, 1, 5))
        np.testing.assert_allclose(run(cp, a, b, c)[0], a @ b + c, rtol=1e-5, atol=1e-5)


def layer_norm_ref(x, begin, eps, gamma=None, beta=None, rms=False):
    x = x.astype(np.float64)
    axes = tuple(range(begin % x.ndim, x.ndim))
    if rms:
        y = x / np.sqrt(np.mean(x * x, axis=axes, keepdims=True) + eps)
    else:
        y = (x - x.mean(axis=axes, keepdims=True)) / np.sqrt(x.var(axis=axes, keepdims=True) + eps)
    return y * (1.0 if gamma is None else gamma) + (0.0 if beta is None else beta)


# (x shape, begin_norm_axis): the normalized axes merged into one, gamma/beta broadcast over the folded outer axes
NORMS = {
    "last_axis_rank5": ([2, N, 3, M, 8], -1),
    "three_axes_rank6": ([N, 2, 1, 3, M, 4], 3),
    "five_axes_rank6": ([2, N, 3, 1, M, 4], 1),  # gamma of rank 5: folded like x's inner axes
}


@pytest.mark.parametrize("case", NORMS)
@pytest.mark.parametrize("kind", [K.LayerNorm, K.RMSNorm], ids=lambda k: k.name)
def test_norms_over_trailing_axes_at_rank_5_and_6(kind, case, rng):
    sx, begin = NORMS[case]
    sp = sx[begin:]
    shapes = [sx, sp, sp] if kind is K.LayerNorm else [sx, sp]
    cp = compile_op(kind, shapes, attrs={"begin_norm_axis": begin, "epsilon": 1e-5})
    for n, m in SIZES:
        x, g, b = (randn(rng, shape_of(s, n, m)) for s in (sx, sp, sp))
        if kind is K.LayerNorm:
            (got,) = run(cp, x, g, b)
            want = layer_norm_ref(x, begin, 1e-5, g, b)
        else:
            (got,) = run(cp, x, g)
            want = layer_norm_ref(x, begin, 1e-5, g, rms=True)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)  # O(1) values, groups of 4 to 60


@pytest.mark.parametrize("fmt,sx", [("NXC", [2, N, 3, M, 5]), ("NCX", [2, 5, N, 3, M]), ("NCX", [N, 5, 2, 3, M, 2]),
                                    ("NXC", [N, 2, 1, 3, M, 5])])
def test_bias_add_at_rank_5_and_6(fmt, sx, rng):
    cp = compile_op(K.BiasAdd, [sx, [5]], attrs={"data_format": fmt})
    for n, m in SIZES:
        x, b = randn(rng, shape_of(sx, n, m)), randn(rng, (5,))
        want = x + (b if fmt == "NXC" else b.reshape((5,) + (1,) * (len(sx) - 2)))
        np.testing.assert_array_equal(run(cp, x, b)[0], want)


def test_dynamic_reshape_and_transpose_at_rank_5_and_6(rng):
    reshape = compile_op(K.DynamicReshape, [[N, 24], [6]], [dg.f32, dg.i64], attrs={"special_zero": True})
    transpose = compile_op(K.DynamicTranspose, [[2, N, 3, 1, 4], [5]], [dg.f32, dg.i64])
    for n in (1, 2, 5):
        x = randn(rng, (n, 24))
        for target in ([0, 2, 1, 3, -1, 2], [2, 1, 3, 1, -1, 4], [0, 1, 4, 1, 3, 2]):
            (got,) = run(reshape, x, np.array(target, np.int64))
            want_shape = [x.shape[i] if t == 0 else t for i, t in enumerate(target)]  # special_zero
            np.testing.assert_array_equal(got, x.reshape(want_shape))
        y = randn(rng, (2, n, 3, 1, 4))
        for order in ([4, 2, 0, 3, 1], [0, 1, 2, 4, 3], [-1, -2, -3, -4, -5]):
            (got,) = run(transpose, y, np.array(order, np.int64))
            np.testing.assert_array_equal(got, np.transpose(y, order))


@pytest.mark.parametrize("decl", [[2, N, 3, 2, M], [N, 2, 3, 1, M, 3]], ids=str)
def test_dropout_at_rank_5_and_6_draws_by_linear_index(decl, rng):
    from dyngraph.reference.philox import dropout_mask, dropout_scale

    cp = compile_op(K.Dropout, [decl, [], [], []], in_dtypes=[dg.f32, dg.i64, dg.i64, dg.f32], n_outputs=2)
    for n, m in SIZES:
        x = randn(rng, shape_of(decl, n, m)).astype(np.float32)
        for offset in (0, 9):
            y, mask = run(cp, x, np.int64(5), np.int64(offset), np.float32(0.5))
            want = dropout_mask(x.size, 5, offset, 0.5).reshape(x.shape)
            np.testing.assert_array_equal(mask, want)
            np.testing.assert_array_equal(y, np.where(want == 1, x * dropout_scale(0.5), np.float32(0)))


@pytest.mark.parametrize("decl,axis", [([2, N, 3, 2, M], 1), ([2, N, 3, 2, M], -1), ([N, 2, 3, 1, M, 3], 4),
                                       ([N, 2, 3, 1, M, 3], 0)], ids=str)
def test_gen_index_at_rank_5_and_6(decl, axis, rng):
    cp = compile_op(K.GenIndex, [decl], attrs={"axis": axis}, out_dtypes=dg.i64)
    for n, m in SIZES:
        shape = shape_of(decl, n, m)
        (got,) = run(cp, randn(rng, shape))
        np.testing.assert_array_equal(got, np.indices(shape)[axis])


@pytest.mark.parametrize("kind,shapes,attrs", [
    (K.Gather, [[2, 1, N, 3, 4], [3]], {}),
    (K.ScatterRows, [[2, 1, N, 3, 4], [3], [2, 1, 3, 3, 4]], {}),
])
def test_kinds_that_take_rank_4_refuse_rank_5_naming_the_op(kind, shapes, attrs):
    dtypes = {K.Gather: [dg.f32, dg.i64], K.ScatterRows: [dg.f32, dg.i64, dg.f32]}[kind]
    with pytest.raises(dg.ShapeError, match=f"{kind.name} takes rank 4 at most|at most 4"):
        compile_op(kind, shapes, in_dtypes=dtypes, attrs=attrs)


def test_rank_7_is_refused():
    with pytest.raises(dg.ShapeError, match="rank 7"):
        compile_op(K.StaticReshape, [[2, 3]], attrs={"shape": [1] * 5 + [2, 3]})


def test_an_ir_with_a_rank_5_op_its_lowering_does_not_take_is_a_compile_error(engine):
    """An IR that bypassed the Python checks (here: Gather of rank 5) fails at its build, naming the op."""
    c = lambda *v: tuple(Expr.const(x) for x in v)  # noqa: E731
    prog = Program(
        tensors=[TensorSpec(0, "x", dg.f32, c(1, 2, 1, 3, 4)), TensorSpec(1, "i", dg.i64, c(1), dg.CONSTANT),
                 TensorSpec(2, "y", dg.f32, c(1, 2, 1, 3, 4))],
        ops=[OpSpec(0, K.Gather, "gather5", [0, 1], [2], {"axis": 0})],
        inputs=[0], outputs=[2])
    cp = CompiledPartition.create(prog, {1: np.zeros(1, np.int64)}, engine, 4)
    with pytest.raises(dg.CompileError, match="gather5.*rank 5.*Gather takes rank 4"):
        cp(np.zeros((1, 2, 1, 3, 4), np.float32))


@pytest.mark.parametrize("kind", [K.Convolution, K.MaxPool, K.AvgPool, K.Interpolate])
def test_spatial_ops_take_3_spatial_axes_and_refuse_4(kind, rng):
    """Rank 5 (3-D spatial, dynamic batch and depth) against numpy (the full tests: tests/ops/test_conv.py,
    test_pool.py, test_interpolate.py); rank 6 is a ShapeError."""
    from dyngraph.reference import spatial_numpy as sp

    attrs = {"data_format": "NCX", "pads_begin": [0, 0, 0], "pads_end": [0, 0, 0]}
    if kind is K.Interpolate:
        attrs = {"data_format": "NCX"}
    if kind is K.Convolution:
        attrs.update(strides=[1, 1, 1], dilations=[1, 1, 1], weights_format="OIX")
    elif kind is K.Interpolate:
        attrs.update(mode="linear", scales=[2.0, 1.0, 0.5])
    else:
        attrs.update(kernel=[2, 2, 2], strides=[1, 2, 2], **({"exclude_pad": True} if kind is K.AvgPool else {}))
    w = randn(rng, (4, 2, 2, 2, 2))
    extra = [w.shape] if kind is K.Convolution else []
    cp = compile_op(kind, [[N, 2, M, 4, 6]] + extra, attrs=attrs)
    for n, m in [(1, 2), (2, 3), (3, 5)]:
        x = randn(rng, (n, 2, m, 4, 6))
        (y,) = run(cp, x, *([w] if kind is K.Convolution else []))
        if kind is K.Convolution:
            want = sp.conv(x, w, strides=[1, 1, 1], dilations=[1, 1, 1])
        elif kind is K.Interpolate:
            want = sp.interpolate(x, [2 * m, 4, 3], "linear")
        else:
            want = sp.pool(x, "max" if kind is K.MaxPool else "avg", [2, 2, 2], [1, 2, 2], exclude_pad=True)
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(dg.ShapeError):
        compile_op(kind, [[1, 2, 3, 3, 4, 6]] + ([(4, 2, 2, 2, 2, 2)] if kind is K.Convolution else []), attrs=attrs)


def test_every_kind_that_takes_rank_6_has_a_test_here():
    """The kinds whose registration says they take rank > 4, against this file's tests."""
    from dyngraph.ops import registered_kinds, schema_of

    high = {k for k in registered_kinds() if schema_of(k).high_rank}
    tested = {K.Add, K.Multiply, K.Maximum, K.SquaredDifference, K.Subtract, K.Select, K.Tanh, K.Clamp, K.Round,
              K.TypeCast, K.Less, K.StaticReshape, K.StaticTranspose, K.Slice, K.Concat, K.SoftMax, K.ReduceSum,
              K.ReduceMax, K.ReduceProd, K.ArgMax, K.Expand, K.ReLU, K.MatMul, K.LayerNorm, K.RMSNorm, K.BiasAdd,
              K.DynamicReshape, K.DynamicTranspose, K.GenIndex, K.Convolution, K.MaxPool, K.AvgPool, K.Interpolate,
              K.Dropout}
    # the others share these kinds' lowerings (elementwise ones: the merge is the same for every kind)
    shared = {k for k in high if schema_of(k).high_rank == "elementwise"} | {K.ReduceMean, K.ReduceMin, K.Full}
    assert high - tested - shared == set()
