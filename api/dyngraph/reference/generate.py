"""Arange, GenIndex and Full."""

from __future__ import annotations

import math

import numpy as np

from ..op import OpKind as K
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
