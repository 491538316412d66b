"""Convolution (and the int8 QuantizedConvolution), transposed convolution,
pooling, batch / group normalization and interpolation: the op kinds'
normalized attributes handed to the float64 definitions in
:mod:`.spatial_numpy`."""

from __future__ import annotations

import numpy as np

from ..op import OpKind as K
from ..ops.spatial import window_out
from . import spatial_numpy as sp
from .quantize import int8_epilogue
from .registry import NoReferenceError, implements


def _sizes(x, fmt):
    return list(x.shape[2:] if fmt == "NCX" else x.shape[1:-1])


def _pads(attrs, x, kernel, ctx, ceil=False):
    """The padding auto_pad resolves to at these input sizes (ops/spatial.py's window_out)."""
    n = len(kernel)
    strides = list(attrs["strides"])
    dil = list(attrs.get("dilations") or [1] * n)
    pb = list(attrs.get("pads_begin") or [0] * n)
    pe = list(attrs.get("pads_end") or [0] * n)
    got = [window_out(L, k, s, d, attrs["auto_pad"], b, e, ceil)
           for L, k, s, d, b, e in zip(_sizes(x, attrs["data_format"]), kernel, strides, dil, pb, pe)]
    return [ctx.value(b) for _, b, _ in got], [ctx.value(e) for _, _, e in got]


def _kernel(w, wfmt):
    return list(w.shape[2:] if wfmt in ("OIX", "IOX") else w.shape[:-2])


def _spatial_out(ctx, fmt):
    declared = ctx.out_shapes[0]
    if declared is None:
        raise NoReferenceError(f"{ctx.op.label}: the output shape is not known")
    shape = [ctx.value(e) for e in declared]
    return shape[2:] if fmt == "NCX" else shape[1:-1]


@implements(K.Convolution)
def convolution(attrs, ins, ctx):
    pb, pe = _pads(attrs, ins[0], _kernel(ins[1], attrs["weights_format"]), ctx)
    b = ins[2] if len(ins) > 2 else None
    return [sp.conv(ins[0], ins[1], b, strides=list(attrs["strides"]), dilations=list(attrs["dilations"]),
                    pads_begin=pb, pads_end=pe, groups=attrs["groups"], fmt=attrs["data_format"],
                    wfmt=attrs["weights_format"])]


def int8_conv(x, w, bias, attrs, pads_begin, pads_end, out_dtype):
    """QuantizedConvolution of integer arrays x and w (its attributes:
    window, formats, scales and zero points; the padding resolved): the
    integer sums exactly (float64 holds them: every product is below 2^16, a
    sum below 2^53 for any kernel dyngraph takes), a padded position counting
    as src_zp, then QuantizedMatMul's epilogue per output channel."""
    wfmt = attrs["weights_format"]
    w = np.asarray(w)
    if wfmt == "OXI":  # [O, K..., I] -> [O, I, K...]
        w, wfmt = np.moveaxis(w, -1, 1), "OIX"
    o_axis = 0 if wfmt == "OIX" else w.ndim - 1
    zw = np.array(attrs.get("wei_zps") or [0], np.float64)
    shape = [1] * w.ndim
    shape[o_axis] = zw.size
    wz = w.astype(np.float64) - zw.reshape(shape)
    xz = np.asarray(x, np.float64) - attrs.get("src_zp", 0)
    ns = x.ndim - 2
    acc = sp.conv(xz, wz, None, strides=list(attrs["strides"]), dilations=list(attrs.get("dilations") or [1] * ns),
                  pads_begin=list(pads_begin), pads_end=list(pads_end), groups=attrs.get("groups", 1),
                  fmt=attrs["data_format"], wfmt=wfmt)
    acc = np.rint(acc).astype(np.int64)
    axis = 1 if attrs["data_format"] == "NCX" else acc.ndim - 1
    full = {"dst_scale": 1.0, "dst_zp": 0, **attrs}
    return int8_epilogue(acc, full, bias, out_dtype, axis)


