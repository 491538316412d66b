"""Shape rules of quantization, with oneDNN Graph's attributes and semantics:
Quantize, Dequantize (scales and zero points as attributes), DynamicQuantize,
DynamicDequantize (as input tensors), and QuantizedMatMul, the int8 matrix
product that a compile-time pass makes of Dequantize -> MatMul [-> Quantize]
(int8_fusion.py). QuantizedConvolution, its convolution counterpart, has its
rule beside Convolution's (ops/conv.py) and the same arithmetic.

The quantized types are u8, s8, s4, u4 (integers) and f8_e4m3, f8_e5m2
(8-bit floats); s4 and u4 are held one to a byte (``dyngraph.dtypes``).
The arithmetic, exactly (every implementation of dyngraph computes this, in f32):

- Quantize to an integer type: q = clamp(round(x * (1 / scale)) + zp, lo, hi),
  where ``1 / scale`` is computed in double and rounded to f32,
  ``x * (1 / scale)`` is an f32 product, ``round`` rounds half to even, and
  [lo, hi] is the output type's range (u8: [0, 255], s8: [-128, 127],
  u4: [0, 15], s4: [-8, 7]): values beyond it saturate. oneDNN leaves the
  rounding to the implementation; this is PyTorch's (``quantize_per_tensor``),
  so torch's quantized programs convert exactly. NaN becomes zp.
- Quantize to an 8-bit float: q = f8(x * (1 / scale)), the f32 product
  rounded to the nearest f8 value, ties to even, as oneDNN converts f32 to
  f8: no saturation. f8_e4m3 (OCP E4M3, no infinities, largest 448) turns a
  value that rounds beyond 448, an infinity and NaN into NaN; f8_e5m2 (OCP
  E5M2, largest 57344) turns one beyond 57344 into an infinity. f8 types
  take no zero points (oneDNN does not support them): zps must be absent
  (or zero, in the attribute forms).
- Dequantize: x = (q - zp) * scale, an f32 product (``scale`` rounded to f32;
  q an f8 value read exactly).
- Per tensor, one scale and zero point; per channel (``qtype="per_channel"``),
  one per index of axis ``axis``; per group (DynamicDequantize), one per block
  of ``group_shape`` elements.
"""

from __future__ import annotations

from ..dtypes import DataType
from ..op import OpKind as K
from ..symbolic import as_expr, format_shape
from .common import normalize_axis
from .registry import AttrSpec, TensorType, register

QRANGE = {DataType.u8: (0, 255), DataType.s8: (-128, 127), DataType.u4: (0, 15), DataType.s4: (-8, 7)}
QUANT = (DataType.u8, DataType.s8, DataType.s4, DataType.u4, DataType.f8_e4m3, DataType.f8_e5m2)
_QUANT_WORDS = "u8, s8, s4, u4, f8_e4m3 or f8_e5m2"
INT8 = (DataType.u8, DataType.s8)

_QTYPE = AttrSpec("str", "per_tensor", ("per_tensor", "per_channel"))
_STATIC = {
    "qtype": _QTYPE,
    # (checked against the input's rank only per channel: oneDNN's files carry axis=1 on 1-D per-tensor ops)
    "axis": AttrSpec("int", 1),
    "scales": AttrSpec("floats", finite=True),
    "zps": AttrSpec("ints", ()),
}


def _declared_dtype(ctx, classes, what):
    d = ctx.declared_outputs[0] if ctx.declared_outputs else None
    if d is None:
        raise ctx.error(f"takes its output dtype ({what}) from its output logical tensor")
    if d.dtype not in classes:
        raise ctx.dtype_error(f"the output must be {what}, it is declared {d.dtype}")
    return d.dtype


def _channel_axis(attrs, src, ctx):
    if attrs["qtype"] == "per_tensor":
        return None
    return normalize_axis(attrs["axis"], src.rank, ctx, "per-channel axis")


def _check_lists(attrs, src, qdt, ctx):
    """scales and zps of the attribute forms: their lengths, signs and ranges."""
    scales, zps = attrs["scales"], attrs["zps"]
    axis = _channel_axis(attrs, src, ctx)
    if any(not s > 0 for s in scales):
        raise ctx.error(f"scales must be positive, got {list(scales)}")
    lo, hi = QRANGE.get(qdt, (0, 0))  # f8: zero points must be zero
    if qdt.is_f8 and any(z != 0 for z in zps):
        raise ctx.dtype_error(f"zero points are not supported for {qdt} (oneDNN's rule), got {list(zps)}")
    if any(not lo <= z <= hi for z in zps):
        raise ctx.error(f"zero points must lie in the range of {qdt} [{lo}, {hi}], got {list(zps)}")
    if axis is None:
        if len(scales) != 1 or len(zps) > 1:
            raise ctx.error(f"per_tensor takes one scale and at most one zero point, got {len(scales)} and {len(zps)}")
        return
    n = len(scales)
    if n < 1 or len(zps) not in (0, n):
        raise ctx.error(f"per_channel takes one scale per channel and as many zero points (or none), "
                        f"got {n} and {len(zps)}")
    ctx.equal(src.shape[axis], as_expr(n), f"per-channel axis {axis} of {format_shape(src.shape)} vs {n} scales")


