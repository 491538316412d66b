"""SoftMax, LayerNorm and RMSNorm against numpy.

Every test compiles its op once with dynamic dimensions and runs several
concrete shapes through that one compiled partition. References are computed
in float64 from the same float32 inputs.
"""

import numpy as np
import pytest

import dyngraph as dg
from oputil import compile_op, run

D = dg.DYNAMIC_DIM
K = dg.OpKind

U = 2.0**-24  # float32 unit roundoff

# Tolerances: error bounds of the float32 computation, each checked against
# the errors measured on these tests and on a wider stress run.
# - softmax: exp(x - max) sees x - max rounded to float32, an absolute error
#   of |x - max| * U in the exponent, so the relative error grows with it;
#   ggml's vectorized expf and the normalization add a few U. The bound
#   checked is (SOFTMAX_U + |x - max|) * U relative; a stress run (rows of 1
#   to 8192, spreads 0.1 to 30) reaches (4.1 + |x - max|) * U.
SOFTMAX_U = 8.0
# - RMSNorm scales x by one factor (no cancellation): the largest relative
#   error in the stress run is 1.7e-7.
RMS_RTOL = 1e-6
# - LayerNorm subtracts the mean, so no fixed tolerance is honest. ggml sums
#   in double but holds the mean in float32: that rounding (U|mean|) is
#   divided by the standard deviation, so the error grows with
#   cond = max|x| / sqrt(var + eps) of the normalized group (168 for two
#   nearly equal values, 3000 for a small spread around 10). The scaling,
#   gamma and beta then round the result a few times. The bound checked is
#   (LN_COND * cond * |gamma| + LN_OUT * (|normalized * gamma| + |beta|)) * U;
#   errors reach 0.66 of it in a stress run (groups of 2 to 5000 values,
#   spreads 1e-3 to 100, offsets 0 and 10) and 0.95 with f16 outputs, where
#   the f16 rounding dominates.
LN_COND = 2.0
LN_OUT = 4.0
# - f16 outputs are computed in f32 and rounded once: within half an f16 ulp
#   (2**-11 relative), plus half the spacing of f16 subnormals (2**-25) for
#   results below 2**-14.
F16_RTOL = 5e-4
F16_ATOL = 2.0**-25


def softmax_ref(x, axis):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def assert_softmax_close(y, x, axis, f16=False):
    """Compare with softmax_ref within the bound explained at the top."""
    ref = softmax_ref(x, axis)
    xd = x.astype(np.float64)
    bound = (SOFTMAX_U + (xd.max(axis=axis, keepdims=True) - xd)) * U * ref
    if f16:
        bound = bound + F16_RTOL * ref + F16_ATOL
    err = np.abs(y.astype(np.float64) - ref)
    worst = np.unravel_index(np.argmax(err - bound), err.shape)
    assert (err <= bound).all(), f"error {err[worst]} above the bound {bound[worst]} at {worst}"


def layer_norm_ref(x, begin, eps, gamma=None, beta=None):
    x = x.astype(np.float64)
    axes = tuple(range(begin % x.ndim, x.ndim))
    y = (x - x.mean(axis=axes, keepdims=True)) / np.sqrt(x.var(axis=axes, keepdims=True) + eps)
    if gamma is not None:
        y = y * gamma + beta
    return y


def assert_layer_norm_close(y, x, begin, eps, gamma=None, beta=None, f16=False):
    """Compare with layer_norm_ref within the bound explained at the top."""
    ref = layer_norm_ref(x, begin, eps, gamma, beta)
    xd = x.astype(np.float64)
    axes = tuple(range(begin % x.ndim, x.ndim))
    cond = np.abs(xd).max(axis=axes, keepdims=True) / np.sqrt(xd.var(axis=axes, keepdims=True) + eps)
    g = 1.0 if gamma is None else np.abs(gamma.astype(np.float64))
    b = 0.0 if beta is None else np.abs(beta.astype(np.float64))
    # |normalized| * |gamma| + |beta|: the size of the terms rounded last
    size = np.abs(layer_norm_ref(x, begin, eps)) * g + b
    bound = (LN_COND * cond * g + LN_OUT * size) * U
    if f16:
        bound = bound + F16_RTOL * np.abs(ref) + F16_ATOL
    err = np.abs(y.astype(np.float64) - ref)
    worst = np.unravel_index(np.argmax(err / bound), err.shape)
    assert (err <= bound).all(), f"error {err[worst]} above the bound {bound[worst]} at {worst}"


