"""torch.ao's quantized_decomposed ops (what a PT2E-quantized program holds:
``quantize_per_tensor``, ``dequantize_per_tensor``, ``quantize_per_channel``,
``dequantize_per_channel``, and the ``.tensor`` forms with scale and zero
point as tensors) as Quantize / Dequantize.

Their arithmetic is dyngraph's (ops/quantize.py was defined as torch's):
``clamp(round(x * (1 / scale)) + zp, qmin, qmax)`` and ``(q - zp) * scale`` in
f32. Scales and zero points that are numbers, or constants of the program,
become attributes (so the int8 MatMul pass can fuse them); tensors computed
at run time become the Dynamic forms' inputs. Only u8 and s8 with f32 values
convert, and a quantize only over its type's whole range (a narrower
quant_min / quant_max clamps more than Quantize does).
"""

from __future__ import annotations

import numpy as np
import torch

from ...dtypes import DataType
from ...logical_tensor import CONSTANT
from ...op import OpKind as K
from .common import norm_dim, number
from .registry import Unsupported, converter

try:  # registers torch.ops.quantized_decomposed
    import torch.ao.quantization.fx._decomposed  # noqa: F401

    qd = torch.ops.quantized_decomposed
except (ImportError, AttributeError, RuntimeError):  # pragma: no cover - a torch without torch.ao
    qd = None

_QTYPES = {torch.uint8: (DataType.u8, 0, 255), torch.int8: (DataType.s8, -128, 127)}


def _qtype(dtype, qmin=None, qmax=None, whole_range=False):
    if dtype not in _QTYPES:
        raise Unsupported(f"quantized dtype {dtype} (u8 and s8 convert)")
    dt, lo, hi = _QTYPES[dtype]
    if whole_range and (number(qmin), number(qmax)) != (lo, hi):
        raise Unsupported(f"quant_min/quant_max {qmin}/{qmax} narrower than {dtype}'s range [{lo}, {hi}]")
    return dt


def _f32_input(cx, arg):
    x = cx.tensor(arg)
    if not x.dtype.is_float:
        raise Unsupported(f"quantizing a {x.dtype} tensor")
    return x


def _const(cx, arg):
    """The values of a constant tensor argument (a lifted constant or buffer), else None."""
    if not cx.is_tensor(arg):
        return None
    lt = cx.tensor(arg)
    if lt.property is not CONSTANT or lt.id not in cx.data:
        return None
    return np.asarray(cx.data[lt.id])


def _scales_attr(scales):
    if scales.dtype != np.float32:
        raise Unsupported(f"scales of dtype {scales.dtype} (torch computes with f32 scales only as dyngraph does)")
    return [float(s) for s in scales.reshape(-1)]


def _zps_attr(zps, n):
    if zps is None:
        return []
    z = [int(v) for v in zps.reshape(-1)]
    return z if len(z) == n else (z * n if len(z) == 1 else z)


def _out_dtype(a):
    od = getattr(a, "out_dtype", None)
    if od not in (None, torch.float32):
        raise Unsupported(f"out_dtype={od} (dequantizing to f32 converts)")


def _axis(cx, a, arg):
    return norm_dim(a.axis, cx.rank_of(arg))


