"""Helpers shared by the shape rules."""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

from ..dtypes import DataType
from ..symbolic import Expr, as_expr, format_shape
from .registry import InferContext, TensorType

ONE = Expr.const(1)


def normalize_axis(axis: int, rank: int, ctx: InferContext, what: str = "axis") -> int:
    if not -rank <= axis < rank:
        raise ctx.error(f"{what} {axis} is out of range for rank {rank}")
    return axis % rank


def broadcast_shapes(a: Sequence[Expr], b: Sequence[Expr], ctx: InferContext) -> Tuple[Expr, ...]:
    """numpy broadcasting. Two symbolic dims that differ are required equal at execution."""
    n = max(len(a), len(b))
    a = (ONE,) * (n - len(a)) + tuple(a)
    b = (ONE,) * (n - len(b)) + tuple(b)
    out = []
    for i, (x, y) in enumerate(zip(a, b)):
        if x == y:
            out.append(x)
        elif x == ONE:
            out.append(y)
        elif y == ONE:
            out.append(x)
        elif x.is_const and y.is_const:
            raise ctx.error(f"shapes {format_shape(a)} and {format_shape(b)} do not broadcast (dimension {i}: {x} vs {y})")
        else:
            out.append(ctx.equal(x, y, f"broadcast dimension {i} of {format_shape(a)} and {format_shape(b)}"))
    return tuple(out)


def same_dtype(types: Sequence[TensorType], ctx: InferContext) -> DataType:
    dt = types[0].dtype
    for i, t in enumerate(types[1:], 1):
        if t.dtype is not dt:
            raise ctx.dtype_error(f"input {i} has dtype {t.dtype}, input 0 has {dt}; they must match")
    return dt


def require_float(t: TensorType, ctx: InferContext, what: str = "input") -> None:
    if not t.dtype.is_float:
        raise ctx.dtype_error(f"{what} must be a floating-point tensor, got {t.dtype}")


def require_rank(t: TensorType, lo: int, ctx: InferContext, what: str = "input") -> None:
    if t.rank < lo:
        raise ctx.error(f"{what} must have rank >= {lo}, got shape {format_shape(t.shape)}")


def numel(shape: Sequence[Expr]) -> Expr:
    n = ONE
    for d in shape:
        n = n * d
    return n


def exprs(values) -> Tuple[Expr, ...]:
    return tuple(as_expr(v) for v in values)


def exact_quotient(a: Expr, b: Expr) -> Optional[Expr]:
    """a / b when b divides a as a polynomial, else None: ``6*seq / seq`` is 6,
    ``(2*seq*n + 4*n) / (2*n)`` is ``seq + 2``. The divisor is one term (a
    coefficient times a product of atoms) or a polynomial of which a is an
    integer multiple."""
    if b == Expr.const(0):
        return None
    terms = b._terms
    if len(terms) == 1:
        (mb, cb), = terms
        q = {}
        for ma, ca in a._terms:
            rest = list(ma)
            for atom in mb:
                for i, x in enumerate(rest):
                    if x is atom or x == atom:
                        del rest[i]
                        break
                else:
                    return None
            if ca % cb:
                return None
            q[tuple(rest)] = ca // cb
        return Expr(q)
    mb, cb = terms[0]
    ca = dict(a._terms).get(mb, 0)
    if ca % cb:
        return None
    k = Expr.const(ca // cb)
    return k if b * k == a else None
