"""Arange, GenIndex, Full and Dropout (oneDNN's generator: reference/philox.py)."""

from __future__ import annotations

import math

import numpy as np

from ..errors import ExecutionError
from ..op import OpKind as K
from .philox import dropout_mask, dropout_scale
from .registry import implements


@implements(K.Arange)
def arange(attrs, ins, ctx):
    start, end = ctx.value(attrs["start"][0]), ctx.value(attrs["end"][0])
    return [np.arange(start, end, attrs["step"], dtype=np.int64)]


@implements(K.GenIndex)
def gen_index(attrs, ins, ctx):
    x = ins[0]
    axis = attrs["axis"] % x.ndim
    shape = [1] * x.ndim
    shape[axis] = x.shape[axis]
    return [np.broadcast_to(np.arange(x.shape[axis], dtype=np.int64).reshape(shape), x.shape).copy()]


@implements(K.Full)
def full(attrs, ins, ctx):
    shape = [ctx.value(d) for d in attrs["shape"]]
    v = attrs["value"]
    dt = ctx.out_dtypes[0]
    if dt.is_int:
        v = math.trunc(v)
    elif not dt.is_float:
        v = v != 0
    return [np.full(shape, v, dtype=np.float64 if dt.is_float else (np.int64 if dt.is_int else bool))]


@implements(K.Dropout)
def dropout(attrs, ins, ctx):
    src, seed, offset, prob = ins
    p = float(np.asarray(prob).reshape(-1)[0])
    if not 0.0 <= p <= 1.0:  # NaN too
        raise ExecutionError(f"{ctx.op.label}: probability {p} is outside [0, 1]")
    mask = dropout_mask(src.size, int(np.asarray(seed).reshape(-1)[0]), int(np.asarray(offset).reshape(-1)[0]), p)
    mask = mask.reshape(src.shape)
    # f32 product (the backend's and oneDNN's), rounded once more to a narrower dst by the caller
    kept = (src.astype(np.float32) * dropout_scale(p)).astype(np.float64)
    dst = np.where(mask == 1, kept, 0.0)
    return [dst, mask.astype(np.int64)][:len(ctx.out_dtypes)]