@implements(K.QuantizedConvolution)
def quantized_convolution(attrs, ins, ctx):
    wfmt = attrs["weights_format"]
    kernel = list(ins[1].shape[1:-1]) if wfmt == "OXI" else _kernel(ins[1], wfmt)
    pb, pe = _pads(attrs, ins[0], kernel, ctx)
    return [int8_conv(ins[0], ins[1], ins[2] if len(ins) == 3 else None, attrs, pb, pe, ctx.out_dtypes[0])]


@implements(K.ConvTranspose)
def conv_transpose(attrs, ins, ctx):
    kernel = _kernel(ins[1], attrs["weights_format"])
    n = len(kernel)
    dil = list(attrs.get("dilations") or [1] * n)
    if attrs["auto_pad"] == "valid":
        pb = pe = [0] * n
    elif attrs["auto_pad"] in ("same_upper", "same_lower"):  # dst size = src size * stride
        total = [max(d * (k - 1) + 1 - s, 0) for k, s, d in zip(kernel, attrs["strides"], dil)]
        pb = [t // 2 if attrs["auto_pad"] == "same_upper" else (t + 1) // 2 for t in total]
        pe = [t - b for t, b in zip(total, pb)]
    else:
        pb, pe = list(attrs.get("pads_begin") or [0] * n), list(attrs.get("pads_end") or [0] * n)
    b = ins[2] if len(ins) > 2 else None
    return [sp.conv_transpose(ins[0], ins[1], b, strides=list(attrs["strides"]), dilations=list(attrs["dilations"]),
                              pads_begin=pb, pads_end=pe, output_padding=list(attrs["output_padding"]),
                              groups=attrs["groups"], fmt=attrs["data_format"], wfmt=attrs["weights_format"])]


def _pool(kind, attrs, ins, ctx, **extra):
    pb, pe = _pads(attrs, ins[0], list(attrs["kernel"]), ctx, ceil=attrs["rounding_type"] == "ceil")
    return [sp.pool(ins[0], kind, list(attrs["kernel"]), list(attrs["strides"]), pads_begin=pb, pads_end=pe,
                    ceil=attrs["rounding_type"] == "ceil", fmt=attrs["data_format"], **extra)]


@implements(K.MaxPool)
def max_pool(attrs, ins, ctx):
    return _pool("max", attrs, ins, ctx, dilations=list(attrs["dilations"]) or None)


@implements(K.AvgPool)
def avg_pool(attrs, ins, ctx):
    return _pool("avg", attrs, ins, ctx, exclude_pad=attrs["exclude_pad"])


@implements(K.AdaptiveAvgPool)
def adaptive_avg_pool(attrs, ins, ctx):
    return [sp.adaptive_avg_pool(ins[0], list(attrs["sizes"]), fmt=attrs["data_format"])]


@implements(K.BatchNormInference)
def batch_norm_inference(attrs, ins, ctx):
    return [sp.batch_norm(*ins[:5], attrs["epsilon"], fmt=attrs["data_format"])]


@implements(K.GroupNorm)
def group_norm(attrs, ins, ctx):
    gamma, beta = (ins[1], ins[2]) if len(ins) == 3 else (None, None)
    return [sp.group_norm(ins[0], attrs["groups"], attrs["epsilon"], gamma, beta, fmt=attrs["data_format"])]


@implements(K.Interpolate)
def interpolate(attrs, ins, ctx):
    mode = {"nearest": "nearest", "bicubic": "bicubic"}.get(attrs["mode"], "linear")
    coord = attrs["coordinate_transformation_mode"]
    if mode == "linear" and coord == "asymmetric":
        raise NoReferenceError(f"{ctx.op.label}: linear interpolation with asymmetric coordinates")
    fmt = attrs["data_format"]
    return [sp.interpolate(ins[0], _spatial_out(ctx, fmt), mode, coord, fmt=fmt)]
