"""Normalizations along the channel axis: batch_norm in eval mode (and its
decomposed form _native_batch_norm_legit_no_training), batch_norm by the
batch's own statistics where there are no running ones to update (BiT's
weight standardization: _native_batch_norm_legit.no_stats), group_norm (and
native_group_norm), instance_norm (GroupNorm with one group per channel, or
the running statistics as a batch norm when use_input_stats is False)."""

from __future__ import annotations

import numpy as np

from ...op import OpKind as K
from ..dtypes import dg_dtype
from .common import aten, number, plain
from .registry import Unsupported, converter
from .spatial import missing


def _dtype(cx, x):
    """The dtype of the (first) result: the input's."""
    dt = dg_dtype(cx.meta(x).dtype)
    if dt is None or not dt.is_float:
        raise Unsupported(f"input of dtype {cx.meta(x).dtype}")
    return dt


def _channels(cx, x) -> int:
    shape = cx.shape_of(x)
    if len(shape) < 2 or not isinstance(shape[1], int):
        raise Unsupported(f"input of shape {shape}: the channel count must be static")
    return shape[1]


def _param(cx, v, C: int, fill: float):
    """An optional per-channel tensor (None: `fill` everywhere)."""
    if v is None:
        return cx.constant(np.full(C, fill, np.float32))
    return cx.tensor(v)


def _batch_norm(cx, x, weight, bias, mean, var, eps):
    if mean is None or var is None:
        raise Unsupported("batch norm without running statistics")
    C = _channels(cx, x)
    dt = _dtype(cx, x)
    ins = [cx.cast(cx.tensor(x), dt), _param(cx, weight, C, 1.0), _param(cx, bias, C, 0.0), cx.tensor(mean),
           cx.tensor(var)]
    return cx.emit(K.BatchNormInference, ins, {"epsilon": float(eps), "data_format": "NCX"})


def _batch_stats_norm(cx, x, weight, bias, eps):
    """Normalized by each channel's mean and (biased) variance over the batch and the
    spatial axes: a GroupNorm of one group per channel on [1, C, N * X] (x with its batch
    axis moved after the channels, where the batch is not 1), then the affine."""
    C = _channels(cx, x)
    dt = _dtype(cx, x)
    shape = list(cx.type(cx.tensor(x)).shape)
    t = cx.cast(cx.tensor(x), dt)
    order = [1, 0] + list(range(2, len(shape)))
    one = shape[0].is_const and shape[0].value == 1
    if not one:
        t = cx.transpose(t, order)
    rest = shape[0]
    for d in shape[2:]:
        rest = rest * d
    flat = cx.reshape(t, (1, C, plain(rest)))
    y = cx.emit(K.GroupNorm, [flat], {"groups": C, "epsilon": float(eps), "data_format": "NCX", "use_affine": False})
    y = cx.reshape(y, cx.type(t).shape)
    if not one:
        y = cx.transpose(y, order)
    per_channel = (1, C) + (1,) * (len(shape) - 2)
    if weight is not None:
        y = cx.emit(K.Multiply, [y, cx.reshape(cx.cast(cx.tensor(weight), dt), per_channel)])
    if bias is not None:
        y = cx.emit(K.Add, [y, cx.reshape(cx.cast(cx.tensor(bias), dt), per_channel)])
    return y


@converter(aten.batch_norm.default)
def batch_norm(cx, node, a):
    if a.training and a.running_mean is None and a.running_var is None:
        return _batch_stats_norm(cx, a.input, a.weight, a.bias, a.eps)
    if a.training:
        raise Unsupported("batch_norm in training mode (the module is not in eval mode)")
    return _batch_norm(cx, a.input, a.weight, a.bias, a.running_mean, a.running_var, a.eps)


@converter(aten._native_batch_norm_legit.no_stats)
def native_batch_norm_no_stats(cx, node, a):
    """(normalized, mean, rstd) by the batch's statistics: only the first is computed."""
    if not a.training:
        raise Unsupported("batch norm without statistics, not in training mode")
    return (_batch_stats_norm(cx, a.input, a.weight, a.bias, a.eps), missing(node, 1), missing(node, 2))


@converter(aten._native_batch_norm_legit_no_training.default)
def native_batch_norm_no_training(cx, node, a):
    """(normalized, mean, rstd): only the first is computed."""
    y = _batch_norm(cx, a.input, a.weight, a.bias, a.running_mean, a.running_var, a.eps)
    return (y, missing(node, 1), missing(node, 2))


def _group_norm(cx, x, groups, weight, bias, eps):
    C = _channels(cx, x)
    if cx.rank_of(x) > 4:
        raise Unsupported(f"group norm of rank {cx.rank_of(x)}")
    dt = _dtype(cx, x)
    ins = [cx.cast(cx.tensor(x), dt)]
    attrs = {"groups": int(groups), "epsilon": float(eps), "data_format": "NCX"}
    if weight is None and bias is None:
        attrs["use_affine"] = False
    else:
        ins += [cx.cast(_param(cx, weight, C, 1.0), dt), cx.cast(_param(cx, bias, C, 0.0), dt)]
    return cx.emit(K.GroupNorm, ins, attrs)


@converter(aten.group_norm.default)
def group_norm(cx, node, a):
    return _group_norm(cx, a.input, a.num_groups, a.weight, a.bias, a.eps)


@converter(aten.native_group_norm.default)
def native_group_norm(cx, node, a):
    """(normalized, mean, rstd): only the first is computed."""
    if number(a.group) is None:
        raise Unsupported(f"group count {a.group} is not a number")
    y = _group_norm(cx, a.input, a.group, a.weight, a.bias, a.eps)
    return (y, missing(node, 1), missing(node, 2))


@converter(aten.instance_norm.default, keep=True)
def instance_norm(cx, node, a):
    if not a.use_input_stats:  # track_running_stats in eval mode: a batch norm with the running statistics
        return _batch_norm(cx, a.input, a.weight, a.bias, a.running_mean, a.running_var, a.eps)
    return _group_norm(cx, a.input, _channels(cx, a.input), a.weight, a.bias, a.eps)
