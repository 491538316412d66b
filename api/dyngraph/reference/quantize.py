"""Quantize, Dequantize, their Dynamic forms and QuantizedMatMul, with the
f32 arithmetic ops/quantize.py defines (each step rounded to f32 once; the
int8 product's integer sums exact). f8 roundings are ml_dtypes' casts from
float32 (nearest, ties to even, no saturation: what oneDNN's conversion does).
QuantizedConvolution's is in spatial.py, with this module's epilogue."""

from __future__ import annotations

import numpy as np

from ..dtypes import DataType
from ..op import OpKind as K
from .registry import implements

_RANGE = {DataType.u8: (0, 255), DataType.s8: (-128, 127), DataType.u4: (0, 15), DataType.s4: (-8, 7)}


def to_f8(p, dt):
    """float32 values rounded to the f8 type ``dt`` (float64 results; NaN, infinities as the type has them)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(p, np.float32).astype(dt.numpy).astype(np.float64)


def _along(v, axis, rank):
    v = np.asarray(v)
    if axis is None or v.size == 1:
        return v.reshape(-1)[0] if v.size == 1 else v
    shape = [1] * rank
    shape[axis] = v.size
    return v.reshape(shape)


def quantize_f32(x, inv, zp, dt):
    """clamp(round_half_even(f32(x * inv)) + zp) with NaN -> zp; inv and zp broadcast to x.
    For an f8 ``dt``: f8(f32(x * inv)) (zp is zero)."""
    x = np.asarray(x, np.float64).astype(np.float32)
    with np.errstate(all="ignore"):
        p = (x * np.asarray(inv, np.float32)).astype(np.float32)
    if dt.is_f8:
        return to_f8(p, dt)
    lo, hi = _RANGE[dt]
    with np.errstate(all="ignore"):
        r = np.rint(p) + np.asarray(zp, np.float32)
        r = np.where(np.isnan(p), np.asarray(zp, np.float32), r)
    return np.clip(r, lo, hi).astype(np.int64)


def dequantize_f32(q, scale, zp):
    with np.errstate(all="ignore"):
        return ((np.asarray(q).astype(np.float32) - np.asarray(zp, np.float32)) * np.asarray(scale, np.float32)).astype(
            np.float32)


def _axis(attrs, rank):
    return None if attrs["qtype"] == "per_tensor" else attrs["axis"] % rank


@implements(K.Quantize)
def quantize(attrs, ins, ctx):
    (x,) = ins
    ax = _axis(attrs, x.ndim)
    inv = _along(np.array([np.float32(1.0 / s) for s in attrs["scales"]], np.float32), ax, x.ndim)
    zp = _along(np.array(attrs["zps"] or [0] * len(attrs["scales"]), np.float32), ax, x.ndim)
    return [quantize_f32(x, inv, zp, ctx.out_dtypes[0])]


@implements(K.Dequantize)
def dequantize(attrs, ins, ctx):
    (q,) = ins
    ax = _axis(attrs, q.ndim)
    s = _along(np.array(attrs["scales"], np.float32), ax, q.ndim)
    zp = _along(np.array(attrs["zps"] or [0] * len(attrs["scales"]), np.float32), ax, q.ndim)
    return [dequantize_f32(q, s, zp)]


def _tensor_form(attrs, src, scales, zps):
    """scales / zps of the Dynamic forms broadcast to src's shape."""
    qtype = attrs["qtype"]
    if qtype == "per_tensor":
        s = scales.reshape(-1)[0]
        z = zps.reshape(-1)[0] if zps is not None else 0
        return np.float32(s), np.float32(z)
    if qtype == "per_channel":
        ax = attrs["axis"] % src.ndim
        return _along(scales.astype(np.float32), ax, src.ndim), _along(
            (zps if zps is not None else np.zeros(scales.shape)).astype(np.float32), ax, src.ndim)
    s, z = scales.astype(np.float32), (zps if zps is not None else np.zeros(scales.shape)).astype(np.float32)
    for d, g in enumerate(attrs["group_shape"]):
        s, z = np.repeat(s, g, axis=d), np.repeat(z, g, axis=d)
    return s, z


@implements(K.DynamicQuantize)
def dynamic_quantize(attrs, ins, ctx):
    x, scales = ins[0], ins[1]
    s, z = _tensor_form(attrs, x, scales, ins[2] if len(ins) > 2 else None)
    inv = (1.0 / np.asarray(s, np.float64)).astype(np.float32)
    return [quantize_f32(x, inv, z, ctx.out_dtypes[0])]