if qd is not None:

    @converter(qd.quantize_per_tensor.default)
    def quantize_per_tensor(cx, node, a):
        dt = _qtype(a.dtype, a.quant_min, a.quant_max, whole_range=True)
        scale, zp = number(a.scale), number(a.zero_point)
        if scale is None or zp is None:
            raise Unsupported("a symbolic scale or zero point")
        return cx.emit(K.Quantize, [_f32_input(cx, a.input)], {"scales": [float(scale)], "zps": [int(zp)]}, dtype=dt)

    @converter(qd.dequantize_per_tensor.default)
    def dequantize_per_tensor(cx, node, a):
        _qtype(a.dtype)
        _out_dtype(a)
        scale, zp = number(a.scale), number(a.zero_point)
        if scale is None or zp is None:
            raise Unsupported("a symbolic scale or zero point")
        return cx.emit(K.Dequantize, [cx.tensor(a.input)], {"scales": [float(scale)], "zps": [int(zp)]},
                       dtype=DataType.f32)

    def _tensor_params(cx, scale, zp):
        """A one-element scale and zero point: attribute values when constant, else tensors."""
        s, z = _const(cx, scale), _const(cx, zp)
        if s is not None and z is not None and s.size == 1 and z.size == 1:
            return {"scales": _scales_attr(s), "zps": [int(z.reshape(-1)[0])]}, None
        st, zt = cx.tensor(scale), cx.tensor(zp)
        return None, [cx.cast(st, DataType.f32), cx.cast(zt, DataType.i32)]

    @converter(qd.quantize_per_tensor.tensor)
    def quantize_per_tensor_tensor(cx, node, a):
        dt = _qtype(a.dtype, a.quant_min, a.quant_max, whole_range=True)
        attrs, tensors = _tensor_params(cx, a.scale, a.zero_point)
        x = _f32_input(cx, a.input)
        if attrs is not None:
            return cx.emit(K.Quantize, [x], attrs, dtype=dt)
        return cx.emit(K.DynamicQuantize, [x] + tensors, dtype=dt)

    @converter(qd.dequantize_per_tensor.tensor)
    def dequantize_per_tensor_tensor(cx, node, a):
        _qtype(a.dtype)
        _out_dtype(a)
        attrs, tensors = _tensor_params(cx, a.scale, a.zero_point)
        if attrs is not None:
            return cx.emit(K.Dequantize, [cx.tensor(a.input)], attrs, dtype=DataType.f32)
        return cx.emit(K.DynamicDequantize, [cx.tensor(a.input)] + tensors, dtype=DataType.f32)

    def _channel_params(cx, a, x_arg):
        axis = _axis(cx, a, x_arg)
        s = _const(cx, a.scales)
        z = _const(cx, a.zero_points) if a.zero_points is not None else None
        if s is not None and (a.zero_points is None or z is not None):
            scales = _scales_attr(s)
            return {"qtype": "per_channel", "axis": axis, "scales": scales,
                    "zps": _zps_attr(z, len(scales))}, None
        tensors = [cx.cast(cx.tensor(a.scales), DataType.f32)]
        if a.zero_points is not None:
            tensors.append(cx.cast(cx.tensor(a.zero_points), DataType.i32))
        return {"qtype": "per_channel", "axis": axis}, tensors

    @converter(qd.quantize_per_channel.default)
    def quantize_per_channel(cx, node, a):
        dt = _qtype(a.dtype, a.quant_min, a.quant_max, whole_range=True)
        if cx.meta(a.scales).dtype != torch.float32:
            raise Unsupported(f"scales of dtype {cx.meta(a.scales).dtype}")
        attrs, tensors = _channel_params(cx, a, a.input)
        x = _f32_input(cx, a.input)
        if tensors is None:
            return cx.emit(K.Quantize, [x], attrs, dtype=dt)
        return cx.emit(K.DynamicQuantize, [x] + tensors, attrs, dtype=dt)

    @converter(qd.dequantize_per_channel.default)
    def dequantize_per_channel(cx, node, a):
        _qtype(a.dtype)
        _out_dtype(a)
        if cx.meta(a.scales).dtype != torch.float32:
            raise Unsupported(f"scales of dtype {cx.meta(a.scales).dtype}")
        attrs, tensors = _channel_params(cx, a, a.input)
        if tensors is None:
            return cx.emit(K.Dequantize, [cx.tensor(a.input)], attrs, dtype=DataType.f32)
        return cx.emit(K.DynamicDequantize, [cx.tensor(a.input)] + tensors, attrs, dtype=DataType.f32)
