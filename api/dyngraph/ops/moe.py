"""Shape rule of MatMulId, the expert product of a mixture of experts (ggml's
``mul_mat_id``): each row is multiplied by the weight matrix its id selects.

    ids [T]    : out[t, :]    = src[t, :] @ W[ids[t]]
    ids [T, U] : out[t, u, :] = src[t, u or 0, :] @ W[ids[t, u]]

W is weights [E, K, N], or [E, N, K] with ``transpose_b`` (rows of K: a
torch Linear's layout, what ggml reads without a copy). With ids [T, U], src
is [T, U, K] or [T, 1, K] (one row for all U experts of a token). Every id
must lie in [0, E) (checked at execution).
"""

from __future__ import annotations

from ..op import OpKind as K
from ..symbolic import as_expr, format_shape
from .registry import AttrSpec, TensorType, register


@register(K.MatMulId, inputs=(3, 3), attrs={"transpose_b": AttrSpec("bool", False)},
          dtypes=("float", "float", "int"), weight_inputs=(1,), input_names=("src", "weights", "ids"),
          same_dtypes=(0, 1), out_dtype_of=0)
def matmul_id(attrs, ins, ctx):
    src, w, ids = ins
    if w.rank != 3:
        raise ctx.error(f"weights must be [experts, K, N] (rank 3), got {format_shape(w.shape)}")
    k, n = (w.shape[2], w.shape[1]) if attrs["transpose_b"] else (w.shape[1], w.shape[2])
    if ids.rank == 1:
        if src.rank != 2:
            raise ctx.error(f"with ids of rank 1, src must be [T, K], got {format_shape(src.shape)}")
        ctx.equal(src.shape[0], ids.shape[0], "src rows vs ids")
    elif ids.rank == 2:
        if src.rank != 3:
            raise ctx.error(f"with ids [T, U], src must be [T, U, K] or [T, 1, K], got {format_shape(src.shape)}")
        ctx.equal(src.shape[0], ids.shape[0], "src tokens vs ids")
        if as_expr(src.shape[1]) != 1:
            ctx.equal(src.shape[1], ids.shape[1], "src rows per token vs ids per token")
    else:
        raise ctx.error(f"ids must have rank 1 or 2, got {format_shape(ids.shape)}")
    ctx.equal(src.shape[-1], k, f"contraction dimension: src {format_shape(src.shape)}, weights {format_shape(w.shape)}")
    return [TensorType(src.dtype, tuple(ids.shape) + (n,))]
