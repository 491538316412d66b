"""Numerics of MatMul against numpy: transposes, batch dimensions broadcast on
either side, the optional bias, constant and runtime weights, f32 and f16.

Every test compiles once, with dynamic dimensions (the contraction dimension
included where the weights are not constant), and runs several concrete shapes
through that one compiled partition.

Tolerance: ggml sums the K products in its own order (SIMD lanes, blocks), so
the result is compared with the exact (float64) product with an error bound
relative to sum_k |a_ik| |b_kj| (+ |bias|), the quantity every summation
order's rounding error is proportional to; relative to the result itself it
would mean nothing where the products cancel. The bound is 4 f32 ulps of
that sum [measured: at most 1.3 ulps over K = 1 .. 4096, runtime and constant
weights]; the worst-case bound of a K-term sum is about K/2 ulps.
"""

import numpy as np
import pytest

import dyngraph as dg
from oputil import compile_op, run

K = dg.OpKind

F32_EPS = 2.0**-23
SUM_ULPS = 4
F16_U = 2.0**-11  # unit roundoff of f16 (rounding the result to f16 costs at most this, relative)
F16_TINY = 2.0**-25  # half the spacing of f16 subnormals
BF16_U = 2.0**-8


def symbolic(shape, dims):
    return [dims[d] if isinstance(d, str) else d for d in shape]


def concrete(shape, binding):
    return tuple(binding[d] if isinstance(d, str) else d for d in shape)


def transposed(shape, flag):
    return shape[:-2] + [shape[-1], shape[-2]] if flag else shape


def reference(a, b, bias=None, ta=False, tb=False):
    """Exact product and the error scale sum_k |a_ik| |b_kj| (+ |bias|), in float64."""
    a, b = a.astype(np.float64), b.astype(np.float64)
    if ta:
        a = np.swapaxes(a, -1, -2)
    if tb:
        b = np.swapaxes(b, -1, -2)
    ref, scale = a @ b, np.abs(a) @ np.abs(b)
    if bias is not None:
        ref, scale = ref + bias, scale + np.abs(bias.astype(np.float64))
    return ref, scale


def assert_matmul_close(out, ref, scale, extra=0.0):
    """|out - ref| <= SUM_ULPS ulps of the scale, plus the rounding to a narrower output type (extra)."""
    assert out.shape == ref.shape, (out.shape, ref.shape)
    bound = SUM_ULPS * F32_EPS * scale + extra
    err = np.abs(out.astype(np.float64) - ref)
    bad = ~(err <= bound)
    assert not bad.any(), f"{bad.sum()} of {bad.size} outside the bound; worst excess {np.max(err - bound):.3g}"


def f16_rounding(ref):
    return F16_U * np.abs(ref) + F16_TINY


