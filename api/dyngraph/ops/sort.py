"""Shape rules of sorting along an axis: TopK (the k largest or smallest
values and their indices, as ONNX's TopK and torch.topk) and ArgSort (the
permutation that sorts, as torch.argsort / numpy.argsort).

Order, exactly: values in descending (``largest`` / ``descending``) or
ascending order; equal values keep their input order (a stable sort, as
``numpy.argsort(kind="stable")`` and ``torch.sort(stable=True)``); NaN sorts
above every number (last ascending, first descending, as in torch).
"""

from __future__ import annotations

from ..dtypes import DataType
from ..op import OpKind as K
from ..symbolic import as_expr, format_shape, sym_min
from .common import normalize_axis
from .registry import AttrSpec, TensorType, register

INDEX_DTYPES = (DataType.i32, DataType.i64)


def _index_dtype(ctx, k: int) -> DataType:
    """The declared dtype of output k when it is i32 or i64, else i64."""
    outs = ctx.declared_outputs
    d = outs[k] if k < len(outs) else None
    return d.dtype if d is not None and d.dtype in INDEX_DTYPES else DataType.i64


@register(K.TopK, outputs=(2, 2),
          attrs={"k": AttrSpec("expr"), "axis": AttrSpec("int", -1, axis_of=0), "largest": AttrSpec("bool", True),
                 "sorted": AttrSpec("bool", True)},
          dtypes=("nonbool",), out_dtypes=("nonbool", "int"), input_names=("src",))
def topk(attrs, ins, ctx):
    """values, indices = the k largest (or smallest) entries along ``axis``, in
    sorted order (``sorted=False`` allows any order; dyngraph sorts anyway).
    k is an int or a dimension expression, 1 <= k <= the axis' size (checked
    at execution when symbolic). indices: i64, or the i32 the output is declared."""
    (src,) = ins
    if src.rank < 1:
        raise ctx.error("the input must have rank >= 1")
    axis = normalize_axis(attrs["axis"], src.rank, ctx)
    k = as_expr(attrs["k"][0])
    n = src.shape[axis]
    if k.is_const and k.value < 1:
        raise ctx.error(f"k must be >= 1, got {k}")
    if k.is_const and n.is_const and k.value > n.value:
        raise ctx.error(f"k = {k} is above the size {n} of axis {axis}")
    if not k.provably_le(n):
        ctx.equal(sym_min(k, n), k, f"k = {k} <= the size {n} of axis {axis}")
    shape = src.shape[:axis] + (k,) + src.shape[axis + 1:]
    return [TensorType(src.dtype, shape), TensorType(_index_dtype(ctx, 1), shape)]


@register(K.ArgSort, attrs={"axis": AttrSpec("int", -1, axis_of=0), "descending": AttrSpec("bool", False)},
          dtypes=("nonbool",), out_dtypes=("int",), input_names=("src",))
def argsort(attrs, ins, ctx):
    """The indices that sort ``src`` along ``axis`` (stable). i64, or the i32
    the output is declared."""
    (src,) = ins
    if src.rank < 1:
        raise ctx.error(f"the input must have rank >= 1, got {format_shape(src.shape)}")
    normalize_axis(attrs["axis"], src.rank, ctx)
    return [TensorType(_index_dtype(ctx, 0), src.shape)]
