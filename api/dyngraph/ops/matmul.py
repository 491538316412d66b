"""Shape rule of MatMul: numpy matmul with optional transposes and bias."""

from __future__ import annotations

from ..op import OpKind as K
from ..symbolic import format_shape
from .common import broadcast_shapes, require_rank
from .registry import ALL_INPUTS, AttrSpec, TensorType, register


@register(
    K.MatMul,
    inputs=(2, 3),
    attrs={"transpose_a": AttrSpec("bool", False), "transpose_b": AttrSpec("bool", False)},
    dtypes=("float",),
    weight_inputs=(1,),
    weight_rows_attr="transpose_b",
    input_names=("a", "b", "bias"),
    same_dtypes=ALL_INPUTS,
    out_dtype_of=0,
    high_rank="lowering",
)
def matmul(attrs, ins, ctx):
    """a[..., M, K] @ b[..., K, N] (+ bias) with broadcast batch dimensions."""
    a, b = ins[0], ins[1]
    require_rank(a, 2, ctx, "input 0")
    require_rank(b, 2, ctx, "input 1")
    sa, sb = list(a.shape), list(b.shape)
    if attrs["transpose_a"]:
        sa[-2], sa[-1] = sa[-1], sa[-2]
    if attrs["transpose_b"]:
        sb[-2], sb[-1] = sb[-1], sb[-2]
    ctx.equal(sa[-1], sb[-2], f"contraction dimension: {format_shape(a.shape)} @ {format_shape(b.shape)}")
    batch = broadcast_shapes(sa[:-2], sb[:-2], ctx)
    out = TensorType(a.dtype, batch + (sa[-2], sb[-1]))
    if len(ins) == 3:
        bias = ins[2]
        full = broadcast_shapes(out.shape, bias.shape, ctx)
        if full != out.shape:
            raise ctx.error(f"bias {format_shape(bias.shape)} does not broadcast to the output {format_shape(out.shape)}")
    return [out]
