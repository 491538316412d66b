"""Gather, ScatterRows and CopyToSlice."""

from __future__ import annotations

import numpy as np

from ..op import OpKind as K
from .registry import implements


@implements(K.Gather)
def gather(attrs, ins, ctx):
    table, idx = ins
    axis = attrs["axis"] % table.ndim
    if idx.size and (idx.min() < 0 or idx.max() >= table.shape[axis]):
        raise IndexError(f"{ctx.op.label}: an index is outside [0, {table.shape[axis]})")
    return [np.take(table, idx, axis=axis)]


@implements(K.ScatterRows)
def scatter_rows(attrs, ins, ctx):
    dst, idx, src = ins
    out = dst.copy()
    rows = dst.shape[-2]
    if idx.size and (idx.min() < 0 or idx.max() >= rows):
        raise IndexError(f"{ctx.op.label}: an index is outside [0, {rows})")
    out[..., idx, :] = src
    return [out]


@implements(K.CopyToSlice)
def copy_to_slice(attrs, ins, ctx):
    dst, src = ins
    out = dst.copy()
    starts = [ctx.value(s) for s in attrs["starts"]]
    out[tuple(slice(s, s + n) for s, n in zip(starts, src.shape))] = src
    return [out]