def rms_norm_ref(x, begin, eps, gamma=None):
    x = x.astype(np.float64)
    axes = tuple(range(begin % x.ndim, x.ndim))
    y = x / np.sqrt(np.mean(x * x, axis=axes, keepdims=True) + eps)
    return y if gamma is None else y * gamma


# -- SoftMax -------------------------------------------------------------------------


@pytest.mark.parametrize("axis", [-1, -2, -3, 0, 1, 2])
def test_softmax_along_any_axis_matches_numpy(axis, rng):
    cp = compile_op(K.SoftMax, [[D, 7, D]], attrs={"axis": axis})
    for shape in [(1, 7, 1), (3, 7, 5), (2, 7, 64)]:
        x = (3 * rng.standard_normal(shape)).astype(np.float32)
        (y,) = run(cp, x)
        assert_softmax_close(y, x, axis)


def test_softmax_default_axis_is_the_last(rng):
    cp = compile_op(K.SoftMax, [[D, D]])
    for shape in [(1, 1), (4, 3), (2, 100)]:
        x = rng.standard_normal(shape).astype(np.float32)
        (y,) = run(cp, x)
        assert_softmax_close(y, x, -1)


def test_softmax_of_large_inputs_does_not_overflow(rng):
    cp = compile_op(K.SoftMax, [[D, 16]], attrs={"axis": 1})
    for n in (1, 3, 9):
        x = (1000 + 10 * rng.standard_normal((n, 16))).astype(np.float32)
        (y,) = run(cp, x)
        assert_softmax_close(y, x, 1)


@pytest.mark.parametrize("axis", [-1, 0])
def test_softmax_f16_rounds_once_to_f16(axis, rng):
    cp = compile_op(K.SoftMax, [[D, 8, D]], in_dtypes=dg.f16, attrs={"axis": axis})
    for shape in [(1, 8, 1), (3, 8, 5), (6, 8, 40)]:
        x = (3 * rng.standard_normal(shape)).astype(np.float16)
        (y,) = run(cp, x)
        assert y.dtype == np.float16
        assert_softmax_close(y, x, axis, f16=True)


def test_softmax_axis_out_of_range_is_a_shape_error():
    with pytest.raises(dg.ShapeError, match="axis 2 is out of range"):
        compile_op(K.SoftMax, [[D, 4]], attrs={"axis": 2})


def test_softmax_of_integers_is_a_dtype_error():
    with pytest.raises(dg.DTypeError):
        compile_op(K.SoftMax, [[D, 4]], in_dtypes=dg.i32)


# -- LayerNorm -----------------------------------------------------------------------


@pytest.mark.parametrize("begin", [-1, -2, 0, 1, 2])
def test_layer_norm_without_affine_matches_numpy(begin, rng):
    cp = compile_op(K.LayerNorm, [[D, 6, D]], attrs={"begin_norm_axis": begin, "use_affine": False})
    for shape in [(1, 6, 2), (3, 6, 5), (8, 6, 33)]:
        x = (2 * rng.standard_normal(shape) + 0.5).astype(np.float32)
        (y,) = run(cp, x)
        assert_layer_norm_close(y, x, begin, 1e-5)


@pytest.mark.parametrize("begin", [-1, -2])
def test_layer_norm_with_constant_gamma_beta_matches_numpy(begin, rng):
    norm_shape = (6, 5)[begin:] if begin == -1 else (6, 5)
    gamma = rng.standard_normal(norm_shape).astype(np.float32)
    beta = rng.standard_normal(norm_shape).astype(np.float32)
    cp = compile_op(
        K.LayerNorm,
        [[D, 6, 5], list(norm_shape), list(norm_shape)],
        attrs={"begin_norm_axis": begin},
        constants={1: gamma, 2: beta},
    )
    for n in (1, 4, 13):
        x = rng.standard_normal((n, 6, 5)).astype(np.float32)
        (y,) = run(cp, x)
        assert_layer_norm_close(y, x, begin, 1e-5, gamma, beta)


