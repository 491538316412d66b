"""What oneDNN's files write that looks contradictory and oneDNN takes: a
tensor whose consumer declares another shape than its producer (oneDNN
connects ops by tensor id: the producer's declaration is the tensor's),
the weights of a grouped ConvTranspose dequantized with one scale per
output channel over an axis of O/groups, an Interpolate scale that is no
ratio of small integers. Checked against numpy written from oneDNN's pages."""

import numpy as np
import pytest

import dyngraph as dg
from dyngraph.onednn import import_graph

from .jsoncase import doc, lt, op, run_json


def test_a_consumer_that_declares_another_shape_gets_the_producers_tensor(rng):
    # oneDNN's int8_maxpool_add_mul_fusion: Add writes [1, 4, 5, 5], Multiply reads it as [1, 4, 1, 1]
    d = doc(op(0, "Add", [lt(0, [1, 4, 5, 5]), lt(1, [1, 4, 1, 1])], [lt(2, [1, 4, 5, 5])]),
            op(1, "Multiply", [lt(3, [1, 4, 5, 5]), lt(2, [1, 4, 1, 1])], [lt(4, [1, 4, 5, 5])]))
    a, b, c = (rng.standard_normal(s).astype(np.float32) for s in ([1, 4, 5, 5], [1, 4, 1, 1], [1, 4, 5, 5]))
    (y,) = run_json(d, {0: a, 1: b, 3: c}).values()
    np.testing.assert_allclose(y, c * (a + b), rtol=1e-6)


def test_a_graph_input_declared_with_two_shapes_is_refused_by_name():
    d = doc(op(0, "ReLU", [lt(0, [2, 3])], [lt(1, [2, 3])]),
            op(1, "Add", [lt(0, [3, 2]), lt(1, [2, 3])], [lt(2, [2, 3])]))
    with pytest.raises(dg.UnsupportedError) as e:
        import_graph(d)
    assert e.value.features == ("a graph input declared with two different shapes (the file contradicts itself)",)


def _grouped_convtranspose(fmt, groups, ic, scales, zps=None):
    w_shape = [ic, 1, 3, 3] if fmt == "IOX" else [3, 3, 1, ic]
    deq = {"qtype": "per_channel", "axis": 1 if fmt == "IOX" else 2, "scales": scales}
    if zps is not None:
        deq["zps"] = zps
    return doc(op(0, "Dequantize", [lt(0, w_shape, "s8", "constant")], [lt(1, w_shape)], **deq),
               op(1, "ConvTranspose", [lt(2, [2, ic, 5, 5]), lt(1, w_shape)], [lt(3, [2, groups, 5, 5])],
                  strides=[1, 1], pads_begin=[1, 1], pads_end=[1, 1], dilations=[1, 1], groups=groups,
                  data_format="NCX", weights_format=fmt, auto_pad="None"))


@pytest.mark.parametrize("fmt", ["IOX", "XOI"])
@pytest.mark.parametrize("groups,ic", [(16, 16), (4, 8), (3, 9)])
def test_grouped_convtranspose_weights_take_a_scale_per_output_channel(fmt, groups, ic, rng):
    """g scales over the O/g axis of 1: output channel j (of group j) scales
    the weights of group j, as oneDNN's fused int8 ConvTranspose does."""
    scales = [float(2.0 ** k) for k in rng.integers(-4, 5, groups)]
    zps = [int(z) for z in rng.integers(-3, 4, groups)]
    q = rng.integers(-128, 128, [ic, 1, 3, 3] if fmt == "IOX" else [3, 3, 1, ic]).astype(np.int8)
    x = rng.standard_normal([2, ic, 5, 5]).astype(np.float32)
    (y,) = run_json(_grouped_convtranspose(fmt, groups, ic, scales, zps), {0: q, 2: x}).values()
    per_group = ic // groups
    s = np.repeat(np.array(scales, np.float32), per_group)
    z = np.repeat(np.array(zps, np.float32), per_group)
    w = (q.astype(np.float32) - (z[:, None, None, None] if fmt == "IOX" else z)) * (
        s[:, None, None, None] if fmt == "IOX" else s)
    d = doc(op(1, "ConvTranspose", [lt(2, [2, ic, 5, 5]), lt(1, list(w.shape), "f32", "constant")],
               [lt(3, [2, groups, 5, 5])], strides=[1, 1], pads_begin=[1, 1], pads_end=[1, 1], dilations=[1, 1],
               groups=groups, data_format="NCX", weights_format=fmt, auto_pad="None"))
    (want,) = run_json(d, {1: w.astype(np.float32), 2: x}).values()
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


def test_per_channel_scales_that_fit_no_grouping_are_refused_by_name():
    with pytest.raises(dg.UnsupportedError, match="5 per-channel scales over an axis of 1"):
        import_graph(_grouped_convtranspose("IOX", 4, 8, [1.0] * 5))


def test_an_interpolate_scale_of_no_small_ratio_gives_onednns_size(rng):
    """oneDNN: out = trunc(f32(21) * f32(0.809524)) = 17 (the f32 product rounds up)."""
    d = doc(op(0, "Interpolate", [lt(0, [2, 3, 21])], [lt(1, [2, 3, 17])], mode="nearest", scales=[0.809524],
               coordinate_transformation_mode="half_pixel", data_format="NCX"))
    x = rng.standard_normal([2, 3, 21]).astype(np.float32)
    (y,) = run_json(d, {0: x}).values()
    src = np.floor((np.arange(17) + 0.5) * 21 / 17).astype(int)  # nearest, half_pixel, scale = out / in
    np.testing.assert_array_equal(y, x[:, :, src])
