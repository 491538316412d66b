"""BatchNormInference and GroupNorm (instance norm: one group per channel)
against float64 numpy references, compiled once with dynamic batch and
spatial sizes and run at three shapes.

Bounds: batch norm is one multiply-add per element with a scale and shift
rounded to float32 (a few U relative to |x * scale| + |shift|); group norm
as LayerNorm (tests/ops/test_norm.py): the float32 mean's rounding divided
by the standard deviation, cond = max|x| / std of the group, plus a few
roundings of the result."""

import numpy as np
import pytest

import dyngraph as dg
from oputil import compile_op, run
from dyngraph.reference import spatial_numpy as ref

K = dg.OpKind
D = dg.DYNAMIC_DIM
U = 2.0**-24


def shape_of(fmt, n, c, spatial):
    return [n, c, *spatial] if fmt == "NCX" else [n, *spatial, c]


def bn_params(rng, c):
    gamma, beta, mean = (rng.standard_normal(c).astype(np.float32) for _ in range(3))
    var = rng.uniform(0.1, 3.0, c).astype(np.float32)
    return gamma, beta, mean, var


@pytest.mark.parametrize("fmt", ["NCX", "NXC"])
@pytest.mark.parametrize("spatial", [[], [D], [D, D]])
def test_batch_norm_inference_matches_numpy(fmt, spatial, rng):
    C = 6
    p = bn_params(rng, C)
    cp = compile_op(K.BatchNormInference, [shape_of(fmt, D, C, spatial)] + [[C]] * 4,
                    attrs={"epsilon": 1e-3, "data_format": fmt}, constants={i + 1: v for i, v in enumerate(p)})
    for n, size in [(1, 1), (2, 7), (5, 19)]:
        x = (3 * rng.standard_normal(shape_of(fmt, n, C, [size] * len(spatial)))).astype(np.float32)
        (y,) = run(cp, x)
        want = ref.batch_norm(x, *p, 1e-3, fmt)
        scale = ref.batch_norm(np.abs(x), np.abs(p[0]), np.abs(p[1]), np.zeros(C), p[3], 1e-3, fmt) + \
            np.abs(ref.batch_norm(np.zeros_like(x), *p, 1e-3, fmt))
        assert np.all(np.abs(y - want) <= 4 * U * scale)


def test_batch_norm_with_runtime_parameters_and_f16_data(rng):
    C = 4
    cp = compile_op(K.BatchNormInference, [[D, C, D]] + [[C]] * 4, in_dtypes=[dg.f16] + [dg.f32] * 4,
                    attrs={"epsilon": 1e-5, "data_format": "NCX"})
    for n, L in [(1, 3), (2, 10), (3, 33)]:
        x = rng.standard_normal((n, C, L)).astype(np.float16)
        p = bn_params(rng, C)
        (y,) = run(cp, x, *p)
        assert y.dtype == np.float16
        want = ref.batch_norm(x, *p, 1e-5)
        np.testing.assert_allclose(y.astype(np.float64), want, rtol=1e-3, atol=1e-3)


def assert_group_norm_close(y, x, groups, eps, gamma=None, beta=None, fmt="NCX"):
    want = ref.group_norm(x, groups, eps, gamma, beta, fmt)
    xn = ref.to_ncx(x.astype(np.float64), fmt)
    xg = xn.reshape(xn.shape[0], groups, -1)
    cond = np.abs(xg).max(-1, keepdims=True) / np.sqrt(xg.var(-1, keepdims=True) + eps)
    cond = ref.from_ncx(np.broadcast_to(cond, xg.shape).reshape(xn.shape), fmt)
    g = 1.0 if gamma is None else np.abs(ref.from_ncx(gamma.reshape((1, -1) + (1,) * (x.ndim - 2)), fmt))
    b = 0.0 if beta is None else np.abs(ref.from_ncx(beta.reshape((1, -1) + (1,) * (x.ndim - 2)), fmt))
    bound = (2 * cond * g + 4 * (np.abs(ref.group_norm(x, groups, eps, fmt=fmt)) * g + b)) * U
    err = np.abs(y.astype(np.float64) - want)
    assert y.shape == want.shape
    assert np.all(err <= bound), f"error {err.max()} above the bound"