@implements(K.DynamicDequantize)
def dynamic_dequantize(attrs, ins, ctx):
    q, scales = ins[0], ins[1]
    s, z = _tensor_form(attrs, q, scales, ins[2] if len(ins) > 2 else None)
    return [dequantize_f32(q, s, z)]


def int8_epilogue(acc, attrs, bias, dt, axis):
    """The fused int8 ops' output from their exact integer sums ``acc``:
    f32(acc) * (f32(src_scale) * f32(wei_scales[c])) (+ bias[c]), each step
    rounded to f32, channels c along ``axis``; then Quantize's arithmetic for
    u8 / s8 outputs."""
    scale = (np.float32(attrs["src_scale"]) * np.array(attrs["wei_scales"], np.float32)).astype(np.float32)
    y = (np.asarray(acc).astype(np.float32) * _along(scale, axis, acc.ndim)).astype(np.float32)
    if bias is not None:
        y = (y + _along(np.asarray(bias).astype(np.float32).reshape(-1), axis, acc.ndim)).astype(np.float32)
    if dt in _RANGE:
        return quantize_f32(y, np.float32(1.0 / attrs["dst_scale"]), np.float32(attrs["dst_zp"]), dt)
    return y


@implements(K.QuantizedMatMul)
def quantized_matmul(attrs, ins, ctx):
    a, w = ins[0].astype(np.int64), ins[1].astype(np.int64)
    if attrs["transpose_b"]:
        w = w.T
    zw = np.array(attrs["wei_zps"] or [0], np.int64).reshape(1, -1)
    acc = (a - attrs["src_zp"]) @ (w - zw)
    return [int8_epilogue(acc, attrs, ins[2] if len(ins) == 3 else None, ctx.out_dtypes[0], acc.ndim - 1)]


def _unrounded(kind, attrs, ins):
    """A Quantize's value before rounding (float64, x / scale) and its zero
    point, broadcast to x."""
    x = np.asarray(ins[0], np.float64)
    if kind is K.Quantize:
        ax = _axis(attrs, x.ndim)
        inv = _along(np.array([np.float32(1.0 / s) for s in attrs["scales"]], np.float32), ax, x.ndim)
        zp = _along(np.array(attrs["zps"] or [0] * len(attrs["scales"]), np.float32), ax, x.ndim)
    else:  # DynamicQuantize
        s, zp = _tensor_form(attrs, x, ins[1], ins[2] if len(ins) > 2 else None)
        inv = (1.0 / np.asarray(s, np.float64)).astype(np.float32)
    with np.errstate(all="ignore"):
        return x * np.asarray(inv, np.float64), np.asarray(zp, np.float64)


def quantize_band(kind, attrs, ins, dt: DataType, rtol: float):
    """The lowest and highest value a Quantize (or DynamicQuantize) may give
    when its input carries a relative error of ``rtol``: the roundings of every
    value within ``rtol * (|p| + rms(p))`` of the unrounded ``p`` (the
    normalized error the float comparison allows; ``rms`` over p's finite
    values). With an f32 chain's rtol (1e-4) the band is the one reference
    value except where ``p`` lies that close to a rounding boundary (x.5, as
    when exact arithmetic meets a tie, or halfway between two f8 values), where
    either neighbour is right; with bf16's or f16's rtol it spans what that
    tolerance spans (several steps for large ``p``). For f8, NaN and infinities are the band's ends as the rounding gives them
    (an end beyond f8_e4m3's range is NaN)."""
    p, zp = _unrounded(kind, attrs, ins)
    fin = np.isfinite(p)
    rms = float(np.sqrt(np.mean(np.square(p[fin])))) if fin.any() else 0.0
    with np.errstate(all="ignore"):
        tol = rtol * (np.abs(p) + rms)
    if dt.is_f8:
        with np.errstate(all="ignore"):
            return to_f8((p - tol).astype(np.float32), dt), to_f8((p + tol).astype(np.float32), dt)
    lo, hi = _RANGE[dt]

    def q(v):
        with np.errstate(all="ignore"):
            r = np.where(np.isnan(p), zp, np.rint(v) + zp)
        return np.clip(r, lo, hi).astype(np.int64)

    return q(p - tol), q(p + tol)
