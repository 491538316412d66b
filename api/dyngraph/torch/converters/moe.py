"""Mixture-of-experts routing: topk, sort / argsort, histc, and the grouped
expert product (``torch._grouped_mm``, transformers' ``grouped_mm_fallback``)
as MatMulId (ggml's ``mul_mat_id``)."""

from __future__ import annotations

import numpy as np
import torch.fx as fx

from ...dtypes import DataType
from ...op import OpKind as K
from .common import aten, norm_dim, number
from .registry import Unsupported, converter

I64 = DataType.i64
F32 = DataType.f32


@converter(aten.topk.default)
def topk(cx, node, a):
    """values, indices = the k largest (smallest) along dim, sorted, ties in
    input order (torch.topk does not promise an order of ties: with equal
    values its indices may differ)."""
    d = norm_dim(a.dim, cx.rank_of(a.self))
    vals, idx = cx.emit(K.TopK, [cx.tensor(a.self)],
                        {"k": cx.size(a.k), "axis": d, "largest": bool(a.largest), "sorted": True}, n_out=2)
    return vals, idx


@converter(aten.sort.default, aten.sort.stable)
def sort(cx, node, a):
    """TopK of the whole axis: a stable sort. With ``stable=False`` (the
    default) torch may order equal values otherwise (measured: from a few
    hundred elements on): the values agree, the indices of ties may not.
    MoE routing sorts expert ids, whose ties (rows of one expert) are
    computed alike and put back by the inverse permutation: no effect."""
    rank = cx.rank_of(a.self)
    if rank == 0:
        raise Unsupported("sort of a 0-d tensor")
    d = norm_dim(a.dim, rank)
    n = cx.shape_of(a.self)[d]
    vals, idx = cx.emit(K.TopK, [cx.tensor(a.self)], {"k": n, "axis": d, "largest": bool(a.descending)}, n_out=2)
    return vals, idx


@converter(aten.argsort.default, aten.argsort.stable)
def argsort(cx, node, a):
    rank = cx.rank_of(a.self)
    if rank == 0:
        raise Unsupported("argsort of a 0-d tensor")
    return cx.emit(K.ArgSort, [cx.tensor(a.self)], {"axis": norm_dim(a.dim, rank), "descending": bool(a.descending)})


@converter(aten.histc.default)
def histc(cx, node, a):
    """Counts of the elements in ``bins`` equal bins over [min, max], as a
    one-hot sum. torch's arithmetic on CPU, exactly: in f32, bin =
    int((x - min) * bins / (max - min)) with min, max rounded to f32 first,
    max in the last bin, elements outside [min, max] or NaN not counted
    (checked against torch.histc at and next to every bin edge)."""
    bins, lo, hi = number(a.bins), number(a.min), number(a.max)
    if bins is None or lo is None or hi is None:
        raise Unsupported("symbolic bins or bounds")
    if not lo < hi:
        raise Unsupported(f"min={lo}, max={hi} (the range taken from the data)")
    x = cx.cast(cx.tensor(a.self), F32)
    n = 1
    for s in cx.shape_of(a.self):
        n = n * s
    x = cx.reshape(x, (n, 1))
    t = cx.emit(K.Subtract, [x, cx.full(float(lo), F32)]) if lo != 0 else x
    t = cx.emit(K.Multiply, [t, cx.full(float(bins), F32)])
    width = float(np.float32(hi) - np.float32(lo))  # as torch: the difference of the f32 bounds, in f32
    t = cx.emit(K.Divide, [t, cx.full(width, F32)])
    b = cx.emit(K.Minimum, [cx.cast(t, I64), cx.full(int(bins) - 1, I64)])
    inside = cx.emit(K.LogicalAnd, [cx.emit(K.GreaterEqual, [x, cx.full(float(lo), F32)]),
                                    cx.emit(K.LessEqual, [x, cx.full(float(hi), F32)])])
    edges = cx.reshape(cx.emit(K.Arange, [], {"start": 0, "end": int(bins)}, dtype=I64), (1, int(bins)))
    hit = cx.emit(K.LogicalAnd, [cx.emit(K.Equal, [b, edges]), inside])
    counts = cx.emit(K.ReduceSum, [cx.cast(hit, F32)], {"axes": [0], "keep_dims": False})
    return cx.cast(counts, cx.out_dtype())


def _last_two_swapped(node):
    """The tensor whose last two dims ``node`` swaps (a transpose / permute of a rank-3 tensor), else None."""
    if not isinstance(node, fx.Node) or node.op != "call_function":
        return None
    if node.target is aten.transpose.int and sorted(d % 3 for d in node.args[1:3]) == [1, 2]:
        return node.args[0]
    if node.target is aten.permute.default and [d % 3 for d in node.args[1]] == [0, 2, 1]:
        return node.args[0]
    return None


def _grouped(cx, x_arg, w_arg, offs_arg):
    """out[r] = x[r] @ w[e(r)] for rows grouped by expert: rows [offs[e-1], offs[e])
    belong to expert e, i.e. e(r) = #{e : offs[e] <= r}. A row past offs[-1]
    gets id E, refused at execution (no expert)."""
    if cx.rank_of(x_arg) != 2 or cx.rank_of(w_arg) != 3 or offs_arg is None or cx.rank_of(offs_arg) != 1:
        raise Unsupported("a grouped product other than rows [S, K] by experts [E, K, N] with offsets [E]")
    s = cx.shape_of(x_arg)[0]
    rows = cx.reshape(cx.emit(K.Arange, [], {"start": 0, "end": s}, dtype=I64), (s, 1))
    e = cx.shape_of(offs_arg)[0]
    offs = cx.reshape(cx.cast(cx.tensor(offs_arg), I64), (1, e))
    before = cx.cast(cx.emit(K.LessEqual, [offs, rows]), F32)
    ids = cx.cast(cx.emit(K.ReduceSum, [before], {"axes": [1], "keep_dims": False}), I64)
    inner = _last_two_swapped(w_arg)
    if inner is not None and cx.is_tensor(inner):  # [E, N, K] rows of K: what ggml reads as is
        w, tb = cx.tensor(inner), True
    else:
        w, tb = cx.tensor(w_arg), False
    x = cx.cast(cx.tensor(x_arg), w.dtype)
    return cx.cast(cx.emit(K.MatMulId, [x, w, ids], {"transpose_b": tb}), cx.out_dtype())


if hasattr(aten, "_grouped_mm"):
    @converter(aten._grouped_mm.default)
    def grouped_mm(cx, node, a):
        if a.bias is not None:
            raise Unsupported("a bias")
        return _grouped(cx, a.self, a.mat2, a.offs)


@converter("transformers::grouped_mm_fallback")
def grouped_mm_fallback(cx, node, a):
    """transformers' grouped product (integrations/moe.py): input [S, K] sorted by expert, weight [E, K, N], offs."""
    return _grouped(cx, a.input, a.weight, a.offs)