@pytest.mark.parametrize("fmt", ["NCX", "NXC"])
@pytest.mark.parametrize("groups", [1, 2, 8])  # 8: instance norm
@pytest.mark.parametrize("spatial", [[D], [D, D]])
def test_group_norm_matches_numpy(fmt, groups, spatial, rng):
    C = 8
    gamma = rng.standard_normal(C).astype(np.float32)
    beta = rng.standard_normal(C).astype(np.float32)
    cp = compile_op(K.GroupNorm, [shape_of(fmt, D, C, spatial), [C], [C]],
                    attrs={"groups": groups, "epsilon": 1e-5, "data_format": fmt}, constants={1: gamma, 2: beta})
    for n, size in [(1, 2), (2, 9), (3, 31)]:
        x = (2 * rng.standard_normal(shape_of(fmt, n, C, [size] * len(spatial))) + 0.5).astype(np.float32)
        (y,) = run(cp, x)
        assert_group_norm_close(y, x, groups, 1e-5, gamma, beta, fmt)


def test_group_norm_without_affine_and_a_large_epsilon(rng):
    cp = compile_op(K.GroupNorm, [[D, 6, D]], attrs={"groups": 3, "use_affine": False, "epsilon": 0.5,
                                                     "data_format": "NCX"})
    for n, L in [(1, 1), (2, 5), (4, 50)]:
        x = (0.3 * rng.standard_normal((n, 6, L))).astype(np.float32)
        (y,) = run(cp, x)
        assert_group_norm_close(y, x, 3, 0.5)


def test_group_norm_of_rank_2_input(rng):
    cp = compile_op(K.GroupNorm, [[D, 12]], attrs={"groups": 4, "use_affine": False, "data_format": "NCX"})
    for n in (1, 3, 8):
        x = rng.standard_normal((n, 12)).astype(np.float32)
        (y,) = run(cp, x)
        assert_group_norm_close(y, x, 4, 1e-5)


# -- errors ------------------------------------------------------------------------------


def test_groups_not_dividing_channels_is_a_shape_error():
    with pytest.raises(dg.ShapeError, match="not divisible by groups"):
        compile_op(K.GroupNorm, [[D, 6, D]], attrs={"groups": 4, "use_affine": False, "data_format": "NCX"})


def test_group_norm_with_affine_needs_gamma_and_beta():
    with pytest.raises(dg.ShapeError, match="needs gamma and beta"):
        compile_op(K.GroupNorm, [[D, 6, D]], attrs={"groups": 2, "data_format": "NCX"})


def test_group_norm_keep_stats_is_refused():
    with pytest.raises(dg.ShapeError, match="keep_stats"):
        compile_op(K.GroupNorm, [[D, 6, D]], attrs={"groups": 2, "use_affine": False, "keep_stats": True})


def test_batch_norm_parameter_of_the_wrong_length_is_a_shape_error():
    with pytest.raises(dg.ShapeError, match="mean length"):
        compile_op(K.BatchNormInference, [[D, 4, D], [4], [4], [5], [4]], attrs={"epsilon": 1e-5, "data_format": "NCX"})


def test_batch_norm_needs_epsilon():
    with pytest.raises(dg.GraphError, match="'epsilon' is required"):
        compile_op(K.BatchNormInference, [[D, 4, D], [4], [4], [4], [4]], attrs={"data_format": "NCX"})


def test_negative_epsilon_is_a_graph_error():
    with pytest.raises(dg.GraphError, match="must be >= 0"):
        compile_op(K.BatchNormInference, [[D, 4, D], [4], [4], [4], [4]], attrs={"epsilon": -1.0})


def test_integer_batch_norm_is_a_dtype_error():
    with pytest.raises(dg.DTypeError):
        compile_op(K.BatchNormInference, [[D, 4, D], [4], [4], [4], [4]], in_dtypes=dg.i32, attrs={"epsilon": 1e-5})
