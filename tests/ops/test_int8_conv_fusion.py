"""The compile-time pass that makes one QuantizedConvolution of oneDNN's int8
pattern Dequantize(src) -> Convolution (+ bias) <- Dequantize(weights)
[-> Quantize] (int8_fusion.py): where it applies (the compiled program's ops),
what the fused op computes (the integer reference exactly, and the f32 graph
it replaces up to that graph's rounding), and the graphs it must leave as
they are."""

import numpy as np
import pytest
from oputil import run

import dyngraph as dg
from dyngraph.reference import spatial_numpy as sp
from dyngraph.reference.spatial import int8_conv

K = dg.OpKind
SRC = {"scales": [0.05], "zps": [110]}
OUT = {"scales": [0.4], "zps": [100]}


def wq_attrs(rng, wfmt, o, qtype="per_channel", axis=None):
    o_axis = 0 if wfmt == "OIX" else 3
    if qtype == "per_tensor":
        return {"qtype": "per_tensor", "scales": [0.02], "zps": [3]}
    return {"qtype": "per_channel", "axis": o_axis if axis is None else axis,
            "scales": [float(v) for v in rng.uniform(0.005, 0.03, o)], "zps": [int(v) for v in rng.integers(-4, 5, o)]}


def pattern(rng, fmt="NCX", wfmt="OIX", C=6, O=8, ks=(3, 3), groups=1, bias=True, requant=True, window=None,
            src_attrs=None, w_attrs=None, extra=None):
    """The int8 pattern with a dynamic batch and spatial size; returns the builder's compiled partition,
    the int8 weights, the bias and the attributes used. extra(b, tensors) may add ops and outputs."""
    window = window or dict(strides=[1, 1], dilations=[1, 1], pads_begin=[1, 1], pads_end=[1, 1])
    b = dg.GraphBuilder()
    n, h, w_ = dg.Dim("n", min=1, max=8), dg.Dim("h", min=3, max=64), dg.Dim("w", min=3, max=64)
    x = b.input("x", dg.u8, [n, C, h, w_] if fmt == "NCX" else [n, h, w_, C])
    wshape = [O, C // groups, *ks] if wfmt == "OIX" else [*ks, C // groups, O]
    W = rng.integers(-128, 128, wshape).astype(np.int8)
    B = rng.standard_normal(O).astype(np.float32)
    wa = w_attrs or wq_attrs(rng, wfmt, O)
    xf = b.op(K.Dequantize, [x], src_attrs or SRC, dtype=dg.f32)
    wf = b.op(K.Dequantize, [b.constant("w", W, dtype=dg.s8)], wa, dtype=dg.f32)
    conv_attrs = dict(window, groups=groups, data_format=fmt, weights_format=wfmt)
    y = b.op(K.Convolution, [xf, wf] + ([b.constant("b", B)] if bias else []), conv_attrs)
    outs = [b.op(K.Quantize, [y], OUT, dtype=dg.u8) if requant else y]
    if extra:
        outs = extra(b, dict(x=x, xf=xf, wf=wf, y=y, out=outs[0]))
    b.output(*outs)
    cp = b.compile(dg.Engine(dg.Engine.CPU, num_threads=1))
    return cp, W, B if bias else None, wa, conv_attrs


def kinds(cp):
    return [op.kind for op in cp._program.ops]


def fused_attrs(wa, conv_attrs, requant):
    a = dict(conv_attrs, src_scale=SRC["scales"][0], src_zp=SRC["zps"][0], wei_scales=wa["scales"], wei_zps=wa["zps"])
    if requant:
        a.update(dst_scale=OUT["scales"][0], dst_zp=OUT["zps"][0])
    return a


def f32_graph(x, W, B, wa, conv_attrs):
    """What Dequantize -> Convolution computes, in float64."""
    xd = (x.astype(np.float64) - SRC["zps"][0]) * np.float32(SRC["scales"][0])
    shape = [1] * W.ndim
    axis = wa.get("axis", 0) if wa["qtype"] == "per_channel" else 0
    shape[axis] = -1
    wd = (W.astype(np.float64) - np.array(wa["zps"]).reshape(shape)) * np.array(wa["scales"], np.float32).reshape(shape)
    c = conv_attrs
    return sp.conv(xd, wd, B, strides=c["strides"], dilations=c["dilations"], pads_begin=c["pads_begin"],
                   pads_end=c["pads_end"], groups=c["groups"], fmt=c["data_format"], wfmt=c["weights_format"])


def x_of(rng, fmt, n, C, h, w):
    return rng.integers(0, 256, [n, C, h, w] if fmt == "NCX" else [n, h, w, C]).astype(np.uint8)


@pytest.mark.parametrize("fmt,wfmt", [("NCX", "OIX"), ("NXC", "XIO")])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("requant", [False, True])
def test_the_int8_conv_pattern_becomes_one_integer_convolution(fmt, wfmt, bias, requant, rng):
    cp, W, B, wa, ca = pattern(rng, fmt, wfmt, bias=bias, requant=requant)
    assert kinds(cp) == [K.QuantizedConvolution]
    attrs = fused_attrs(wa, ca, requant)
    out = dg.u8 if requant else dg.f32
    for n, h, w in [(1, 5, 5), (2, 12, 7), (3, 8, 19)]:
        x = x_of(rng, fmt, n, 6, h, w)
        (got,) = run(cp, x)
        np.testing.assert_array_equal(got, int8_conv(x, W, B, attrs, [1, 1], [1, 1], out))
        # and what the unfused f32 graph computes, up to its rounding of each product
        want = f32_graph(x, W, B, wa, ca)
        if requant:
            q = np.clip(np.rint(want / OUT["scales"][0]) + OUT["zps"][0], 0, 255)
            assert np.abs(got.astype(int) - q).max() <= 1 and (got != q).mean() < 0.01
        else:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    assert cp.cache_info().builds == 3


def test_constant_weights_are_stored_oxi_once(rng):
    cp, W, _, _, _ = pattern(rng, "NCX", "OIX")
    (op,) = cp._program.ops
    assert op.attrs["weights_format"] == "OXI"
    wt = cp._program.tensors[op.inputs[1]]
    assert wt.concrete_shape() == (8, 3, 3, 6)


@pytest.mark.parametrize("fmt,groups,O", [("NCX", 6, 6), ("NXC", 6, 12), ("NCX", 2, 4)],
                         ids=["depthwise NCX", "depthwise x2 NXC", "grouped"])
def test_grouped_and_depthwise_patterns_fuse(fmt, groups, O, rng):
    wfmt = "OIX" if fmt == "NCX" else "XIO"
    window = dict(strides=[2, 2], dilations=[1, 1], pads_begin=[0, 0], pads_end=[0, 0], auto_pad="same_upper")
    cp, W, B, wa, ca = pattern(rng, fmt, wfmt, O=O, groups=groups, window=window)
    assert kinds(cp) == [K.QuantizedConvolution]
    for n, h, w in [(1, 9, 9), (2, 14, 11)]:
        x = x_of(rng, fmt, n, 6, h, w)
        (got,) = run(cp, x)
        # same_upper: ceil(L / 2) outputs, the padding's odd element at the end
        total = [max((-(-L // 2) - 1) * 2 + 3 - L, 0) for L in (h, w)]
        pb, pe = [t // 2 for t in total], [t - t // 2 for t in total]
        np.testing.assert_array_equal(got, int8_conv(x, W, B, fused_attrs(wa, ca, True), pb, pe, dg.u8))


def test_per_tensor_weights_fuse(rng):
    wa = wq_attrs(rng, "OIX", 8, qtype="per_tensor")
    cp, W, B, wa, ca = pattern(rng, w_attrs=wa, requant=False)
    assert kinds(cp) == [K.QuantizedConvolution]
    x = x_of(rng, "NCX", 2, 6, 7, 7)
    np.testing.assert_array_equal(run(cp, x)[0], int8_conv(x, W, B, fused_attrs(wa, ca, False), [1, 1], [1, 1],
                                                             dg.f32))


def _reads_src_again(b, t):
    return [t["out"], b.op(K.ReLU, [t["xf"]], {})]


def _conv_output_too(b, t):
    return [t["out"], t["y"]]


UNFUSED = {
    "dequantized src read by another op": dict(extra=_reads_src_again),
    "src per channel": dict(src_attrs={"qtype": "per_channel", "axis": 1, "scales": [0.05] * 6, "zps": [110] * 6}),
    "weights per input channel": dict(w_attrs={"qtype": "per_channel", "axis": 1, "scales": [0.02] * 6,
                                               "zps": [0] * 6}),
}


@pytest.mark.parametrize("case", list(UNFUSED))
def test_other_graphs_stay_dequantize_and_f32_convolution(case, rng):
    cp, W, B, wa, ca = pattern(rng, requant=False, **UNFUSED[case])
    assert K.QuantizedConvolution not in kinds(cp) and K.Convolution in kinds(cp), kinds(cp)
    x = x_of(rng, "NCX", 2, 6, 6, 8)
    got = run(cp, x)[0]
    want = f32_graph(x, W, B, wa, ca)  # (src per channel: the same scale and zero point on every channel)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def test_a_convolution_read_beside_its_quantize_fuses_without_the_quantize(rng):
    cp, W, B, wa, ca = pattern(rng, requant=True, extra=_conv_output_too)
    assert kinds(cp) == [K.QuantizedConvolution, K.Quantize], kinds(cp)
    x = x_of(rng, "NCX", 1, 6, 6, 6)
    q, y = run(cp, x)
    np.testing.assert_array_equal(y, int8_conv(x, W, B, fused_attrs(wa, ca, False), [1, 1], [1, 1], dg.f32))


def test_weights_dequantized_for_two_convolutions_are_each_stored_oxi(rng):
    """One s8 constant, two Dequantize -> Convolution patterns of it (their sum the output): both fuse, the
    first into a copy of the weights, the second in place."""
    b = dg.GraphBuilder()
    n = dg.Dim("n", min=1, max=4)
    x = b.input("x", dg.u8, [n, 6, 8, 8])
    W = rng.integers(-128, 128, [6, 6, 3, 3]).astype(np.int8)
    w = b.constant("w", W, dtype=dg.s8)
    window = dict(strides=[1, 1], dilations=[1, 1], pads_begin=[1, 1], pads_end=[1, 1], groups=1,
                  data_format="NCX", weights_format="OIX")
    ys = []
    for scale in (0.01, 0.02):
        xf = b.op(K.Dequantize, [x], SRC, dtype=dg.f32)
        wf = b.op(K.Dequantize, [w], {"scales": [scale], "zps": [0]}, dtype=dg.f32)
        ys.append(b.op(K.Convolution, [xf, wf], window))
    b.output(b.op(K.Add, ys, {}))
    cp = b.compile(dg.Engine(dg.Engine.CPU, num_threads=1))
    assert kinds(cp) == [K.QuantizedConvolution, K.QuantizedConvolution, K.Add]
    xs = x_of(rng, "NCX", 2, 6, 8, 8)
    want = [int8_conv(xs, W, None, dict(window, src_scale=0.05, src_zp=110, wei_scales=[s], wei_zps=[0]), [1, 1],
                      [1, 1], dg.f32) for s in (0.01, 0.02)]
    np.testing.assert_array_equal(run(cp, xs)[0], want[0] + want[1])


def test_a_fused_partition_saves_and_loads(tmp_path, rng):
    cp, _, _, _, _ = pattern(rng, "NXC", "XIO", requant=True)
    cp.save(tmp_path / "qconv.dg")
    back = dg.load(tmp_path / "qconv.dg")
    assert [op.kind for op in back.program.ops] == [K.QuantizedConvolution]
    for n, h, w in [(1, 5, 5), (2, 9, 13)]:
        x = x_of(rng, "NXC", n, 6, h, w)
        np.testing.assert_array_equal(back(x)[0], run(cp, x)[0])