def test_layer_norm_with_runtime_gamma_beta_of_dynamic_size(rng):
    hidden = dg.Dim("hidden", max=512)
    cp = compile_op(K.LayerNorm, [[D, hidden], [hidden], [hidden]])
    for n, h in [(1, 1), (3, 8), (5, 130)]:
        x = rng.standard_normal((n, h)).astype(np.float32)
        gamma = rng.standard_normal(h).astype(np.float32)
        beta = rng.standard_normal(h).astype(np.float32)
        (y,) = run(cp, x, gamma, beta)
        assert_layer_norm_close(y, x, -1, 1e-5, gamma, beta)


@pytest.mark.parametrize("eps", [1e-5, 1e-2, 0.5])
def test_layer_norm_applies_epsilon(eps, rng):
    cp = compile_op(K.LayerNorm, [[D, 32]], attrs={"use_affine": False, "epsilon": eps})
    for n in (1, 2, 7):
        # variance about 0.01: eps 1e-2 halves the output, 0.5 shrinks it 7x
        x = (0.1 * rng.standard_normal((n, 32))).astype(np.float32)
        (y,) = run(cp, x)
        assert_layer_norm_close(y, x, -1, eps)
        if eps > 1e-5:
            assert not np.allclose(y, layer_norm_ref(x, -1, 1e-5), rtol=1e-3, atol=1e-3)


def test_layer_norm_f16_rounds_once_to_f16(rng):
    cp = compile_op(K.LayerNorm, [[D, 24]], in_dtypes=dg.f16, attrs={"use_affine": False})
    for n in (1, 3, 10):
        x = rng.standard_normal((n, 24)).astype(np.float16)
        (y,) = run(cp, x)
        assert y.dtype == np.float16
        assert_layer_norm_close(y, x, -1, 1e-5, f16=True)


def test_layer_norm_affine_without_gamma_beta_is_a_shape_error():
    with pytest.raises(dg.ShapeError, match="gamma and beta"):
        compile_op(K.LayerNorm, [[D, 8]], attrs={"use_affine": True})


def test_layer_norm_without_affine_given_gamma_is_a_shape_error():
    with pytest.raises(dg.ShapeError, match="use_affine=False"):
        compile_op(K.LayerNorm, [[D, 8], [8], [8]], attrs={"use_affine": False})


@pytest.mark.parametrize("gamma_shape", [[7], [1, 8], [4, 8]])
def test_layer_norm_gamma_of_wrong_shape_is_a_shape_error(gamma_shape):
    with pytest.raises(dg.ShapeError, match="gamma"):
        compile_op(K.LayerNorm, [[D, 8], gamma_shape, [8]])


@pytest.mark.parametrize("begin", [2, -3])
def test_layer_norm_begin_axis_out_of_range_is_a_shape_error(begin):
    with pytest.raises(dg.ShapeError, match="begin_norm_axis"):
        compile_op(K.LayerNorm, [[D, 8]], attrs={"begin_norm_axis": begin, "use_affine": False})


def test_layer_norm_gamma_of_another_dynamic_size_fails_at_execution(rng):
    cp = compile_op(K.LayerNorm, [[D, D], [D], [D]])
    x = rng.standard_normal((2, 8)).astype(np.float32)
    g = np.ones(7, np.float32)
    with pytest.raises(dg.ShapeError, match="gamma"):
        run(cp, x, g, g)
    (y,) = run(cp, x, np.ones(8, np.float32), np.zeros(8, np.float32))  # still usable
    assert_layer_norm_close(y, x, -1, 1e-5)


# -- RMSNorm -------------------------------------------------------------------------


@pytest.mark.parametrize("begin", [-1, -2, 0, 2])
def test_rms_norm_without_gamma_matches_numpy(begin, rng):
    cp = compile_op(K.RMSNorm, [[D, 6, D]], attrs={"begin_norm_axis": begin})
    for shape in [(1, 6, 1), (3, 6, 5), (8, 6, 33)]:
        x = (2 * rng.standard_normal(shape) + 0.5).astype(np.float32)
        (y,) = run(cp, x)
        np.testing.assert_allclose(y, rms_norm_ref(x, begin, 1e-6), rtol=RMS_RTOL, atol=0)


