"""Shape rules of Convolution and ConvTranspose (oneDNN Graph's attributes
and semantics), 1-D and 2-D; Convolution 3-D as well.

Convolution: src ``[N, C, X...]`` (NCX) or ``[N, X..., C]`` (NXC); weights
``[O, C/groups, K...]`` (OIX) or ``[K..., C/groups, O]`` (XIO); optional
bias ``[O]``. Each output size is ``(X + pads - dilation*(K-1) - 1) //
stride + 1``, an expression of the input's (possibly dynamic) size.

ConvTranspose (the gradient of a convolution with respect to its input):
weights ``[C, O/groups, K...]`` (IOX) or ``[K..., O/groups, C]`` (XOI);
``(X - 1)*stride + dilation*(K-1) + 1 + output_padding - pads`` outputs.

QuantizedConvolution: the int8 Convolution that a compile-time pass makes of
Dequantize -> Convolution <- Dequantize [-> Quantize] (int8_fusion.py), with
QuantizedMatMul's arithmetic (integer sums, then f32 scales).
"""

from __future__ import annotations

from ..dtypes import DataType
from ..op import OpKind as K
from ..symbolic import Expr, format_shape
from .quantize import INT8_ATTRS, int8_output
from .registry import ALL_INPUTS, AttrSpec, TensorType, register
from .spatial import (MAX_KERNEL_DEPTH, MAX_WINDOW, RESOLVED_PADS, WINDOW_ATTRS, channel_axis, check_channel_vector, check_spatial_rank,
                      per_axis, require_positive, spatial_axes, static_dim, window_out, with_spatial)

CONV_ATTRS = {
    **WINDOW_ATTRS,
    "dilations": AttrSpec("ints", min=1, max=MAX_WINDOW),
    "groups": AttrSpec("int", 1, min=1, max=MAX_WINDOW),
    "weights_format": AttrSpec("str", "XIO", ("XIO", "OIX")),
}

CONV_TRANSPOSE_ATTRS = {
    **WINDOW_ATTRS,
    "dilations": AttrSpec("ints", min=1, max=MAX_WINDOW),
    "groups": AttrSpec("int", 1, min=1, max=MAX_WINDOW),
    "output_padding": AttrSpec("ints", (), min=0, max=MAX_WINDOW),
    "weights_format": AttrSpec("str", "XOI", ("XOI", "IOX")),
}

# QuantizedConvolution: Convolution's attributes (and OXI weights), and the int8 scales and zero points
QCONV_ATTRS = {
    **CONV_ATTRS,
    "weights_format": AttrSpec("str", "XIO", ("XIO", "OIX", "OXI")),
    **INT8_ATTRS,
}


def _weights(w: TensorType, n_spatial: int, wfmt: str, ctx):
    """(first channel dim, second channel dim, kernel sizes) of weights in
    OIX/IOX (channels first), XIO/XOI (channels last) or OXI layout."""
    if w.rank != n_spatial + 2:
        raise ctx.error(f"weights must have rank {n_spatial + 2} for {n_spatial} spatial axes, "
                        f"got shape {format_shape(w.shape)}")
    if wfmt in ("OIX", "IOX"):
        a, b, ks = w.shape[0], w.shape[1], w.shape[2:]
    elif wfmt == "OXI":
        a, ks, b = w.shape[0], w.shape[1:-1], w.shape[-1]
    else:
        ks, b, a = w.shape[:-2], w.shape[-2], w.shape[-1]
    kernel = tuple(static_dim(k, ctx, f"kernel size {i}") for i, k in enumerate(ks))
    # the weights' sizes are bounded as the window attributes are (a kernel of 2^40 would make the
    # window arithmetic of the kernels overflow int64 with a dilation of 2^31)
    for i, k in enumerate(kernel):
        if k > MAX_WINDOW:
            raise ctx.error(f"kernel size {i} of weights {format_shape(w.shape)} is {k}, above {MAX_WINDOW}")
    if n_spatial == 3 and kernel[0] > MAX_KERNEL_DEPTH:
        raise ctx.error(f"kernel depth {kernel[0]} of weights {format_shape(w.shape)} is above the limit of "
                        f"{MAX_KERNEL_DEPTH} of a convolution over 3 spatial axes")
    return a, b, kernel


def _divisible(c: Expr, groups: int, ctx, what: str) -> None:
    if c.is_const and c.value % groups:
        raise ctx.error(f"{what} ({c.value}) is not divisible by groups ({groups})")


def _conv_shape(attrs, x: TensorType, w: TensorType, bias, ctx, max_spatial=3):
    """(dst shape, output channels) of a convolution; records the resolved pads."""
    n_sp = check_spatial_rank(x, ctx, "src", max_spatial)
    fmt = attrs["data_format"]
    groups = attrs["groups"]
    o, i_per_group, kernel = _weights(w, n_sp, attrs["weights_format"], ctx)
    c = x.shape[channel_axis(x.rank, fmt)]
    ctx.equal(c, i_per_group * groups, f"src channels vs weights' input channels ({i_per_group}) x groups ({groups})")
    _divisible(o, groups, ctx, "the output channel count")
    strides = per_axis(attrs, "strides", n_sp, ctx)
    dilations = per_axis(attrs, "dilations", n_sp, ctx)
    pb = per_axis(attrs, "pads_begin", n_sp, ctx, 0)
    pe = per_axis(attrs, "pads_end", n_sp, ctx, 0)
    out, rb, re = [], [], []
    for a, (ax, k) in enumerate(zip(spatial_axes(x.rank, fmt), kernel)):
        size, b, e = window_out(x.shape[ax], k, strides[a], dilations[a], attrs["auto_pad"], pb[a], pe[a])
        require_positive(size, ctx, f"output size of spatial axis {a}")
        out.append(size)
        rb.append(b)
        re.append(e)
    if bias is not None:
        check_channel_vector(bias, o, ctx, "bias")
    ctx.backend_attrs.update(resolved_pads_begin=tuple(rb), resolved_pads_end=tuple(re))
    return with_spatial(x, fmt, o, out), o