@register(K.Quantize, attrs=_STATIC, dtypes=("float",), out_dtypes=("quant",), input_names=("src",))
def quantize(attrs, ins, ctx):
    """f32 -> a quantized type (the output logical tensor's dtype): clamp(round(src / scale) + zp),
    or for f8, src / scale rounded to f8."""
    (src,) = ins
    qdt = _declared_dtype(ctx, QUANT, _QUANT_WORDS)
    _check_lists(attrs, src, qdt, ctx)
    return [TensorType(qdt, src.shape)]


def _float_out(ctx):
    d = ctx.declared_outputs[0] if ctx.declared_outputs else None
    return d.dtype if d is not None and d.dtype.is_float else DataType.f32


@register(K.Dequantize, attrs=_STATIC, dtypes=("quant",), out_dtypes=("float",), input_names=("src",))
def dequantize(attrs, ins, ctx):
    """a quantized type -> f32 (or the f16 / bf16 the output is declared): (src - zp) * scale."""
    (src,) = ins
    _check_lists(attrs, src, src.dtype, ctx)
    return [TensorType(_float_out(ctx), src.shape)]


def _check_tensors(attrs, src, scales, zps, qdt, ctx):
    """scales and zps of the tensor forms: their shapes."""
    qtype = attrs["qtype"]
    if zps is not None and qdt.is_f8:
        raise ctx.dtype_error(f"zero points are not supported for {qdt} (oneDNN's rule): give no zps input")
    if qtype == "per_tensor":
        if any(not (as_expr(d).is_const and as_expr(d).value == 1) for d in scales.shape):
            raise ctx.error(f"per_tensor takes one scale, got scales of shape {format_shape(scales.shape)}")
    elif qtype == "per_channel":
        axis = normalize_axis(attrs["axis"], src.rank, ctx, "per-channel axis")
        if scales.rank != 1:
            raise ctx.error(f"per_channel scales must be 1-D, got {format_shape(scales.shape)}")
        ctx.equal(src.shape[axis], scales.shape[0], f"per-channel axis {axis} of {format_shape(src.shape)} vs the scales")
    else:  # per_group
        groups = attrs["group_shape"]
        if scales.rank != src.rank or len(groups) != src.rank:
            raise ctx.error(f"per_group scales {format_shape(scales.shape)} and group_shape {list(groups)} must "
                            f"have src's rank {src.rank}")
        for d, g in enumerate(groups):
            if g < 1:
                raise ctx.error(f"group_shape {list(groups)} has an entry below 1")
            ctx.equal(src.shape[d], scales.shape[d] * g,
                      f"dimension {d}: src {format_shape(src.shape)} vs scales {format_shape(scales.shape)} "
                      f"in groups of {g}")
    if zps is not None and tuple(as_expr(d) for d in zps.shape) != tuple(as_expr(d) for d in scales.shape):
        if not (qtype == "per_tensor" and all(as_expr(d).is_const and as_expr(d).value == 1 for d in zps.shape)):
            raise ctx.error(f"zps {format_shape(zps.shape)} must have the scales' shape {format_shape(scales.shape)}")


@register(K.DynamicQuantize, inputs=(2, 3), attrs={"qtype": _QTYPE, "axis": AttrSpec("int", 1)},
          dtypes=("float", "float", "quant_zp"), out_dtypes=("quant",), input_names=("src", "scales", "zps"))
def dynamic_quantize(attrs, ins, ctx):
    """Quantize with scales (and zero points) given as tensors: per tensor (one
    element) or per channel (1-D, one per index of ``axis``)."""
    src, scales = ins[0], ins[1]
    qdt = _declared_dtype(ctx, QUANT, _QUANT_WORDS)
    _check_tensors(attrs, src, scales, ins[2] if len(ins) > 2 else None, qdt, ctx)
    return [TensorType(qdt, src.shape)]


@register(K.DynamicDequantize, inputs=(2, 3),
          attrs={"qtype": AttrSpec("str", "per_tensor", ("per_tensor", "per_channel", "per_group")),
                 "axis": AttrSpec("int", 1), "group_shape": AttrSpec("ints", ())},
          dtypes=("quant", "float", "quant_zp"), out_dtypes=("float",), input_names=("src", "scales", "zps"))
