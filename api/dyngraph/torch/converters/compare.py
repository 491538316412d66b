"""Comparisons, logical ops, where and masked_fill."""

from __future__ import annotations

from ...dtypes import DataType
from ...op import OpKind as K
from .common import aten, number, promoted
from .registry import Unsupported, canonical, converter

_COMPARE = {
    aten.eq.Tensor: K.Equal, aten.eq.Scalar: K.Equal,
    aten.ne.Tensor: K.NotEqual, aten.ne.Scalar: K.NotEqual,
    aten.lt.Tensor: K.Less, aten.lt.Scalar: K.Less,
    aten.le.Tensor: K.LessEqual, aten.le.Scalar: K.LessEqual,
    aten.gt.Tensor: K.Greater, aten.gt.Scalar: K.Greater,
    aten.ge.Tensor: K.GreaterEqual, aten.ge.Scalar: K.GreaterEqual,
}


@converter(*_COMPARE)
def compare(cx, node, a):
    """a (op) b in the dtype torch promotes both to; the result is bool."""
    dt = promoted(a.self, a.other)
    return cx.emit(_COMPARE[canonical(node.target)], [cx.operand(a.self, dt), cx.operand(a.other, dt)])


def _bool(cx, arg):
    return cx.operand(arg, DataType.boolean)


_LOGICAL = {
    aten.logical_and.default: K.LogicalAnd,
    aten.logical_or.default: K.LogicalOr,
    aten.logical_xor.default: K.NotEqual,
}


@converter(*_LOGICAL)
def logical(cx, node, a):
    """Logical ops on anything: inputs are read as bool (nonzero)."""
    y = cx.emit(_LOGICAL[canonical(node.target)], [_bool(cx, a.self), _bool(cx, a.other)])
    return cx.cast(y, cx.out_dtype())


@converter(aten.logical_not.default)
def logical_not(cx, node, a):
    return cx.cast(cx.emit(K.LogicalNot, [_bool(cx, a.self)]), cx.out_dtype())


_BITWISE = {
    aten.bitwise_and.Tensor: K.LogicalAnd, aten.bitwise_and.Scalar: K.LogicalAnd,
    aten.bitwise_or.Tensor: K.LogicalOr, aten.bitwise_or.Scalar: K.LogicalOr,
    aten.bitwise_xor.Tensor: K.NotEqual, aten.bitwise_xor.Scalar: K.NotEqual,
    # ``a & b`` as exported, before decomposition
    aten.__and__.Tensor: K.LogicalAnd, aten.__and__.Scalar: K.LogicalAnd,
    aten.__or__.Tensor: K.LogicalOr, aten.__or__.Scalar: K.LogicalOr,
    aten.__xor__.Tensor: K.NotEqual, aten.__xor__.Scalar: K.NotEqual,
}


@converter(*_BITWISE)
def bitwise(cx, node, a):
    """Bitwise ops on bool tensors (masks) are logical ops."""
    if cx.out_dtype() is not DataType.boolean:
        raise Unsupported("bitwise ops on integers")
    return cx.emit(_BITWISE[canonical(node.target)], [_bool(cx, a.self), _bool(cx, a.other)])


@converter(aten.bitwise_not.default)
def bitwise_not(cx, node, a):
    if cx.out_dtype() is not DataType.boolean:
        raise Unsupported("bitwise not on integers")
    return cx.emit(K.LogicalNot, [_bool(cx, a.self)])


@converter(aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar)
def where(cx, node, a):
    dt = cx.out_dtype()
    return cx.emit(K.Select, [_bool(cx, a.condition), cx.operand(a.self, dt), cx.operand(a.other, dt)])


@converter(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def masked_fill(cx, node, a):
    dt = cx.out_dtype()
    v = a.value
    if number(v) is None and not cx.is_tensor(v):
        raise Unsupported(f"fill value {v!r}")
    return cx.emit(K.Select, [_bool(cx, a.mask), cx.operand(v, dt), cx.cast(cx.tensor(a.self), dt)])