@register(K.Convolution, inputs=(2, 3), attrs=CONV_ATTRS, resolved=RESOLVED_PADS, dtypes=("float",),
          input_names=("src", "weights", "bias"), same_dtypes=ALL_INPUTS, out_dtype_of=0, high_rank="lowering")
def convolution(attrs, ins, ctx):
    """dst[n, g*OG + o, y] = bias[g*OG + o] + sum over i < C/groups and the
    kernel of src[n, g*C/groups + i, y*stride + k*dilation - pads_begin] *
    weights[g*OG + o, i, k] (zero outside the input)."""
    x = ins[0]
    shape, _ = _conv_shape(attrs, x, ins[1], ins[2] if len(ins) == 3 else None, ctx)
    return [TensorType(x.dtype, shape)]


@register(K.QuantizedConvolution, inputs=(2, 3), attrs=QCONV_ATTRS, resolved=RESOLVED_PADS,
          dtypes=("int8", "int8", "float"), out_dtypes=("float_or_int8",), input_names=("src", "weights", "bias"))
def quantized_convolution(attrs, ins, ctx):
    """The int8 convolution: src (u8 / s8) and weights (u8 / s8) as
    Convolution takes them (or weights OXI, ``[O, K..., C/groups]``, the
    layout the kernel reads: int8_fusion.py stores constant weights so),
    with integer dot products:

        acc[n, o, y] = sum over i and the kernel of
                       (src[n, i, y*stride + k*dilation - pads_begin] - src_zp) * (wei[o, i, k] - wei_zps[o])
                       where a position in the padding counts as src_zp (exact)
        dst[n, o, y] = f32(acc) * (f32(src_scale) * f32(wei_scales[o])) (+ bias[o])

    then, when the output is declared u8 / s8, quantized with dst_scale and
    dst_zp (Quantize's arithmetic); otherwise in the declared float dtype.
    wei_scales / wei_zps: one entry, or one per output channel o. It is what
    Convolution(Dequantize(src), Dequantize(weights)) [-> Quantize] computes
    (a dequantized padding is 0), with the products summed exactly instead of
    in f32 (QuantizedMatMul's arithmetic, ops/quantize.py)."""
    x, w = ins[0], ins[1]
    bias = ins[2] if len(ins) == 3 else None
    if bias is not None and bias.dtype is not DataType.f32:
        raise ctx.dtype_error(f"bias must be f32, got {bias.dtype}")
    shape, o = _conv_shape(attrs, x, w, bias, ctx, max_spatial=2)
    return [TensorType(int8_output(attrs, x, w, o, ctx, "output channels"), shape)]


@register(K.ConvTranspose, inputs=(2, 3), attrs=CONV_TRANSPOSE_ATTRS, resolved=RESOLVED_PADS, dtypes=("float",),
          input_names=("src", "weights", "bias"), same_dtypes=ALL_INPUTS, out_dtype_of=0)
def conv_transpose(attrs, ins, ctx):
    """The transpose of Convolution: each src element adds its weights,
    scaled, to a window of dst (src position times stride, minus pads_begin)."""
    x, w = ins[0], ins[1]
    n_sp = check_spatial_rank(x, ctx, "src", max_spatial=2)
    fmt = attrs["data_format"]
    groups = attrs["groups"]
    c, o_per_group, kernel = _weights(w, n_sp, attrs["weights_format"], ctx)
    ctx.equal(x.shape[channel_axis(x.rank, fmt)], c, "src channels vs weights' input channels")
    _divisible(c, groups, ctx, "the input channel count")
    strides = per_axis(attrs, "strides", n_sp, ctx)
    dilations = per_axis(attrs, "dilations", n_sp, ctx)
    pb = per_axis(attrs, "pads_begin", n_sp, ctx, 0)
    pe = per_axis(attrs, "pads_end", n_sp, ctx, 0)
    op = per_axis(attrs, "output_padding", n_sp, ctx, 0)
    if min(pe, default=0) < 0:
        raise ctx.error(f"pads_end {list(pe)} must not be negative for a transposed convolution")
    out, rb, re = [], [], []
    for a, (ax, k) in enumerate(zip(spatial_axes(x.rank, fmt), kernel)):
        s, d = strides[a], dilations[a]
        if op[a] >= max(s, d):
            raise ctx.error(f"output_padding {op[a]} of spatial axis {a} must be below the stride or the dilation")
        dk = d * (k - 1) + 1
        if attrs["auto_pad"] == "valid":
            b = e = 0
        elif attrs["auto_pad"] in ("same_upper", "same_lower"):  # dst size = src size * stride
            total = max(dk - s, 0)
            b = total // 2 if attrs["auto_pad"] == "same_upper" else (total + 1) // 2
            e = total - b
        else:
            b, e = pb[a], pe[a]
        size = (x.shape[ax] - 1) * s + (dk + op[a] - b - e)
        require_positive(size, ctx, f"output size of spatial axis {a}")
        out.append(size)
        rb.append(Expr.const(b))
        re.append(Expr.const(e))
    o = o_per_group * groups
    if len(ins) == 3:
        check_channel_vector(ins[2], o, ctx, "bias")
    ctx.backend_attrs.update(resolved_pads_begin=tuple(rb), resolved_pads_end=tuple(re))
    return [TensorType(x.dtype, with_spatial(x, fmt, o, out))]
