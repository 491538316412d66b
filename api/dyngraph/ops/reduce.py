"""Shape rules of reductions."""

from __future__ import annotations

from ..dtypes import DataType
from ..op import OpKind as K
from .common import ONE, normalize_axis
from .registry import AttrSpec, TensorType, register

ATTRS = {"axes": AttrSpec("ints", axes_of=0), "keep_dims": AttrSpec("bool", False)}


@register((K.ReduceSum, K.ReduceMax, K.ReduceMin, K.ReduceProd), attrs=ATTRS, dtypes=("nonbool",), out_dtype_of=0,
          high_rank="lowering")
def reduce(attrs, ins, ctx):
    """Reduce over `axes` (negative axes count from the end). Integers wrap
    around (ReduceSum, ReduceProd); the max / min of a slice holding NaN is NaN."""
    x = ins[0]
    if x.dtype.name == "boolean":
        raise ctx.dtype_error("cannot reduce a bool tensor")
    if not attrs["axes"]:
        raise ctx.error("axes must name at least one axis")
    axes = sorted({normalize_axis(a, x.rank, ctx) for a in attrs["axes"]})
    if len(axes) != len(attrs["axes"]):
        raise ctx.error(f"axes {list(attrs['axes'])} name an axis twice")
    if attrs["keep_dims"]:
        shape = tuple(ONE if i in axes else d for i, d in enumerate(x.shape))
    else:
        shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    return [TensorType(x.dtype, shape)]


@register(K.ReduceMean, attrs=ATTRS, dtypes=("float",), out_dtype_of=0, high_rank="lowering")
def reduce_mean(attrs, ins, ctx):
    """Mean over `axes`; the input is floating point (the mean of integers is not an integer)."""
    return reduce(attrs, ins, ctx)


@register(K.ArgMax, attrs={"axis": AttrSpec("int", axis_of=0), "keep_dims": AttrSpec("bool", False)},
          dtypes=("nonbool",), out_dtypes=("int",), high_rank="lowering")
def arg_max(attrs, ins, ctx):
    """The index (i64) of the largest value along `axis`: the first one on
    ties, the first NaN where there is one (as numpy and torch)."""
    x = ins[0]
    axis = normalize_axis(attrs["axis"], x.rank, ctx)
    if attrs["keep_dims"]:
        shape = tuple(ONE if i == axis else d for i, d in enumerate(x.shape))
    else:
        shape = tuple(d for i, d in enumerate(x.shape) if i != axis)
    return [TensorType(DataType.i64, shape)]
