"""Reductions: sum, mean, amax/amin (and max/min of all elements), max/min
along a dimension, vector norms, and cumsum."""

from __future__ import annotations

from ...dtypes import DataType
from ...op import OpKind as K
from .common import aten, norm_dim, number
from .registry import Missing, Unsupported, converter


def _axes(cx, x, dims):
    rank = cx.rank_of(x)
    if dims is None or len(dims) == 0:
        return list(range(rank))
    return sorted({norm_dim(d, rank) for d in dims})


def _reduce(cx, kind, x, dims, keepdim, dtype=None):
    dt = cx.out_dtype() if dtype is None else dtype
    t = cx.cast(cx.tensor(x), dt)
    if cx.rank_of(x) == 0:
        return t
    y = cx.emit(kind, [t], {"axes": _axes(cx, x, dims), "keep_dims": bool(keepdim)})
    return cx.reshape(y, cx.out_shape())


@converter(aten.sum.dim_IntList, aten.sum.default)
def sum_(cx, node, a):
    return _reduce(cx, K.ReduceSum, a.self, getattr(a, "dim", None), getattr(a, "keepdim", False))


@converter(aten.mean.dim, aten.mean.default)
def mean(cx, node, a):
    return _reduce(cx, K.ReduceMean, a.self, getattr(a, "dim", None), getattr(a, "keepdim", False))


@converter(aten.amax.default, aten.max.default)
def amax(cx, node, a):
    return _reduce(cx, K.ReduceMax, a.self, getattr(a, "dim", None), getattr(a, "keepdim", False))


@converter(aten.amin.default, aten.min.default)
def amin(cx, node, a):
    return _reduce(cx, K.ReduceMin, a.self, getattr(a, "dim", None), getattr(a, "keepdim", False))


@converter(aten.max.dim, aten.min.dim)
def max_dim(cx, node, a):
    """(values, indices): max's indices are an ArgMax; min's are not computed."""

    is_max = node.target is aten.max.dim
    dt = cx.meta(a.self).dtype
    from ..dtypes import dg_dtype

    v = cx.cast(cx.tensor(a.self), dg_dtype(dt))
    axis = norm_dim(a.dim, cx.rank_of(a.self))
    y = cx.emit(K.ReduceMax if is_max else K.ReduceMin, [v], {"axes": [axis], "keep_dims": bool(a.keepdim)})
    if not is_max:
        return (y, Missing(node, 1))
    return (y, cx.emit(K.ArgMax, [v], {"axis": axis, "keep_dims": bool(a.keepdim)}))


@converter(aten.argmax.default)
def argmax(cx, node, a):
    """Along a dimension, or (dim=None) over the flattened tensor."""
    x = cx.tensor(a.self)
    rank = cx.rank_of(a.self)
    if rank == 0:
        return cx.emit(K.Full, [], {"shape": [], "value": 0.0}, dtype=DataType.i64)
    if a.dim is None:
        n = 1
        for d in cx.shape_of(a.self):
            n = n * d
        x, axis = cx.reshape(x, (n,)), 0
    else:
        axis = norm_dim(a.dim, rank)
    y = cx.emit(K.ArgMax, [x], {"axis": axis, "keep_dims": bool(a.keepdim) and a.dim is not None})
    return cx.reshape(y, cx.out_shape())


@converter(aten.prod.dim_int, aten.prod.default)
def prod(cx, node, a):
    dim = getattr(a, "dim", None)
    return _reduce(cx, K.ReduceProd, a.self, None if dim is None else [dim], getattr(a, "keepdim", False))


@converter(aten.linalg_vector_norm.default)
def vector_norm(cx, node, a):
    """The 2-norm (sqrt of the sum of squares) over dims."""
    if number(a.ord) != 2:
        raise Unsupported(f"ord={a.ord}")
    dt = cx.out_dtype()
    x = cx.cast(cx.tensor(a.self), dt)
    s = cx.emit(K.ReduceSum, [cx.emit(K.Square, [x])], {"axes": _axes(cx, a.self, a.dim), "keep_dims": bool(a.keepdim)})
    return cx.reshape(cx.emit(K.Sqrt, [s]), cx.out_shape())


@converter(aten.cumsum.default)
def cumsum(cx, node, a):
    """Running sum along a dimension, as a product with a triangle of ones:
    out[..., i] = sum_j x[..., j] * (j <= i). Computed in f32 (integers are
    exact up to 2**24); it costs n**2 for a dimension of n."""
    rank = cx.rank_of(a.self)
    d = norm_dim(a.dim, rank)
    out_dt = cx.out_dtype()
    n = cx.shape_of(a.self)[d] if rank else 1
    x = cx.cast(cx.tensor(a.self), DataType.f32)
    if rank == 0:
        return cx.cast(x, out_dt)
    order = [i for i in range(rank) if i != d] + [d]
    x = cx.transpose(x, order)
    if rank == 1:
        x = cx.reshape(x, (1, n))
    idx = cx.emit(K.Arange, [], {"start": 0, "end": n}, dtype=DataType.i64)
    col = cx.reshape(idx, (n, 1))
    row = cx.reshape(idx, (1, n))
    tri = cx.cast(cx.emit(K.LessEqual, [col, row]), DataType.f32)
    y = cx.emit(K.MatMul, [x, tri])
    if rank == 1:
        y = cx.reshape(y, (n,))
    back = [order.index(i) for i in range(rank)]
    return cx.cast(cx.transpose(y, back), out_dt)
