"""SoftMax, LayerNorm, RMSNorm."""

from __future__ import annotations

import numpy as np

from ..op import OpKind as K
from .registry import implements


@implements(K.SoftMax)
def softmax(attrs, ins, ctx):
    x = ins[0]
    axis = attrs["axis"]
    with np.errstate(all="ignore"):
        m = np.max(x, axis=axis, keepdims=True)
        e = np.exp(x - m)  # a row of all -inf gives NaN, as the plain formula does
        return [e / np.sum(e, axis=axis, keepdims=True)]


def _norm_axes(x, begin):
    return tuple(range(begin % x.ndim, x.ndim))


@implements(K.LayerNorm)
def layer_norm(attrs, ins, ctx):
    x = ins[0]
    axes = _norm_axes(x, attrs["begin_norm_axis"])
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (x - mean) / np.sqrt(var + attrs["epsilon"])
    if attrs["use_affine"]:
        y = y * ins[1] + ins[2]
    return [y]


@implements(K.RMSNorm)
def rms_norm(attrs, ins, ctx):
    x = ins[0]
    axes = _norm_axes(x, attrs["begin_norm_axis"])
    y = x / np.sqrt((x * x).mean(axis=axes, keepdims=True) + attrs["epsilon"])
    if len(ins) == 2:
        y = y * ins[1]
    return [y]