def randn(rng, shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


# -- shapes: letters are named dynamic dims; "k" is the contraction dimension ------------------------------

BINDINGS = [
    {"m": 1, "k": 1, "n": 1, "b": 1},
    {"m": 5, "k": 16, "n": 7, "b": 2},
    {"m": 7, "k": 37, "n": 19, "b": 2},  # 7 rows (one weight row per block), a k tail, an odd n
    {"m": 33, "k": 300, "n": 40, "b": 3},
]

# name -> (a shape, b shape) before transposes, as numpy writes a @ b
CASES = {
    "2d": (["m", "k"], ["k", "n"]),
    "batched": (["b", "m", "k"], ["b", "k", "n"]),
    "batched_4d": (["b", 2, "m", "k"], ["b", 2, "k", "n"]),
    "a_without_batch": (["m", "k"], ["b", "k", "n"]),  # the first operand broadcasts
    "a_batch_of_one": ([1, "m", "k"], ["b", "k", "n"]),
    "b_without_batch": (["b", "m", "k"], ["k", "n"]),  # the second operand broadcasts
    "b_batch_of_one": (["b", "m", "k"], [1, "k", "n"]),
    "both_broadcast": ([2, 1, "m", "k"], [1, 3, "k", "n"]),  # each broadcasts along a different axis
    "both_broadcast_other_way": ([1, 3, "m", "k"], [2, 1, "k", "n"]),
}
TRANSPOSES = {"nn": (False, False), "tn": (True, False), "nt": (False, True), "tt": (True, True)}


def dims():
    return {d: dg.Dim(d) for d in "mknb"}


@pytest.mark.parametrize("tr", TRANSPOSES)
@pytest.mark.parametrize("case", CASES)
def test_matmul_f32_runtime_weights(case, tr, rng):
    ta, tb = TRANSPOSES[tr]
    sa, sb = transposed(CASES[case][0], ta), transposed(CASES[case][1], tb)
    d = dims()
    cp = compile_op(K.MatMul, [symbolic(sa, d), symbolic(sb, d)], attrs={"transpose_a": ta, "transpose_b": tb})
    for binding in BINDINGS:
        a, b = randn(rng, concrete(sa, binding)), randn(rng, concrete(sb, binding))
        (out,) = run(cp, a, b)
        assert out.dtype == np.float32
        assert_matmul_close(out, *reference(a, b, ta=ta, tb=tb))


def test_matmul_splits_across_threads(rng):
    sa, sb = [2, 1, "m", "k"], [1, 3, "n", "k"]
    d = dims()
    engine = dg.Engine(dg.Engine.CPU, num_threads=2)
    cp = compile_op(K.MatMul, [symbolic(sa, d), symbolic(sb, d)], attrs={"transpose_b": True}, engine=engine)
    for binding in BINDINGS:
        a, b = randn(rng, concrete(sa, binding)), randn(rng, concrete(sb, binding))
        assert_matmul_close(run(cp, a, b)[0], *reference(a, b, tb=True))


@pytest.mark.parametrize("n", [7, 40, 100])
def test_matmul_splits_columns_across_threads(n, rng):
    # one batch: the threads share the output columns (blocks of 16 columns; the last may be short or empty)
    d = dims()
    engine = dg.Engine(dg.Engine.CPU, num_threads=2)
    cp = compile_op(K.MatMul, [symbolic(["m", "k"], d), symbolic(["k", "n"], d)], engine=engine)
    for m in (1, 2, 6, 7, 33):
        a, b = randn(rng, (m, 48)), randn(rng, (48, n))
        assert_matmul_close(run(cp, a, b)[0], *reference(a, b))


def test_matmul_anonymous_dynamic_dims(rng):
    # every dimension DYNAMIC_DIM; the contraction dims are required equal at execution
    D = dg.DYNAMIC_DIM
    cp = compile_op(K.MatMul, [[D, D, D], [D, D]])
    for shape_a, shape_b in [((1, 1, 1), (1, 1)), ((2, 3, 4), (4, 5)), ((4, 9, 64), (64, 17))]:
        a, b = randn(rng, shape_a), randn(rng, shape_b)
        assert_matmul_close(run(cp, a, b)[0], *reference(a, b))


# -- bias ---------------------------------------------------------------------------------------------------

BIAS_CASES = {
    "per_column": ["n"],
    "per_row": ["m", 1],
    "full": ["b", "m", "n"],
    "scalar": [1],
}


@pytest.mark.parametrize("bias_case", BIAS_CASES)
def test_matmul_with_runtime_bias(bias_case, rng):
    sa, sb, sc = ["b", "m", "k"], ["k", "n"], BIAS_CASES[bias_case]
    d = dims()
    cp = compile_op(K.MatMul, [symbolic(s, d) for s in (sa, sb, sc)])
    for binding in BINDINGS:
        a, b, c = (randn(rng, concrete(s, binding)) for s in (sa, sb, sc))
        assert_matmul_close(run(cp, a, b, c)[0], *reference(a, b, c))


def test_matmul_bias_length_is_checked_at_execution(rng):
    D = dg.DYNAMIC_DIM
    cp = compile_op(K.MatMul, [[D, 4], [4, D], [D]])
    with pytest.raises(dg.ShapeError):
        run(cp, randn(rng, (2, 4)), randn(rng, (4, 3)), randn(rng, (5,)))


# -- constant weights ---------------------------------------------------------------------------------------

# (a shape, weight shape): the weight is a CONSTANT, so its shape is static
CONST_CASES = {
    "2d": (["m", 48], [48, 24]),
    "batched": ([3, "m", 48], [3, 48, 24]),
    "a_broadcasts": (["m", 48], [3, 48, 24]),
    "weight_broadcasts": ([2, "b", "m", 48], [48, 24]),
    "both_broadcast": ([2, 1, "m", 48], [3, 48, 24]),
}


@pytest.mark.parametrize("tr", TRANSPOSES)
@pytest.mark.parametrize("case", CONST_CASES)
def test_matmul_f32_constant_weights(case, tr, rng):
    # transpose_b=False weights are stored pre-transposed by a compile pass; both forms must agree
    ta, tb = TRANSPOSES[tr]
    sa, sw = transposed(CONST_CASES[case][0], ta), transposed(CONST_CASES[case][1], tb)
    w = randn(rng, sw)
    attrs = {"transpose_a": ta, "transpose_b": tb}
    cp = compile_op(K.MatMul, [symbolic(sa, dims()), sw], attrs=attrs, constants={1: w})
    for binding in BINDINGS:
        a = randn(rng, concrete(sa, binding))
        assert_matmul_close(run(cp, a)[0], *reference(a, w, ta=ta, tb=tb))


def test_matmul_constant_weight_and_bias(rng):
    # a Linear layer: x[b, m, 48] @ W[48, 24] + bias[24], W and bias constant
    w, bias = randn(rng, (48, 24)), randn(rng, (24,))
    cp = compile_op(K.MatMul, [symbolic(["b", "m", 48], dims()), [48, 24], [24]], constants={1: w, 2: bias})
    for binding in BINDINGS:
        a = randn(rng, concrete(["b", "m", 48], binding))
        assert_matmul_close(run(cp, a)[0], *reference(a, w, bias))


def test_matmul_constant_left_operand(rng):
    w = randn(rng, (6, 48))
    cp = compile_op(K.MatMul, [[6, 48], symbolic([48, "n"], dims())], constants={0: w})
    for binding in BINDINGS:
        b = randn(rng, concrete([48, "n"], binding))
        assert_matmul_close(run(cp, b)[0], *reference(w, b))


@pytest.mark.parametrize(
    "weight_type, weight_u, activation_u",
    [
        # ggml multiplies f16 weights by activations converted to f16
        ("f16", F16_U, F16_U),
        # bf16 weights are converted to f32 for the product; activations stay f32
        ("bf16", BF16_U / 2, 0.0),
    ],
)
def test_matmul_weights_stored_narrower(weight_type, weight_u, activation_u, rng):
    # weight_type rounds the f32 weights once when stored: each product then carries the rounding of
    # the weight (and of the activation, for f16), relative to |a| |w|
    w = randn(rng, (64, 24))
    cp = compile_op(K.MatMul, [symbolic(["m", 64], dims()), [64, 24]], constants={1: w}, weight_type=weight_type)
    for binding in BINDINGS:
        a = randn(rng, concrete(["m", 64], binding))
        ref, scale = reference(a, w)
        assert_matmul_close(run(cp, a)[0], ref, scale, extra=(weight_u + activation_u) * scale)


# -- f16 ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("tr", TRANSPOSES)
@pytest.mark.parametrize("case", ["2d", "a_without_batch", "b_without_batch", "both_broadcast"])
def test_matmul_f16_runtime_weights(case, tr, rng):
    # exact products of f16 values summed in f32, then rounded once to f16
    ta, tb = TRANSPOSES[tr]
    sa, sb = transposed(CASES[case][0], ta), transposed(CASES[case][1], tb)
    d = dims()
    attrs = {"transpose_a": ta, "transpose_b": tb}
    cp = compile_op(K.MatMul, [symbolic(sa, d), symbolic(sb, d)], in_dtypes=dg.f16, attrs=attrs)
    for binding in BINDINGS:
        a, b = randn(rng, concrete(sa, binding), np.float16), randn(rng, concrete(sb, binding), np.float16)
        (out,) = run(cp, a, b)
        assert out.dtype == np.float16
        ref, scale = reference(a, b, ta=ta, tb=tb)
        assert_matmul_close(out, ref, scale, extra=f16_rounding(ref))


@pytest.mark.parametrize("tb", [False, True])
def test_matmul_f16_constant_weights_and_bias(tb, rng):
    w = randn(rng, (24, 48) if tb else (48, 24), np.float16)
    bias = randn(rng, (24,), np.float16)
    sa = ["b", "m", 48]
    shapes = [symbolic(sa, dims()), list(w.shape), [24]]
    cp = compile_op(K.MatMul, shapes, in_dtypes=dg.f16, attrs={"transpose_b": tb}, constants={1: w, 2: bias})
    for binding in BINDINGS:
        a = randn(rng, concrete(sa, binding), np.float16)
        ref, scale = reference(a, w, bias, tb=tb)
        assert_matmul_close(run(cp, a)[0], ref, scale, extra=f16_rounding(ref))


# -- errors -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("tr", TRANSPOSES)
def test_matmul_static_contraction_mismatch_fails_at_finalize(tr):
    ta, tb = TRANSPOSES[tr]
    sa, sb = transposed(["m", 4], ta), transposed([5, 3], tb)
    with pytest.raises(dg.ShapeError, match="contraction dimension"):
        compile_op(K.MatMul, [symbolic(sa, dims()), sb], attrs={"transpose_a": ta, "transpose_b": tb})


def test_matmul_dynamic_contraction_mismatch_fails_at_execution(rng):
    D = dg.DYNAMIC_DIM
    cp = compile_op(K.MatMul, [[D, D], [D, D]])
    with pytest.raises(dg.ShapeError, match="contraction dimension"):
        run(cp, randn(rng, (2, 4)), randn(rng, (5, 3)))


def test_matmul_batch_dims_that_do_not_broadcast_fail_at_finalize():
    with pytest.raises(dg.ShapeError, match="do not broadcast"):
        compile_op(K.MatMul, [symbolic([2, "m", 4], dims()), [3, 4, 6]])


def test_matmul_bias_that_does_not_broadcast_fails_at_finalize():
    with pytest.raises(dg.ShapeError, match="broadcast"):
        compile_op(K.MatMul, [symbolic(["m", 4], dims()), [4, 6], [4]])


def test_matmul_bias_of_higher_rank_than_the_output_is_refused():
    with pytest.raises(dg.ShapeError, match="bias"):
        compile_op(K.MatMul, [symbolic(["m", 4], dims()), [4, 6], [2, 1, 6]])


@pytest.mark.parametrize("which", [0, 1])
def test_matmul_needs_rank_2(which):
    shapes = [[3, 4], [4, 6]]
    shapes[which] = [4]
    with pytest.raises(dg.ShapeError, match="rank >= 2"):
        compile_op(K.MatMul, shapes)


@pytest.mark.parametrize("dtypes", [[dg.f32, dg.f16], [dg.f16, dg.f32], [dg.f32, dg.f32, dg.f16]])
def test_matmul_mixed_dtypes_raise_dtype_error(dtypes):
    shapes = [[3, 4], [4, 6], [6]][: len(dtypes)]
    with pytest.raises(dg.DTypeError, match="must match"):
        compile_op(K.MatMul, shapes, in_dtypes=dtypes)


@pytest.mark.parametrize("dtype", [dg.i32, dg.i64, dg.boolean])
def test_matmul_on_integers_raises_dtype_error(dtype):
    with pytest.raises(dg.DTypeError, match="floating-point"):
        compile_op(K.MatMul, [[3, 4], [4, 6]], in_dtypes=dtype)
