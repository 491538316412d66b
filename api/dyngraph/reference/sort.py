"""TopK and ArgSort: a stable sort, NaN above every number."""

from __future__ import annotations

import numpy as np

from ..op import OpKind as K
from .registry import implements


def _order(x, axis, descending):
    """Indices sorting x along axis; ties keep their order; NaN last ascending, first descending."""
    x = np.moveaxis(x, axis, -1)
    nan = np.isnan(x) if x.dtype.kind == "f" else np.zeros(x.shape, bool)
    if descending:
        key = np.where(nan, 0, -x) if x.dtype.kind == "f" else -x
        idx = np.lexsort((key, ~nan), axis=-1)  # NaN first, then larger values first
    else:
        key = np.where(nan, 0, x) if x.dtype.kind == "f" else x
        idx = np.lexsort((key, nan), axis=-1)
    return np.moveaxis(idx, -1, axis)


@implements(K.TopK)
def topk(attrs, ins, ctx):
    (x,) = ins
    axis = attrs["axis"] % x.ndim
    k = ctx.value(attrs["k"][0])
    idx = np.take(_order(x, axis, attrs["largest"]), np.arange(k), axis=axis)
    return [np.take_along_axis(x, idx, axis=axis), idx]


@implements(K.ArgSort)
def argsort(attrs, ins, ctx):
    (x,) = ins
    return [_order(x, attrs["axis"] % x.ndim, attrs["descending"])]
