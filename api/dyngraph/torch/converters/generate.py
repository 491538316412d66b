"""Tensors made from sizes and numbers: arange, full, zeros, ones and their
``_like`` / ``new_`` forms. Their sizes are size expressions; a fill value may
be a float read from tensor data (``FloatScalar``)."""

from __future__ import annotations

from ...op import OpKind as K
from ...symbolic import Expr
from .common import aten, number
from .registry import FloatScalar, Unsupported, converter


def _int_or_expr(cx, v):
    if isinstance(v, float):
        if not v.is_integer():
            raise Unsupported(f"a non-integral arange bound {v}")
        return int(v)
    return cx.size(v)


@converter(aten.arange.default, aten.arange.start, aten.arange.start_step)
def arange(cx, node, a):
    dt = cx.out_dtype()
    start = _int_or_expr(cx, getattr(a, "start", 0))
    end = _int_or_expr(cx, a.end)
    step = _int_or_expr(cx, getattr(a, "step", 1))
    if isinstance(step, Expr):
        raise Unsupported("a symbolic step")
    y = cx.emit(K.Arange, [], {"start": start, "end": end, "step": step}, dtype=dt if dt.is_int or dt.name == "f32" else None)
    return cx.cast(y, dt)


def _fill(cx, value):
    f = cx.value(value)
    if isinstance(f, FloatScalar):  # a float from tensor data: broadcast to the result
        dt = cx.out_dtype()
        return cx.emit(K.Add, [cx.full(0, dt, cx.out_shape()), cx.cast(f.lt, dt)])
    v = number(value)
    if v is None:
        v = cx.size(value)  # a size: only a 0-d result can hold it
    return cx.full(v, cx.out_dtype(), cx.out_shape())


@converter(aten.full.default, aten.new_full.default, aten.full_like.default)
def full(cx, node, a):
    return _fill(cx, a.fill_value)


@converter(aten.zeros.default, aten.new_zeros.default, aten.zeros_like.default,
           aten.empty.memory_format, aten.new_empty.default, aten.empty_like.default,
           aten.empty_permuted.default)
def zeros(cx, node, a):
    return cx.full(0, cx.out_dtype(), cx.out_shape())


@converter(aten.ones.default, aten.new_ones.default, aten.ones_like.default)
def ones(cx, node, a):
    return cx.full(1, cx.out_dtype(), cx.out_shape())


@converter(aten.scalar_tensor.default)
def scalar_tensor(cx, node, a):
    return _fill(cx, a.s)
