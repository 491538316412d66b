"""Python floats computed from tensor data: ``x.max().item()`` and arithmetic on it.

torch.export keeps such a float as a SymFloat (``_local_scalar_dense``). Here it is a
0-d float32 tensor (``FloatScalar``): ops that take a number read it as an operand
(``x * s.item()`` is a Multiply by it), and a node that runs in PyTorch gets the float.
Python arithmetic on it (``s.item() * 2``, ``** 0.5``) is elementwise ops on that
tensor, and so are floats computed from sizes (``n / k``, ``sym_sqrt(n)``); floats are
computed in float32 here, in double in Python (a rounding apart).
"""

import operator

import torch

from ...dtypes import DataType
from ...op import OpKind as K
from .common import aten
from .registry import FloatScalar, Unsupported, converter

F32 = DataType.f32


def _is_float(cx, node) -> bool:
    return isinstance(cx.meta(node), torch.SymFloat)


@converter(aten._local_scalar_dense.default, aten.item.default)
def item(cx, node, a):
    if not _is_float(cx, node):
        raise Unsupported("a non-float .item() without a size it defines")
    x = cx.tensor(a.self)
    if any(d != 1 for d in cx.shape_of(a.self)):
        raise Unsupported("an .item() of a tensor that may have more than one element")
    return FloatScalar(cx.cast(cx.reshape(x, ()), F32))


def _arith(kind):
    def convert(cx, node, a):
        if not _is_float(cx, node):
            raise Unsupported("Python arithmetic that is neither a size nor a float")
        x, y = (cx.operand(v, F32) for v in a.args)
        return FloatScalar(cx.emit(kind, [x, y], dtype=F32))
    return convert


for _op, _kind in ((operator.add, K.Add), (operator.sub, K.Subtract), (operator.mul, K.Multiply),
                   (operator.truediv, K.Divide), (operator.pow, K.Pow)):
    converter(_op)(_arith(_kind))


@converter(operator.neg)
def neg(cx, node, a):
    if not _is_float(cx, node):
        raise Unsupported("Python arithmetic that is neither a size nor a float")
    return FloatScalar(cx.emit(K.Neg, [cx.operand(a.args[0], F32)], dtype=F32))


@converter(torch.sym_float)
def sym_float(cx, node, a):
    return FloatScalar(cx.operand(a.args[0], F32))


@converter(torch._sym_sqrt)
def sym_sqrt(cx, node, a):
    return FloatScalar(cx.emit(K.Sqrt, [cx.operand(a.args[0], F32)], dtype=F32))


_COMPARE = {operator.ge: K.GreaterEqual, operator.gt: K.Greater, operator.le: K.LessEqual,
            operator.lt: K.Less, operator.eq: K.Equal, operator.ne: K.NotEqual}


def float_assert(cx, node):
    """torch's runtime assertion on a float from tensor data (``0 <= t + 4`` before
    ``(t + 4) ** 0.5``): (its condition as a 0-d bool tensor, its message), or None when
    ``node`` is no comparison of such floats and numbers."""
    kind = _COMPARE.get(node.target)
    if kind is None or len(node.args) != 2:
        return None
    vals = [cx.value(v) for v in node.args]
    if not any(isinstance(v, FloatScalar) for v in vals):
        return None
    if not all(isinstance(v, FloatScalar) or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in vals):
        return None
    cond = cx.emit(kind, [cx.operand(v, F32) for v in node.args], dtype=DataType.boolean)
    said = [u.args[1] for u in node.users if len(u.args) > 1 and isinstance(u.args[1], str)]
    return cond, f"{said[0] if said else f'runtime assertion {node.name} failed'} (a float read from tensor data)"
