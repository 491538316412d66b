"""Elementwise ops: binary with numpy broadcasting, unary, GELU, the
activations with attributes (oneDNN's), Expand, Reorder, BiasAdd."""

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


def softplus(x, beta=1.0):
    bx = beta * x
    with np.errstate(all="ignore"):
        return (np.maximum(bx, 0.0) + np.log1p(np.exp(-np.abs(bx)))) / beta


_UNARY.update({
    K.Reciprocal: lambda x: 1.0 / x,
    K.Rsqrt: lambda x: 1.0 / np.sqrt(x),
    K.Erf: erf,
    K.HardSwish: lambda x: x * np.clip(x + 3.0, 0.0, 6.0) / 6.0,
    K.Mish: lambda x: x * np.tanh(softplus(x)),
    K.Round: np.round,  # ties to even
    K.Ceil: np.ceil,
    K.Floor: np.floor,
    K.Acos: np.arccos,  # NaN outside [-1, 1]
    K.Asin: np.arcsin,
    K.Atan: np.arctan,
})


@implements(K.SquaredDifference, K.FloorDivide)
def binary_more(attrs, ins, ctx):
    a, b = ins
    _broadcast_check(attrs, a, b)
    if ctx.op.kind is K.SquaredDifference:
        return [np.square(a - b)]
    with np.errstate(all="ignore"):
        if a.dtype.kind == "i":  # x // 0 is 0, as numpy's integers
            return [np.where(b == 0, 0, np.floor_divide(a, np.where(b == 0, 1, b)))]
        return [np.floor_divide(a, b)]


@implements(K.Pow)
def pow_(attrs, ins, ctx):
    with np.errstate(all="ignore"):
        return [np.power(ins[0], ins[1] if len(ins) == 2 else attrs["beta"])]


@implements(K.Clamp, K.Elu, K.LeakyReLU, K.HardSigmoid, K.SoftPlus)
def activation(attrs, ins, ctx):
    x, k = ins[0], ctx.op.kind
    with np.errstate(all="ignore"):
        if k is K.Clamp:
            return [np.clip(x, attrs["min"], attrs["max"])]
        if k is K.Elu:
            return [np.where(x >= 0, x, attrs["alpha"] * np.expm1(np.minimum(x, 0.0)))]
        if k is K.LeakyReLU:
            return [np.where(x >= 0, x, attrs["alpha"] * x)]
        if k is K.HardSigmoid:
            return [np.clip(attrs["alpha"] * x + attrs["beta"], 0.0, 1.0)]
        return [softplus(x, attrs["beta"])]


@implements(K.Expand)
def expand(attrs, ins, ctx):
    return [np.broadcast_to(ins[0], [ctx.value(d) for d in attrs["shape"]]).copy()]


@implements(K.Reorder)
def reorder(attrs, ins, ctx):
    return [ins[0].copy()]


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
