"""Shape rules of DynamicReshape and DynamicTranspose: the target shape or the
order is a tensor whose values are only known at execution. They are read on
the host when the partition executes, become symbol bindings (part of the
graph cache key), and are checked there."""

from __future__ import annotations

from ..logical_tensor import MAX_RANK
from ..op import OpKind as K
from ..symbolic import format_shape
from .indexing import require_indices
from .registry import AttrSpec, TensorType, register


def _static_length(t: TensorType, ctx, what: str) -> int:
    if t.rank != 1 or not t.shape[0].is_const:
        raise ctx.error(f"{what} must be a 1-D tensor of static length, got {format_shape(t.shape)}")
    return t.shape[0].value


@register(K.DynamicReshape, inputs=(2, 2), attrs={"special_zero": AttrSpec("bool", False)}, dtypes=("any", "int"),
          shape_inputs=(1,), input_names=("src", "shape"), out_dtype_of=0, high_rank="lowering")
def dynamic_reshape(attrs, ins, ctx):
    """Reshape src to the shape held by the second input (i32/i64, 1-D, static
    length = the output rank): at most one -1 (inferred), 0 copies src's
    dimension at the same position when special_zero. The values are read at
    execution; a bad target (two -1s, a volume mismatch) raises ShapeError then."""
    src, shape = ins
    require_indices(shape, ctx, "the shape input")
    n = _static_length(shape, ctx, "the shape input")
    if not 1 <= n <= MAX_RANK:
        raise ctx.error(f"the target rank must be 1 to {MAX_RANK}, got {n}")
    dims = tuple(
        ctx.value_symbol(f"dim{k}", "reshape", input=1, index=k, ref=0, flag=int(attrs["special_zero"])) for k in range(n)
    )
    return [TensorType(src.dtype, dims)]


@register(K.DynamicTranspose, inputs=(2, 2), dtypes=("any", "int"), shape_inputs=(1,), input_names=("src", "order"),
          resolved={"perm": AttrSpec("exprs", rank_of=0)}, out_dtype_of=0, high_rank="lowering")
def dynamic_transpose(attrs, ins, ctx):
    """Transpose src by the order held by the second input (i32/i64, 1-D of
    length rank, or empty to reverse the axes); negative axes count from the
    end. A repeated or out-of-range axis raises ShapeError at execution."""
    src, order = ins
    require_indices(order, ctx, "the order input")
    n = _static_length(order, ctx, "the order input")
    if n not in (0, src.rank):
        raise ctx.error(f"the order has {n} entries, src has rank {src.rank}")
    perm = tuple(
        ctx.value_symbol(f"axis{k}", "permute", input=1, index=k, ref=0, min=0, max=max(src.rank - 1, 0))
        for k in range(src.rank)
    )
    dims = tuple(ctx.value_symbol(f"dim{k}", "permuted_dim", input=1, index=k, ref=0) for k in range(src.rank))
    ctx.backend_attrs["perm"] = perm
    return [TensorType(src.dtype, dims)]
