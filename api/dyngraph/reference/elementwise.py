"""Elementwise ops: binary with numpy broadcasting, unary, GELU, BiasAdd."""

from __future__ import annotations

import math

import numpy as np

from ..op import OpKind as K
from .registry import implements


def _broadcast_check(attrs, a, b):
    if attrs.get("auto_broadcast") == "none" and a.shape != b.shape:
        raise ValueError(f"auto_broadcast='none' with shapes {a.shape} and {b.shape}")


@implements(K.Add, K.Subtract, K.Multiply, K.Divide, K.Maximum, K.Minimum)
def binary(attrs, ins, ctx):
    a, b = ins
    _broadcast_check(attrs, a, b)
    k = ctx.op.kind
    if a.dtype == bool:  # logical or / and, as numpy does on bools
        if k is K.Add:
            return [a | b]
        if k is K.Multiply:
            return [a & b]
        return [np.maximum(a, b) if k is K.Maximum else np.minimum(a, b)]
    with np.errstate(all="ignore"):
        if k is K.Add:
            return [a + b]
        if k is K.Subtract:
            return [a - b]
        if k is K.Multiply:
            return [a * b]
        if k is K.Divide:
            return [a / b]
    # Maximum / Minimum propagate NaN
    return [np.maximum(a, b) if k is K.Maximum else np.minimum(a, b)]


_erf = np.frompyfunc(math.erf, 1, 1)


def erf(x: np.ndarray) -> np.ndarray:
    return _erf(x).astype(np.float64) if x.size else x.copy()


def sigmoid(x):
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


_UNARY = {
    K.ReLU: lambda x: np.maximum(x, 0.0),
    K.SiLU: lambda x: x * sigmoid(x),
    K.Sigmoid: sigmoid,
    K.Tanh: np.tanh,
    K.Exp: np.exp,
    K.Log: np.log,
    K.Sqrt: np.sqrt,
    K.Square: np.square,
    K.Abs: np.abs,
    K.Neg: np.negative,
    K.Sin: np.sin,
    K.Cos: np.cos,
}


@implements(*_UNARY)
def unary(attrs, ins, ctx):
    with np.errstate(all="ignore"):
        return [_UNARY[ctx.op.kind](ins[0])]


@implements(K.GELU)
def gelu(attrs, ins, ctx):
    x = ins[0]
    with np.errstate(all="ignore"):
        if attrs["mode"] == "tanh":
            return [0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))]
        return [0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))]


@implements(K.BiasAdd)
def bias_add(attrs, ins, ctx):
    x, b = ins
    axis = x.ndim - 1 if attrs["data_format"] == "NXC" else 1
    shape = [1] * x.ndim
    shape[axis] = b.shape[0]
    return [x + b.reshape(shape)]