@pytest.mark.parametrize("begin", [-1, -2])
def test_rms_norm_with_constant_gamma_matches_numpy(begin, rng):
    norm_shape = (6, 5)[begin:] if begin == -1 else (6, 5)
    gamma = rng.standard_normal(norm_shape).astype(np.float32)
    cp = compile_op(K.RMSNorm, [[D, 6, 5], list(norm_shape)], attrs={"begin_norm_axis": begin}, constants={1: gamma})
    for n in (1, 4, 13):
        x = rng.standard_normal((n, 6, 5)).astype(np.float32)
        (y,) = run(cp, x)
        np.testing.assert_allclose(y, rms_norm_ref(x, begin, 1e-6, gamma), rtol=RMS_RTOL, atol=0)


def test_rms_norm_with_runtime_gamma_of_dynamic_size(rng):
    hidden = dg.Dim("hidden", max=512)
    cp = compile_op(K.RMSNorm, [[D, hidden], [hidden]])
    for n, h in [(1, 1), (3, 8), (5, 130)]:
        x = rng.standard_normal((n, h)).astype(np.float32)
        gamma = rng.standard_normal(h).astype(np.float32)
        (y,) = run(cp, x, gamma)
        np.testing.assert_allclose(y, rms_norm_ref(x, -1, 1e-6, gamma), rtol=RMS_RTOL, atol=0)


@pytest.mark.parametrize("eps", [1e-6, 1e-2, 0.5])
def test_rms_norm_applies_epsilon(eps, rng):
    cp = compile_op(K.RMSNorm, [[D, 32]], attrs={"epsilon": eps})
    for n in (1, 2, 7):
        x = (0.1 * rng.standard_normal((n, 32))).astype(np.float32)
        (y,) = run(cp, x)
        np.testing.assert_allclose(y, rms_norm_ref(x, -1, eps), rtol=RMS_RTOL, atol=0)
        if eps > 1e-6:
            assert not np.allclose(y, rms_norm_ref(x, -1, 1e-6), rtol=1e-3, atol=1e-3)


def test_rms_norm_f16_rounds_once_to_f16(rng):
    cp = compile_op(K.RMSNorm, [[D, 24], [24]], in_dtypes=dg.f16, constants={1: np.linspace(-2, 2, 24).astype(np.float16)})
    gamma = np.linspace(-2, 2, 24).astype(np.float16)
    for n in (1, 3, 10):
        x = rng.standard_normal((n, 24)).astype(np.float16)
        (y,) = run(cp, x)
        assert y.dtype == np.float16
        np.testing.assert_allclose(y.astype(np.float64), rms_norm_ref(x, -1, 1e-6, gamma), rtol=F16_RTOL, atol=F16_ATOL)


@pytest.mark.parametrize("gamma_shape", [[7], [2, 8]])
def test_rms_norm_gamma_of_wrong_shape_is_a_shape_error(gamma_shape):
    with pytest.raises(dg.ShapeError, match="gamma"):
        compile_op(K.RMSNorm, [[D, 8], gamma_shape])


def test_rms_norm_of_integers_is_a_dtype_error():
    with pytest.raises(dg.DTypeError):
        compile_op(K.RMSNorm, [[D, 8]], in_dtypes=dg.i32)


# -- the host's one-pass kernel (kernels/row_norm.h) ----------------------------------
# On the CPU, LayerNorm and RMSNorm with their gamma and beta are one custom node (ggml's
# NORM + MUL + ADD otherwise). Its sums are taken in double with the mean held in float,
# as ggml's are, so the bounds above hold: a stress run of rows of 2 to 5000 values,
# spreads 1e-3 to 100, offsets 0 and 10, reaches 0.44 of the LayerNorm bound and a
# relative error of 1.6e-7 for RMSNorm.

WIDE_ROWS = (2, 15, 16, 17, 384, 1000, 5000)  # the kernel's 16-value blocks, their tails, long rows


def graph_nodes(cp):
    return cp.cache_info().last_graph_nodes


