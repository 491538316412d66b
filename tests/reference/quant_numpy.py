"""numpy references of quantization, written from the definitions in
dyngraph/ops/quantize.py (f32 arithmetic, each step rounded once; integer
products summed exactly in int64)."""

from __future__ import annotations

import numpy as np

RANGE = {np.dtype(np.uint8): (0, 255), np.dtype(np.int8): (-128, 127)}


def _along(v, axis, rank):
    """Per-channel values shaped to broadcast along ``axis`` (None: per tensor)."""
    v = np.asarray(v)
    if axis is None:
        return v.reshape(())
    shape = [1] * rank
    shape[axis] = v.size
    return v.reshape(shape)


def quantize(x, scales, zps, qdtype, axis=None, inv_scales=None):
    """clamp(round_half_even(x * f32(1 / scale)) + zp) with NaN -> zp. ``inv_scales``: the inverse
    scales as f32 already (the tensor forms compute them from f32 scales)."""
    x = np.asarray(x, np.float32)
    if inv_scales is None:
        inv_scales = [np.float32(1.0 / float(s)) for s in np.atleast_1d(scales)]
    inv = _along(np.asarray(inv_scales, np.float32), axis, x.ndim)
    zp = _along(np.asarray(zps if zps is not None and np.size(zps) else [0] * np.size(inv_scales), np.float32),
                axis, x.ndim)
    lo, hi = RANGE[np.dtype(qdtype)]
    with np.errstate(invalid="ignore", over="ignore"):
        p = (x * inv).astype(np.float32)
        r = np.rint(p).astype(np.float32) + zp
        r = np.where(np.isnan(p), zp, r)
    return np.clip(r, lo, hi).astype(qdtype)


def dequantize(q, scales, zps, axis=None):
    """(q - zp) * f32(scale), in f32."""
    q = np.asarray(q)
    s = _along(np.asarray(scales, np.float32), axis, q.ndim)
    zp = _along(np.asarray(zps if zps is not None and np.size(zps) else [0] * np.size(scales), np.float32), axis, q.ndim)
    return ((q.astype(np.float32) - zp) * s).astype(np.float32)


def grouped(v, shape):
    """Per-group values (one per block) repeated to the full ``shape``."""
    v = np.asarray(v)
    for d, n in enumerate(shape):
        v = np.repeat(v, n // v.shape[d], axis=d)
    return v


def int8_matmul(a, w, src_scale, src_zp, wei_scales, wei_zps, bias=None, transpose_b=False, out_dtype=np.float32,
                dst_scale=1.0, dst_zp=0):
    """QuantizedMatMul: the exact integer sums, then f32(acc) * (f32(sa) * f32(sw[n])) + bias, then
    (for u8 / s8 outputs) Quantize's arithmetic."""
    w = np.asarray(w)
    if transpose_b:
        w = w.T
    n = w.shape[1]
    zw = np.asarray(wei_zps if len(wei_zps) else [0], np.int64)
    acc = (np.asarray(a).astype(np.int64) - int(src_zp)) @ (w.astype(np.int64) - zw.reshape(1, -1) * np.ones((1, n), np.int64))
    scale = (np.float32(src_scale) * np.asarray(wei_scales, np.float32)).astype(np.float32)
    y = (acc.astype(np.float32) * scale).astype(np.float32)
    if bias is not None:
        y = (y + np.asarray(bias, np.float32).reshape(-1)).astype(np.float32)
    if np.dtype(out_dtype) in RANGE:
        return quantize(y, [dst_scale], [dst_zp], out_dtype)
    return y.astype(out_dtype)
