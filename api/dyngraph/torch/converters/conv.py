"""Convolutions: conv1d / conv2d (as exported), convolution (decomposed),
conv_transpose1d / conv_transpose2d. Torch's layouts are NCX with OIX
weights (IOX for transposed convolutions)."""

from __future__ import annotations

from ...op import OpKind as K
from .common import aten, is_call, number
from .registry import Unsupported, converter
from .spatial import batched, per_axis, unbatch


def _zero_padding(x, ns: int):
    """(input, extra begin pads, extra end pads): a constant_pad_nd of zeros on
    the spatial axes only (torch's decomposition of padding="same" with an even
    kernel) is the convolution's own padding, as oneDNN's pads_begin/pads_end."""
    none = (x, [0] * ns, [0] * ns)
    if not is_call(x, aten.constant_pad_nd.default):
        return none
    pad = list(x.args[1])
    value = x.args[2] if len(x.args) > 2 else x.kwargs.get("value", 0)
    if number(value) != 0 or len(pad) > 2 * ns or not all(isinstance(p, int) and p >= 0 for p in pad):
        return none
    pad += [0] * (2 * ns - len(pad))
    begin = [pad[2 * (ns - 1 - a)] for a in range(ns)]  # pad lists the last axis first
    end = [pad[2 * (ns - 1 - a) + 1] for a in range(ns)]
    return x.args[0], begin, end


def _conv(cx, x, weight, bias, stride, padding, dilation, groups, transposed=False, output_padding=0):
    ns = cx.rank_of(weight) - 2
    if ns not in (1, 2):
        raise Unsupported(f"{ns}-D convolution")
    dt = cx.out_dtype()
    extra_begin, extra_end = [0] * ns, [0] * ns
    if not transposed and not isinstance(padding, str) and cx.rank_of(x) == ns + 2:
        x, extra_begin, extra_end = _zero_padding(x, ns)
    xt, unbatched = batched(cx, x, ns)
    ins = [cx.cast(xt, dt), cx.cast(cx.tensor(weight), dt)]
    if bias is not None:
        ins.append(cx.cast(cx.tensor(bias), dt))
    attrs = {"strides": per_axis(stride, ns, "stride"), "dilations": per_axis(dilation, ns, "dilation"),
             "groups": int(groups), "data_format": "NCX"}
    if isinstance(padding, str):  # conv*d.padding: 'same' (stride 1) or 'valid'
        if padding not in ("same", "valid"):
            raise Unsupported(f"padding {padding!r}")
        attrs.update(pads_begin=[0] * ns, pads_end=[0] * ns, auto_pad="same_upper" if padding == "same" else "valid")
    else:
        pads = per_axis(padding, ns, "padding")
        attrs.update(pads_begin=[p + e for p, e in zip(pads, extra_begin)],
                     pads_end=[p + e for p, e in zip(pads, extra_end)])
    if transposed:
        attrs.update(weights_format="IOX", output_padding=per_axis(output_padding, ns, "output_padding"))
        y = cx.emit(K.ConvTranspose, ins, attrs)
    else:
        attrs["weights_format"] = "OIX"
        y = cx.emit(K.Convolution, ins, attrs)
    return unbatch(cx, y, unbatched)


@converter(aten.conv1d.default, aten.conv2d.default, aten.conv1d.padding, aten.conv2d.padding)
def conv(cx, node, a):
    return _conv(cx, a.input, a.weight, a.bias, a.stride, a.padding, a.dilation, a.groups)


@converter(aten.convolution.default)
def convolution(cx, node, a):
    return _conv(cx, a.input, a.weight, a.bias, a.stride, a.padding, a.dilation, a.groups, bool(a.transposed),
                 a.output_padding)


@converter(aten.conv_transpose1d.default, aten.conv_transpose2d.input)
def conv_transpose(cx, node, a):
    return _conv(cx, a.input, a.weight, a.bias, a.stride, a.padding, a.dilation, a.groups, True, a.output_padding)
