"""Shape rule of ScatterND, ONNX's scatter of slices at index tuples (what
torch's ``index_put`` and ``scatter`` become).

    out = copy of data
    for each i in indices.shape[:-1] (in row-major order):
        out[indices[i]] = f(out[indices[i]], updates[i])      (a slice: data.shape[q:])

with q = indices.shape[-1] index components per tuple, and f the
``reduction``: "none" (replace: where indices repeat, the last update in that
order wins), "add", "mul", "max", "min". An index component may be negative
(counted from the end, as in torch); one outside [-d, d) is an error at
execution.
"""

from __future__ import annotations

from ..dtypes import DataType
from ..op import OpKind as K
from ..symbolic import as_expr, format_shape
from .registry import AttrSpec, TensorType, register


@register(K.ScatterND, inputs=(3, 3),
          attrs={"reduction": AttrSpec("str", "none", ("none", "add", "mul", "max", "min"))},
          dtypes=("nonbool", "int", "nonbool"), input_names=("data", "indices", "updates"), same_dtypes=(0, 2),
          out_dtype_of=0)
def scatter_nd(attrs, ins, ctx):
    """out = data with updates written (or combined) at the index tuples."""
    data, idx, upd = ins
    if data.dtype not in (DataType.f32, DataType.i32, DataType.i64):
        raise ctx.dtype_error(f"data must be f32, i32 or i64, got {data.dtype}")
    if idx.rank < 1 or data.rank < 1:
        raise ctx.error(f"data {format_shape(data.shape)} and indices {format_shape(idx.shape)} must have rank >= 1")
    q = as_expr(idx.shape[-1])
    if not q.is_const or not 1 <= q.value <= data.rank:
        raise ctx.error(f"the last dimension of indices {format_shape(idx.shape)} (index components per tuple) must "
                        f"be a static number in [1, {data.rank}]")
    want = tuple(idx.shape[:-1]) + tuple(data.shape[q.value:])
    if upd.rank != len(want):
        raise ctx.error(f"updates {format_shape(upd.shape)} must have shape {format_shape(want)}")
    for d, (u, w) in enumerate(zip(upd.shape, want)):
        ctx.equal(u, w, f"updates dimension {d} vs {format_shape(want)}")
    return [TensorType(data.dtype, data.shape)]
