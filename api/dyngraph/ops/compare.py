"""Shape rules of comparisons, logical ops and Select (numpy ``where``).

All of them broadcast like numpy. Comparisons and logical ops produce bool
tensors; Select picks from two tensors of one dtype by a bool condition.
"""

from __future__ import annotations

from ..dtypes import DataType
from ..op import OpKind as K
from ..symbolic import format_shape
from .common import broadcast_shapes
from .registry import AttrSpec, TensorType, register

COMPARE = (K.Equal, K.NotEqual, K.Greater, K.GreaterEqual, K.Less, K.LessEqual)
LOGICAL_BINARY = (K.LogicalAnd, K.LogicalOr)

_BROADCAST = {"auto_broadcast": AttrSpec("str", "numpy", ("numpy", "none"))}


def require_bool(t: TensorType, ctx, what: str) -> None:
    if t.dtype is not DataType.boolean:
        raise ctx.dtype_error(f"{what} must be a bool tensor, got {t.dtype}")


def result_shape(ins, auto_broadcast: str, ctx):
    """numpy broadcasting of every input, or (auto_broadcast='none') equal shapes."""
    if auto_broadcast == "none":
        first = ins[0]
        for t in ins[1:]:
            if t.rank != first.rank:
                raise ctx.error(
                    f"auto_broadcast='none' needs equal shapes, got {format_shape(first.shape)} and {format_shape(t.shape)}"
                )
        return tuple(
            _all_equal([t.shape[d] for t in ins], ctx, f"dimension {d}") for d in range(first.rank)
        )
    shape = ins[0].shape
    for t in ins[1:]:
        shape = broadcast_shapes(shape, t.shape, ctx)
    return shape


def _all_equal(dims, ctx, what):
    d = dims[0]
    for x in dims[1:]:
        d = ctx.equal(d, x, what)
    return d


@register(COMPARE, inputs=(2, 2), attrs=_BROADCAST, out_dtypes=("bool",), same_dtypes=(0, 1), high_rank="elementwise")
def compare(attrs, ins, ctx):
    """a (==, !=, >, >=, <, <=) b elementwise, with numpy broadcasting; a and b
    share one dtype; the output is bool."""
    a, b = ins
    if a.dtype is not b.dtype:
        raise ctx.dtype_error(f"compares {a.dtype} with {b.dtype}; both inputs must have one dtype")
    return [TensorType(DataType.boolean, result_shape(ins, attrs["auto_broadcast"], ctx))]


@register(LOGICAL_BINARY, inputs=(2, 2), attrs=_BROADCAST, dtypes=("bool",), out_dtypes=("bool",), high_rank="elementwise")
def logical_binary(attrs, ins, ctx):
    """a and b / a or b on bool tensors, with numpy broadcasting."""
    for k, t in enumerate(ins):
        require_bool(t, ctx, f"input {k}")
    return [TensorType(DataType.boolean, result_shape(ins, attrs["auto_broadcast"], ctx))]


@register(K.LogicalNot, dtypes=("bool",), out_dtypes=("bool",), high_rank="elementwise")
def logical_not(attrs, ins, ctx):
    """not x, on a bool tensor."""
    require_bool(ins[0], ctx, "the input")
    return [ins[0]]


@register(K.Select, inputs=(3, 3), attrs=_BROADCAST, dtypes=("bool", "any", "any"),
          input_names=("condition", "then", "else"), same_dtypes=(1, 2), out_dtype_of=1, high_rank="elementwise")
def select(attrs, ins, ctx):
    """cond ? then : else elementwise (numpy ``where``), numpy broadcasting over
    all three; cond is bool, then and else share the output's dtype."""
    cond, a, b = ins
    require_bool(cond, ctx, "the condition (input 0)")
    if a.dtype is not b.dtype:
        raise ctx.dtype_error(f"then (input 1) is {a.dtype} but else (input 2) is {b.dtype}; they must match")
    return [TensorType(a.dtype, result_shape(ins, attrs["auto_broadcast"], ctx))]
