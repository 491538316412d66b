"""Normalizations and softmax: layer_norm, rms_norm, softmax.

(The decomposed RMSNorm ``x * rsqrt(mean(x ** 2, -1, keepdim=True) + eps)``
is recognized by the ``mul`` converter.)
"""

from __future__ import annotations

import torch

from ...op import OpKind as K
from .common import aten, norm_dim
from .registry import Missing, Unsupported, converter


def _layer_norm(cx, x, normalized_shape, weight, bias, eps):
    rank = cx.rank_of(x)
    n = len(normalized_shape)
    if n < 1 or n > rank:
        raise Unsupported(f"normalized_shape {normalized_shape} for rank {rank}")
    dt = cx.out_dtype() if isinstance(cx.out, torch.Tensor) else cx.tensor(x).dtype
    xs = cx.cast(cx.tensor(x), dt)
    attrs = {"begin_norm_axis": rank - n, "epsilon": float(eps)}
    if weight is not None and bias is not None:
        return cx.emit(K.LayerNorm, [xs, cx.cast(cx.tensor(weight), dt), cx.cast(cx.tensor(bias), dt)], attrs)
    y = cx.emit(K.LayerNorm, [xs], {**attrs, "use_affine": False})
    if weight is not None:
        y = cx.emit(K.Multiply, [y, cx.cast(cx.tensor(weight), dt)])
    if bias is not None:
        y = cx.emit(K.Add, [y, cx.cast(cx.tensor(bias), dt)])
    return y


@converter(aten.layer_norm.default, keep=True)
def layer_norm(cx, node, a):
    return _layer_norm(cx, a.input, a.normalized_shape, a.weight, a.bias, a.eps)


@converter(aten.native_layer_norm.default)
def native_layer_norm(cx, node, a):
    """(normalized, mean, rstd): only the first is computed."""

    y = _layer_norm(cx, a.input, a.normalized_shape, a.weight, a.bias, a.eps)
    return (y, Missing(node, 1), Missing(node, 2))


@converter(aten.rms_norm.default, keep=True)
def rms_norm(cx, node, a):
    rank = cx.rank_of(a.input)
    n = len(a.normalized_shape)
    if n < 1 or n > rank:
        raise Unsupported(f"normalized_shape {a.normalized_shape} for rank {rank}")
    dt = cx.out_dtype()
    eps = a.eps if a.eps is not None else torch.finfo(cx.out.dtype).eps
    ins = [cx.cast(cx.tensor(a.input), dt)]
    if a.weight is not None:
        ins.append(cx.cast(cx.tensor(a.weight), dt))
    return cx.emit(K.RMSNorm, ins, {"begin_norm_axis": rank - n, "epsilon": float(eps)})


@converter(aten._softmax.default, aten.softmax.int)
def softmax(cx, node, a):
    dt = cx.out_dtype()
    rank = cx.rank_of(a.self)
    return cx.emit(K.SoftMax, [cx.cast(cx.tensor(a.self), dt)], {"axis": norm_dim(a.dim, rank)})


@converter(aten._log_softmax.default, aten.log_softmax.int)
def log_softmax(cx, node, a):
    """x - max - log(sum(exp(x - max)))"""
    dt = cx.out_dtype()
    rank = cx.rank_of(a.self)
    d = norm_dim(a.dim, rank)
    x = cx.cast(cx.tensor(a.self), dt)
    m = cx.emit(K.ReduceMax, [x], {"axes": [d], "keep_dims": True})
    z = cx.emit(K.Subtract, [x, m])
    lse = cx.emit(K.Log, [cx.emit(K.ReduceSum, [cx.emit(K.Exp, [z])], {"axes": [d], "keep_dims": True})])
    return cx.emit(K.Subtract, [z, lse])