@pytest.mark.parametrize("threads", [1, 2])
def test_layer_norm_on_the_host_is_one_node_within_the_bound(threads, rng):
    hidden = dg.Dim("hidden", max=8192)
    eng = dg.Engine(dg.Engine.CPU, num_threads=threads)
    cp = compile_op(K.LayerNorm, [[D, hidden], [hidden], [hidden]], engine=eng)
    for h in WIDE_ROWS:
        for spread, offset in [(1e-3, 10.0), (1.0, 0.0), (100.0, 10.0)]:
            x = (offset + spread * rng.standard_normal((5, h))).astype(np.float32)
            gamma = rng.standard_normal(h).astype(np.float32)
            beta = rng.standard_normal(h).astype(np.float32)
            (y,) = run(cp, x, gamma, beta)
            assert_layer_norm_close(y, x, -1, 1e-5, gamma, beta)
            assert graph_nodes(cp) == 1


@pytest.mark.parametrize("threads", [1, 2])
def test_rms_norm_on_the_host_is_one_node_within_the_bound(threads, rng):
    hidden = dg.Dim("hidden", max=8192)
    eng = dg.Engine(dg.Engine.CPU, num_threads=threads)
    cp = compile_op(K.RMSNorm, [[D, hidden], [hidden]], engine=eng)
    for h in WIDE_ROWS:
        for scale in (1e-3, 1.0, 100.0):
            x = (scale * rng.standard_normal((5, h)) + scale).astype(np.float32)
            gamma = rng.standard_normal(h).astype(np.float32)
            (y,) = run(cp, x, gamma)
            np.testing.assert_allclose(y, rms_norm_ref(x, -1, 1e-6, gamma), rtol=RMS_RTOL, atol=0)
            assert graph_nodes(cp) == 1


def test_layer_norm_rows_are_independent_of_the_thread_count(rng):
    """Each row is one thread's, start to end: the same bits at 1, 2 and 3 threads."""
    x = (3 + rng.standard_normal((37, 384))).astype(np.float32)
    gamma, beta = rng.standard_normal(384).astype(np.float32), rng.standard_normal(384).astype(np.float32)
    ys = []
    for threads in (1, 2, 3):
        cp = compile_op(K.LayerNorm, [[D, 384], [384], [384]], engine=dg.Engine(dg.Engine.CPU, num_threads=threads),
                        constants={1: gamma, 2: beta})
        ys.append(run(cp, x)[0])
    np.testing.assert_array_equal(ys[0], ys[1])
    np.testing.assert_array_equal(ys[0], ys[2])


def test_layer_norm_of_special_values_follows_numpy():
    """A NaN or inf in a row makes that row NaN (its mean and variance are), and only that row."""
    x = np.ones((4, 20), np.float32)
    x[:, ::2] = -1.0
    x[1, 3], x[2, 0], x[3, 19] = np.nan, np.inf, -np.inf
    cp = compile_op(K.LayerNorm, [[D, 20]], attrs={"use_affine": False})
    (y,) = run(cp, x)
    assert np.isnan(y[1:]).all()
    np.testing.assert_allclose(y[0], layer_norm_ref(x[:1], -1, 1e-5)[0], rtol=1e-6)


def _gamma_beta(hidden):
    """gamma and beta of the residual tests: no zero in either (the bound of a 0 * 0 term is 0)."""
    return np.linspace(-2, 2.5, hidden, dtype=np.float32), np.linspace(1, -1.3, hidden, dtype=np.float32)


def _norm_after_add(kind, hidden, both=False, bias_add=False, threads=1):
    """kind(x + r) with gamma (and beta): a residual added just before the norm. With `both`, the
    sum is also a partition output; with `bias_add`, r is a row vector [hidden] (broadcast)."""
    g, n = dg.GraphBuilder(), dg.Dim("n")
    x = g.input("x", dg.f32, [n, hidden])
    r = g.input("r", dg.f32, [hidden] if bias_add else [n, hidden])
    total = g.op(K.Add, [x, r], {})
    gamma, beta = _gamma_beta(hidden)
    params = [g.constant("gamma", gamma)] + ([g.constant("beta", beta)] if kind == K.LayerNorm else [])
    y = g.op(kind, [total] + params, {})
    g.output(*([y, total] if both else [y]))
    return g.compile(dg.Engine(dg.Engine.CPU, num_threads=threads))


