"""The fused int8 convolution at .5 ties: with power-of-two scales and a bias
in eighths, many outputs land exactly on x.5 before rounding, and oneDNN
rounds those to the nearest even integer. Compared with an integer reference
(the sums in int64, the scaling exact in float64, numpy's rint: half to
even) at every tie, in each of the kernel's paths (general, 1x1, depthwise
in both layouts, a wide depthwise window), per channel and per tensor,
with one and with several threads."""

import numpy as np
import pytest

import dyngraph as dg

K = dg.OpKind
# the per-channel scales of oneDNN's int8_conv_2d_fusion_2 case
POW2 = [2, 1, 1, 2, 0.5, 4, 0.25, 8, 0.125, 16, 0.0625, 32, 0.03125, 0.0625, 16, 0.125]


def exact_conv(x, w, b, scales, zp_in, zp_out, window, groups, fmt):
    """u8 output of Quantize(scale 1) after Convolution(+bias) of dequantized int8 data, exactly."""
    if fmt == "NXC":
        x = x.transpose(0, 3, 1, 2)
    xi = x.astype(np.int64) - zp_in
    N, C, H, W = xi.shape
    O, Cg, KH, KW = w.shape
    (ph, pw), (eh, ew), (sh, sw), (dh, dw) = (window["pads_begin"], window["pads_end"], window["strides"],
                                              window["dilations"])
    xp = np.pad(xi, ((0, 0), (0, 0), (ph, eh), (pw, ew)))
    OH, OW = (H + ph + eh - dh * (KH - 1) - 1) // sh + 1, (W + pw + ew - dw * (KW - 1) - 1) // sw + 1
    acc = np.zeros((N, O, OH, OW), np.int64)
    og = O // groups
    for g in range(groups):
        for i in range(KH):
            for j in range(KW):
                patch = xp[:, g * Cg:(g + 1) * Cg, i * dh:i * dh + sh * OH:sh, j * dw:j * dw + sw * OW:sw]
                acc[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch,
                                                         w[g * og:(g + 1) * og, :, i, j].astype(np.int64))
    y = acc * np.asarray(scales, np.float64)[None, :, None, None] + b.astype(np.float64)[None, :, None, None]
    q = np.clip(np.rint(y) + zp_out, 0, 255).astype(np.uint8)
    if fmt == "NXC":
        q, y = q.transpose(0, 2, 3, 1), y.transpose(0, 2, 3, 1)
    return q, y


CASES = {
    "general 7x7 stride 2": dict(C=3, O=16, ks=(7, 7), groups=1, strides=[2, 2], pb=[3, 3], pe=[2, 2]),
    "general 3x3 NXC": dict(C=8, O=16, ks=(3, 3), groups=1, strides=[1, 1], pb=[1, 1], pe=[1, 1], fmt="NXC"),
    "1x1": dict(C=16, O=16, ks=(1, 1), groups=1, strides=[1, 1], pb=[0, 0], pe=[0, 0]),
    "grouped": dict(C=8, O=16, ks=(3, 3), groups=4, strides=[1, 1], pb=[1, 1], pe=[1, 1]),
    "depthwise NCX": dict(C=16, O=16, ks=(3, 3), groups=16, strides=[1, 1], pb=[1, 1], pe=[1, 1]),
    "depthwise NXC": dict(C=16, O=16, ks=(3, 3), groups=16, strides=[2, 2], pb=[1, 1], pe=[1, 1], fmt="NXC"),
    "depthwise wide": dict(C=16, O=16, ks=(17, 17), groups=16, strides=[1, 1], pb=[8, 8], pe=[8, 8]),
}


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("per_channel", [True, False], ids=["per-channel", "per-tensor"])
@pytest.mark.parametrize("name", list(CASES))
def test_ties_round_to_even_as_onednn(name, per_channel, threads):
    c = CASES[name]
    fmt = c.get("fmt", "NCX")
    rng = np.random.default_rng(list(CASES).index(name))
    C, O, groups = c["C"], c["O"], c["groups"]
    scales = POW2[:O] if per_channel else [0.5] * O
    window = dict(strides=c["strides"], dilations=[1, 1], pads_begin=c["pb"], pads_end=c["pe"])
    w = rng.integers(-8, 9, (O, C // groups, *c["ks"])).astype(np.int8)
    bias = (rng.integers(-16, 17, O) / 8).astype(np.float32)
    b = dg.GraphBuilder()
    n, h, wd = dg.Dim("n", max=4), dg.Dim("h", max=64), dg.Dim("w", max=64)
    x = b.input("x", dg.u8, [n, C, h, wd] if fmt == "NCX" else [n, h, wd, C])
    xf = b.op(K.Dequantize, [x], {"scales": [1.0], "zps": [2]}, dtype=dg.f32)
    wq = ({"qtype": "per_channel", "axis": 0, "scales": scales, "zps": [0] * O} if per_channel
          else {"qtype": "per_tensor", "scales": [0.5], "zps": [0]})
    wf = b.op(K.Dequantize, [b.constant("w", w, dtype=dg.s8)], wq, dtype=dg.f32)
    conv = dict(window, groups=groups, data_format=fmt, weights_format="OIX")
    y = b.op(K.Convolution, [xf, wf, b.constant("b", bias)], conv)
    b.output(b.op(K.Quantize, [y], {"scales": [1.0], "zps": [3]}, dtype=dg.u8))
    cp = b.compile(dg.Engine(dg.Engine.CPU, num_threads=threads))
    assert [op.kind for op in cp._program.ops] == [K.QuantizedConvolution]
    ties = odd = 0  # odd: ties where the other roundings would differ
    for shape in ((1, 20, 20), (2, 33, 17)):
        nn, hh, ww = shape
        xv = rng.integers(0, 12, (nn, C, hh, ww) if fmt == "NCX" else (nn, hh, ww, C)).astype(np.uint8)
        (got,) = cp(xv)
        want, yv = exact_conv(xv, w, bias, scales, 2, 3, window, groups, fmt)
        at_tie = (yv - np.floor(yv) == 0.5) & (want > 0) & (want < 255)
        ties += int(at_tie.sum())
        away = np.sign(yv) * np.floor(np.abs(yv) + 0.5)  # half away from zero, and half up, differ from
        up = np.floor(yv + 0.5)                          # half to even at some ties: count those met
        odd += min(int((at_tie & (np.rint(yv) != away)).sum()), int((at_tie & (np.rint(yv) != up)).sum()))
        bad = got != want
        assert not bad.any(), (f"{int(bad.sum())} of {bad.size} differ, {int(bad[at_tie].sum())} of "
                               f"{int(at_tie.sum())} ties")
    assert ties >= 100 and odd >= 20, (ties, odd)  # the test meets ties that tell the roundings apart
