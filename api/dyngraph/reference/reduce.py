"""Reductions over a list of axes, and ArgMax."""

from __future__ import annotations

import numpy as np

from ..op import OpKind as K
from .registry import implements

_FN = {K.ReduceSum: np.sum, K.ReduceMean: np.mean, K.ReduceMax: np.max, K.ReduceMin: np.min, K.ReduceProd: np.prod}


@implements(*_FN)
def reduce(attrs, ins, ctx):
    x = ins[0]
    axes = tuple(sorted({a % x.ndim for a in attrs["axes"]}))
    return [_FN[ctx.op.kind](x, axis=axes, keepdims=attrs["keep_dims"])]


@implements(K.ArgMax)
def arg_max(attrs, ins, ctx):
    """The first largest value's index; the first NaN's where there is one (numpy's argmax)."""
    return [np.argmax(ins[0], axis=attrs["axis"], keepdims=attrs["keep_dims"]).astype(np.int64)]