def dynamic_dequantize(attrs, ins, ctx):
    """Dequantize with scales (and zero points) given as tensors: per tensor,
    per channel, or per group (scales of src's rank, each dimension src's
    divided by its ``group_shape`` entry). The output has the declared float
    dtype (oneDNN: the scales')."""
    src, scales = ins[0], ins[1]
    _check_tensors(attrs, src, scales, ins[2] if len(ins) > 2 else None, src.dtype, ctx)
    return [TensorType(_float_out(ctx), src.shape)]


# The attributes of the fused int8 ops (QuantizedMatMul, QuantizedConvolution): the scales and zero points
# of the Dequantize ops they replace, and of the Quantize that may follow.
INT8_ATTRS = {
    "src_scale": AttrSpec("float", finite=True),
    "src_zp": AttrSpec("int", 0, min=-128, max=255),
    "wei_scales": AttrSpec("floats", finite=True),
    "wei_zps": AttrSpec("ints", (), min=-128, max=255),
    "dst_scale": AttrSpec("float", 1.0, finite=True),
    "dst_zp": AttrSpec("int", 0, min=-128, max=255),
}


def int8_output(attrs, src, wei, n, ctx, columns="output columns"):
    """The output dtype of a fused int8 op (its declared float dtype, u8 / s8,
    else f32) after checking INT8_ATTRS against the input dtypes and the
    ``n`` output channels (``columns`` names them in messages)."""
    d = ctx.declared_outputs[0] if ctx.declared_outputs else None
    out_dt = d.dtype if d is not None and (d.dtype.is_float or d.dtype in INT8) else DataType.f32
    if not attrs["src_scale"] > 0 or any(not s > 0 for s in attrs["wei_scales"]) or not attrs["dst_scale"] > 0:
        raise ctx.error("scales must be positive")
    lo, hi = QRANGE[src.dtype]
    if not lo <= attrs["src_zp"] <= hi:
        raise ctx.error(f"src_zp {attrs['src_zp']} is outside the range of {src.dtype}")
    lo, hi = QRANGE[wei.dtype]
    if any(not lo <= z <= hi for z in attrs["wei_zps"]):
        raise ctx.error(f"wei_zps must lie in the range of {wei.dtype}")
    if out_dt in INT8:
        lo, hi = QRANGE[out_dt]
        if not lo <= attrs["dst_zp"] <= hi:
            raise ctx.error(f"dst_zp {attrs['dst_zp']} is outside the range of {out_dt}")
    for name in ("wei_scales", "wei_zps"):
        m = len(attrs[name])
        if m > 1 or (name == "wei_scales" and m == 0):
            if m < 1:
                raise ctx.error(f"wei_scales must have one entry or one per {columns[:-1]}")
            ctx.equal(n, as_expr(m), f"{name}: {m} entries for {n} {columns}")
    return out_dt


@register(
    K.QuantizedMatMul,
    inputs=(2, 3),
    attrs={"transpose_b": AttrSpec("bool", False), **INT8_ATTRS},
    dtypes=("int8", "int8", "float"),
    out_dtypes=("float_or_int8",),
    weight_inputs=(1,),
    input_names=("src", "weights", "bias"),
)
def quantized_matmul(attrs, ins, ctx):
    """The int8 matrix product: src [..., M, K] (u8 / s8) times weights [K, N]
    (or [N, K] with transpose_b; u8 / s8), with integer dot products:

        acc[m, n] = sum_k (src[m, k] - src_zp) * (wei[k, n] - wei_zps[n])   (exact)
        y[m, n]   = f32(acc) * (f32(src_scale) * f32(wei_scales[n])) (+ bias[n])

    then, when the output is declared u8 / s8, quantized with dst_scale and
    dst_zp (Quantize's arithmetic); otherwise y in the declared float dtype.
    wei_scales / wei_zps: one entry, or one per output column n.
    It is what Dequantize(src) @ Dequantize(weights) [-> Quantize] computes,
    with the products summed exactly instead of in f32."""
    src, wei = ins[0], ins[1]
    if src.rank < 2 or wei.rank != 2:
        raise ctx.error(f"src must have rank >= 2 and weights rank 2, got {format_shape(src.shape)} and "
                        f"{format_shape(wei.shape)}")
    k_w, n = (wei.shape[1], wei.shape[0]) if attrs["transpose_b"] else (wei.shape[0], wei.shape[1])
    ctx.equal(src.shape[-1], k_w, f"contraction dimension: {format_shape(src.shape)} @ {format_shape(wei.shape)}")
    out_dt = int8_output(attrs, src, wei, n, ctx)
    if len(ins) == 3:
        bias = ins[2]
        if bias.dtype is not DataType.f32 or bias.rank != 1 and not (bias.rank == 2 and as_expr(bias.shape[0]) == 1):
            raise ctx.error(f"bias must be f32 of shape [N] or [1, N], got {bias.dtype} {format_shape(bias.shape)}")
        ctx.equal(bias.shape[-1], n, "bias length vs output columns")
    return [TensorType(out_dt, src.shape[:-1] + (n,))]