@pytest.mark.parametrize("kind", [K.LayerNorm, K.RMSNorm])
@pytest.mark.parametrize("threads", [1, 2])
def test_a_residual_added_before_the_norm_is_added_in_its_pass(kind, threads, rng):
    """Read by the norm alone, the sum is made by the norm's kernel (one node, no ADD) with the same
    bits as the sum made first: ggml's ADD rounds each sum to f32 as the kernel does."""
    hidden = 67  # whole blocks of 16 and a tail
    fused = _norm_after_add(kind, hidden, threads=threads)
    unfused = _norm_after_add(kind, hidden, both=True, threads=threads)
    gamma, beta = _gamma_beta(hidden)
    for n in (1, 5, 33):
        x = (3 + rng.standard_normal((n, hidden))).astype(np.float32)
        r = rng.standard_normal((n, hidden)).astype(np.float32)
        (y,) = run(fused, x, r)
        assert graph_nodes(fused) == 1
        y_unfused, total = run(unfused, x, r)
        assert graph_nodes(unfused) == 2
        np.testing.assert_array_equal(total, x + r)
        np.testing.assert_array_equal(y, y_unfused)
        if kind == K.LayerNorm:
            assert_layer_norm_close(y, x + r, -1, 1e-5, gamma, beta)
        else:
            np.testing.assert_allclose(y, rms_norm_ref(x + r, -1, 1e-6, gamma), rtol=RMS_RTOL, atol=0)


def test_a_broadcast_add_before_the_norm_stays_an_add(rng):
    """x + r with r one row: not the kernel's addend (x's shape, from two rows on); ggml's ADD makes
    the sum first."""
    cp = _norm_after_add(K.LayerNorm, 40, bias_add=True)
    gamma, beta = _gamma_beta(40)
    for n in (2, 6):
        x = rng.standard_normal((n, 40)).astype(np.float32)
        r = rng.standard_normal(40).astype(np.float32)
        (y,) = run(cp, x, r)
        assert graph_nodes(cp) == 2
        assert_layer_norm_close(y, x + r, -1, 1e-5, gamma, beta)


# -- strided inputs ------------------------------------------------------------------


def compile_after_slice(kind, attrs):
    """x[:, 1:, 2:7] (a strided view, not a copy) feeding the op."""
    x = dg.LogicalTensor(0, dg.f32, [D, 5, 9])
    view = dg.LogicalTensor(1, dg.f32, None)
    y = dg.LogicalTensor(2, dg.f32, None)
    g = dg.Graph(dg.Engine.CPU)
    g.add_op(dg.Op(0, K.Slice, [x], [view], {"begin": [1, 2], "end": [5, 7], "axes": [1, 2]}))
    g.add_op(dg.Op(1, kind, [view], [y], attrs))
    g.finalize()
    (part,) = g.get_partitions()
    return part.compile([x], [y], dg.Engine(dg.Engine.CPU, num_threads=1))


@pytest.mark.parametrize("axis", [0, -1])
def test_softmax_of_a_strided_view(axis, rng):
    cp = compile_after_slice(K.SoftMax, {"axis": axis})
    for n in (1, 3, 6):
        x = rng.standard_normal((n, 5, 9)).astype(np.float32)
        (y,) = cp(x)
        assert_softmax_close(y, x[:, 1:, 2:7], axis)


def test_layer_norm_of_a_strided_view(rng):
    cp = compile_after_slice(K.LayerNorm, {"begin_norm_axis": 1, "use_affine": False})
    for n in (1, 3, 6):
        x = rng.standard_normal((n, 5, 9)).astype(np.float32)
        (y,) = cp(x)
        assert_layer_norm_close(y, x[:, 1:, 2:7], 1, 1e-5)


def test_rms_norm_of_a_strided_view(rng):
    cp = compile_after_slice(K.RMSNorm, {})
    for n in (1, 3, 6):
        x = rng.standard_normal((n, 5, 9)).astype(np.float32)
        (y,) = cp(x)
        np.testing.assert_allclose(y, rms_norm_ref(x[:, 1:, 2:7], -1, 1e-6), rtol=RMS_RTOL, atol=0)
