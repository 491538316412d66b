"""oneDNN features the importer writes with several dyngraph ops (PReLU,
MatMul of 1-D inputs, LayerNorm's mean and variance outputs), against numpy
written from oneDNN's operation pages; without decomposition they are
refused by name."""

import numpy as np
import pytest

import dyngraph as dg
from dyngraph.onednn import import_graph

from .jsoncase import doc, lt, op, run_json


def prelu_ref(x, slope):
    return np.where(x >= 0, x, slope * x)


@pytest.mark.parametrize("fmt,per_channel,shape,slope_shape,slope_view", [
    ("NCX", True, [2, 3, 4, 5], [3], (1, 3, 1, 1)),      # along the channels, axis 1
    ("NXC", True, [2, 4, 5, 3], [3], (3,)),              # along the channels, the last axis
    ("NCX", False, [2, 3, 4, 5], [5], (5,)),             # 1-D slope without per-channel: the last axis
    ("NCX", True, [4, 16, 3, 4], [4, 16, 3, 4], None),   # a slope of src's shape (oneDNN's op/f32/prelu.json)
    ("NCX", True, [2, 3, 4, 5], [3, 1, 5], None),        # numpy broadcasting from the right
    ("NXC", True, [7, 6], [6], (6,)),
])
def test_prelu_is_src_where_nonnegative_else_slope_times_src(fmt, per_channel, shape, slope_shape, slope_view, rng):
    x = rng.standard_normal(shape).astype(np.float32)
    x.flat[0], x.flat[1] = 0.0, np.nan
    slope = rng.standard_normal(slope_shape).astype(np.float32)
    d = doc(op(0, "PReLU", [lt(0, shape), lt(1, slope_shape)], [lt(2, shape)], data_format=fmt,
               per_channel_broadcast=per_channel))
    (y,) = run_json(d, {0: x, 1: slope}).values()
    want = prelu_ref(x, slope.reshape(slope_view) if slope_view else slope)
    np.testing.assert_array_equal(y, want)  # one product or none per element: exact


def test_prelu_data_format_defaults_to_nxc_and_per_channel(rng):
    x, slope = rng.standard_normal((2, 5, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    (y,) = run_json(doc(op(0, "PReLU", [lt(0, [2, 5, 3]), lt(1, [3])], [lt(2, [2, 5, 3])])), {0: x, 1: slope}).values()
    np.testing.assert_array_equal(y, prelu_ref(x, slope))


@pytest.mark.parametrize("sa,sb,ta,tb,out", [
    ([6], [6, 4], False, False, [4]),            # src [K] -> [1, K]
    ([6], [4, 6], True, True, [4]),              # transpose_a ignored for a 1-D src; transpose_b applies
    ([3, 6], [6], False, False, [3]),            # weights [K] -> [K, 1]
    ([6], [6], False, False, [1]),               # a dot product
    ([6], [2, 6, 4], False, False, [2, 4]),      # a batch of weights: [2, 1, 4] -> [2, 4]
    ([2, 3, 6], [6], False, True, [2, 3]),       # transpose_b ignored for 1-D weights
])
def test_matmul_of_1d_inputs_follows_onednns_unsqueeze_rule(sa, sb, ta, tb, out, rng):
    a, b = rng.standard_normal(sa).astype(np.float32), rng.standard_normal(sb).astype(np.float32)
    d = doc(op(0, "MatMul", [lt(0, sa), lt(1, sb)], [lt(2, out)], transpose_a=ta, transpose_b=tb))
    (y,) = run_json(d, {0: a, 1: b}).values()
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    if tb and b.ndim > 1:
        b64 = np.swapaxes(b64, -1, -2)
    want = np.matmul(a64, b64)  # numpy's matmul promotes and drops 1-D axes the same way
    assert y.shape == tuple(out)
    np.testing.assert_allclose(y, np.reshape(want, out), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape,begin", [([4, 5, 6], -1), ([2, 3, 4, 5], 2), ([3, 7], 0)])
def test_layernorm_mean_and_variance_outputs_are_the_biased_statistics(shape, begin, rng):
    x = (rng.standard_normal(shape) * 3 + 1).astype(np.float32)
    b = begin % len(shape)
    stat_shape = shape[:b]
    d = doc(op(0, "LayerNorm", [lt(0, shape)], [lt(1, shape), lt(2, stat_shape), lt(3, stat_shape)],
               keep_stats=True, use_affine=False, begin_norm_axis=begin, epsilon=1e-5))
    y, mean, var = run_json(d, {0: x}).values()
    axes = tuple(range(b, len(shape)))
    x64 = x.astype(np.float64)
    m, v = x64.mean(axes), x64.var(axes)  # numpy's var is the biased one: oneDNN's formula
    np.testing.assert_allclose(mean, m, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(var, v, rtol=1e-5, atol=1e-6)
    mk, vk = x64.mean(axes, keepdims=True), x64.var(axes, keepdims=True)
    np.testing.assert_allclose(y, (x64 - mk) / np.sqrt(vk + 1e-5), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("d,feature", [
    (doc(op(0, "PReLU", [lt(0, [1, 3, 8, 8]), lt(1, [3])], [lt(2, [1, 3, 8, 8])], data_format="NCX")),
     "op kind PReLU"),
    (doc(op(0, "MatMul", [lt(0, [3]), lt(1, [3, 2])], [lt(2, [2])])), "1-D MatMul input"),
    (doc(op(0, "LayerNorm", [lt(0, [2, 3])], [lt(1, [2, 3]), lt(2, [2]), lt(3, [2])], keep_stats=True,
            use_affine=False)), "LayerNorm outputs mean, variance"),
])
def test_without_decomposition_each_is_refused_by_name(d, feature):
    with pytest.raises(dg.UnsupportedError) as e:
        import_graph(d, decompose=False)
    assert e.value.features == (feature,)


def test_a_rank_0_layernorm_with_statistics_outputs_is_a_typed_error():
    """No axis to normalize over: a clear error, not a ZeroDivisionError from the decomposition."""
    d = doc(op(0, "LayerNorm", [lt(0, [])], [lt(1, []), lt(2, []), lt(3, [])], keep_stats=True, use_affine=False))
    with pytest.raises(dg.DyngraphError):
        import_graph(d)
