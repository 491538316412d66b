"""Matrix products: linear, mm, addmm, bmm, matmul.

A weight used transposed (``x @ W.T``: linear, or ``mm(x, permute(W, [1, 0]))``
after decomposition) becomes ``MatMul(x, W, transpose_b=True)`` on the
weight itself, the layout the compiler stores (and quantizes) as is.
"""

from __future__ import annotations

from ...op import OpKind as K
from .common import aten, is_call, number, through_identities
from .registry import Unsupported, converter


def _swaps_last_two(node, rank: int) -> bool:
    if is_call(node, aten.t.default):
        return rank == 2
    if is_call(node, aten.permute.default):
        perm = [d % rank for d in node.args[1]]
        return perm == list(range(rank - 2)) + [rank - 1, rank - 2]
    if is_call(node, aten.transpose.int):
        d = sorted((node.args[1] % rank, node.args[2] % rank))
        return d == [rank - 2, rank - 1]
    return False


def _rhs(cx, b):
    """(tensor, transpose_b): a transposed right-hand side is read untransposed."""
    src = through_identities(b)
    rank = cx.rank_of(b)
    if rank >= 2 and _swaps_last_two(src, rank):
        return cx.tensor(src.args[0]), True
    return cx.tensor(b), False


def _matmul(cx, a, b, bias=None):
    dt = cx.out_dtype()
    x = cx.cast(cx.tensor(a), dt)
    w, tb = _rhs(cx, b)
    w = cx.cast(w, dt)
    ins = [x, w] + ([cx.cast(cx.tensor(bias), dt)] if bias is not None else [])
    return cx.emit(K.MatMul, ins, {"transpose_b": tb} if tb else {})


@converter(aten.mm.default, aten.bmm.default)
def mm(cx, node, a):
    return _matmul(cx, a.self, a.mat2)


@converter(aten.addmm.default)
def addmm(cx, node, a):
    beta, alpha = number(a.beta), number(a.alpha)
    if beta != 1 or alpha != 1:
        raise Unsupported(f"beta={a.beta}, alpha={a.alpha}")
    return _matmul(cx, a.mat1, a.mat2, a.self)


@converter(aten.linear.default, keep=True)
def linear(cx, node, a):
    dt = cx.out_dtype()
    x = cx.cast(cx.tensor(a.input), dt)
    w = cx.cast(cx.tensor(a.weight), dt)
    ins = [x, w] + ([cx.cast(cx.tensor(a.bias), dt)] if a.bias is not None else [])
    if cx.rank_of(a.input) == 1:
        y = cx.emit(K.MatMul, [cx.reshape(x, (1,) + cx.shape_of(a.input))] + ins[1:], {"transpose_b": True})
        return cx.reshape(y, cx.out_shape())
    return cx.emit(K.MatMul, ins, {"transpose_b": True})


@converter(aten.matmul.default, keep=True)
def matmul(cx, node, a):
    """torch.matmul: 1-D operands are promoted to matrices, then squeezed back."""
    ra, rb = cx.rank_of(a.self), cx.rank_of(a.other)
    if ra >= 2 and rb >= 2:
        return _matmul(cx, a.self, a.other)
    dt = cx.out_dtype()
    x = cx.cast(cx.tensor(a.self), dt)
    w = cx.cast(cx.tensor(a.other), dt)
    if ra == 1:
        x = cx.reshape(x, (1,) + cx.shape_of(a.self))
    if rb == 1:
        w = cx.reshape(w, cx.shape_of(a.other) + (1,))
    return cx.reshape(cx.emit(K.MatMul, [x, w]), cx.out_shape())
