"""Comparisons, logical ops and Select (numpy ``where``)."""

from __future__ import annotations

import numpy as np

from ..op import OpKind as K
from .registry import implements

_CMP = {K.Equal: np.equal, K.NotEqual: np.not_equal, K.Greater: np.greater, K.GreaterEqual: np.greater_equal,
        K.Less: np.less, K.LessEqual: np.less_equal, K.LogicalAnd: np.logical_and, K.LogicalOr: np.logical_or}


@implements(*_CMP)
def compare(attrs, ins, ctx):
    a, b = ins
    if attrs.get("auto_broadcast") == "none" and a.shape != b.shape:
        raise ValueError(f"auto_broadcast='none' with shapes {a.shape} and {b.shape}")
    with np.errstate(invalid="ignore"):
        return [_CMP[ctx.op.kind](a, b)]


@implements(K.LogicalNot)
def logical_not(attrs, ins, ctx):
    return [np.logical_not(ins[0])]


@implements(K.Select)
def select(attrs, ins, ctx):
    cond, a, b = ins
    return [np.where(cond, a, b)]
