"""Shape rules of the ops that read or write rows by index: Gather (an
embedding lookup) and the state writes ScatterRows and CopyToSlice."""

from __future__ import annotations

from ..dtypes import DataType
from ..op import OpKind as K
from ..symbolic import as_expr, format_shape, sym_min
from .common import normalize_axis
from .registry import AttrSpec, TensorType, register

INDEX_TYPES = (DataType.i32, DataType.i64)


def require_indices(t: TensorType, ctx, what: str = "indices") -> None:
    if t.dtype not in INDEX_TYPES:
        raise ctx.dtype_error(f"{what} must be i32 or i64, got {t.dtype}")


@register(K.Gather, inputs=(2, 2), attrs={"axis": AttrSpec("int", 0, axis_of=0)}, dtypes=("any", "int"), weight_inputs=(0,),
          input_names=("table", "indices"), out_dtype_of=0)
def gather(attrs, ins, ctx):
    """numpy ``take(table, indices, axis)``: out.shape = table.shape[:axis] +
    indices.shape + table.shape[axis+1:]. Indices must lie in [0, table.shape[axis])
    (checked at execution)."""
    table, idx = ins
    require_indices(idx, ctx)
    axis = normalize_axis(attrs["axis"], table.rank, ctx)
    shape = table.shape[:axis] + idx.shape + table.shape[axis + 1 :]
    if len(shape) > 4:
        raise ctx.error(f"the result {format_shape(shape)} has rank {len(shape)} (at most 4)")
    return [TensorType(table.dtype, shape)]


@register(K.ScatterRows, inputs=(3, 3), dtypes=("float", "int", "float"), writes_input=0,
          input_names=("dst", "indices", "src"), out_dtype_of=0)
def scatter_rows(attrs, ins, ctx):
    """out = dst with out[..., indices[i], :] = src[..., i, :] along dst's
    second-to-last axis (the rows of a [..., rows, width] tensor, e.g. the
    sequence axis of a [batch, heads, seq, head_dim] KV cache). indices is
    1-D; src has dst's shape except len(indices) rows. When dst is a STATE
    tensor (or the result of an earlier write to one) the write happens in
    place: the state is updated."""
    dst, idx, src = ins
    require_indices(idx, ctx)
    if dst.rank < 2:
        raise ctx.error(f"dst must have rank >= 2 (rows of a width), got {format_shape(dst.shape)}")
    if idx.rank != 1:
        raise ctx.error(f"indices must be 1-D, got {format_shape(idx.shape)}")
    if src.rank != dst.rank:
        raise ctx.error(f"src {format_shape(src.shape)} must have dst's rank {dst.rank}")
    if not (src.dtype.is_float and dst.dtype.is_float):
        raise ctx.dtype_error(f"dst and src must be floating point, got {dst.dtype} and {src.dtype}")
    for d in range(dst.rank):
        if d == dst.rank - 2:
            ctx.equal(src.shape[d], idx.shape[0], "src rows vs number of indices")
        else:
            ctx.equal(src.shape[d], dst.shape[d], f"src dimension {d} vs dst")
    return [dst]


@register(K.CopyToSlice, inputs=(2, 2), attrs={"starts": AttrSpec("exprs", rank_of=0)}, writes_input=0,
          input_names=("dst", "src"), out_dtype_of=0)
def copy_to_slice(attrs, ins, ctx):
    """out = dst with dst[starts[0]:starts[0]+src.shape[0], ...] = src; one
    start per dst axis (ints or dimension expressions). Written in place when
    dst is a STATE tensor (or an earlier write to one)."""
    dst, src = ins
    starts = attrs["starts"]
    if len(starts) != dst.rank or src.rank != dst.rank:
        raise ctx.error(f"starts {list(starts)} and src {format_shape(src.shape)} must match dst's rank {dst.rank}")
    if not (src.dtype.is_float and dst.dtype.is_float) and src.dtype is not dst.dtype:
        raise ctx.dtype_error(f"src is {src.dtype}, dst is {dst.dtype}")
    for d, (s, n, size) in enumerate(zip(starts, src.shape, dst.shape)):
        s = as_expr(s)
        end = n + s
        if end.is_const and size.is_const and end.value > size.value:
            raise ctx.error(f"axis {d}: [{s}, {end}) is outside dst's {size}")
        if s.is_const and s.value < 0:
            raise ctx.error(f"axis {d}: start {s} is negative")
        if not end.provably_le(size):  # checked at execution: the slice must fit
            ctx.equal(sym_min(end, size), end, f"axis {d}: the slice [{s}, {end}) fits in dst's {size}")
    return [dst]
