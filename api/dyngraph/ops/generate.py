"""Shape rules of ops that create tensors from their attributes alone:
Arange (a range of numbers), GenIndex (each element's index along an axis)
and Full (a constant tensor).

Their sizes are dimension expressions (``seq``, ``past + seq``), so what they
create always has the size of the binding being executed.
"""

from __future__ import annotations

import math

from ..dtypes import DataType
from ..errors import GraphError
from ..op import OpKind as K
from ..symbolic import as_expr, format_shape
from .common import normalize_axis
from .registry import AttrSpec, TensorType, register

# The backend computes integers (i32, i64, bool) as 32-bit integers.
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1

ARANGE_DTYPES = (DataType.i32, DataType.i64, DataType.f32)
INDEX_DTYPES = (DataType.i32, DataType.i64)


def output_dtype(ctx, allowed=None):
    """The dtype declared on the op's output logical tensor (these ops have no
    input to take it from)."""
    if not ctx.declared_outputs or ctx.declared_outputs[0] is None:
        raise ctx.error("the output dtype is taken from the output logical tensor (dtype= of GraphBuilder), which is missing")
    dt = ctx.declared_outputs[0].dtype
    if allowed is not None and dt not in allowed:
        raise ctx.dtype_error(f"the output must be one of {', '.join(str(d) for d in allowed)}, got {dt}")
    return dt


@register(
    K.Arange,
    inputs=(0, 0),
    attrs={"start": AttrSpec("expr", 0), "end": AttrSpec("expr"), "step": AttrSpec("int", 1, min=INT32_MIN, max=INT32_MAX)},
    out_dtypes=("int_or_f32",),
)
def arange(attrs, ins, ctx):
    """start, start + step, ... stopping before end: ceil((end - start) / step)
    values. start and end are ints or dimension expressions, step a nonzero
    int; the dtype (i32, i64, f32) is the output logical tensor's."""
    dt = output_dtype(ctx, ARANGE_DTYPES)
    start, end, step = as_expr(attrs["start"][0]), as_expr(attrs["end"][0]), attrs["step"]
    if step == 0:
        raise GraphError(f"{ctx.op_label}: step must be nonzero")
    if not INT32_MIN <= step <= INT32_MAX:
        raise GraphError(f"{ctx.op_label}: step {step} does not fit the backend's 32-bit integers")
    span, s = (end - start, step) if step > 0 else (start - end, -step)
    n = (span + (s - 1)) // s
    if n.bounds()[1] < 1:
        raise ctx.error(
            f"arange from {start} to {end} by {step} is empty ({n} values); zero-size tensors are not supported"
        )
    if start.is_const and not INT32_MIN <= start.value <= INT32_MAX:
        raise GraphError(f"{ctx.op_label}: start {start} does not fit the backend's 32-bit integers")
    if start.is_const and n.is_const and dt is not DataType.f32:
        last = start.value + (n.value - 1) * step
        if not INT32_MIN <= last <= INT32_MAX:
            raise GraphError(f"{ctx.op_label}: value {last} does not fit the backend's 32-bit integers")
    return [TensorType(dt, (n,))]


@register(K.GenIndex, attrs={"axis": AttrSpec("int", axis_of=0)}, out_dtypes=("int",), high_rank="lowering")
def gen_index(attrs, ins, ctx):
    """out[i0, i1, ...] = i_axis, with the input's shape (its values are not
    read); the dtype (i32, i64) is the output logical tensor's."""
    src = ins[0]
    dt = output_dtype(ctx, INDEX_DTYPES)
    if src.rank == 0:
        raise ctx.error("the input must have rank >= 1, got a scalar")
    normalize_axis(attrs["axis"], src.rank, ctx)
    return [TensorType(dt, src.shape)]


@register(K.Full, inputs=(0, 0), attrs={"shape": AttrSpec("exprs"), "value": AttrSpec("float")}, high_rank="lowering")
def full(attrs, ins, ctx):
    """A tensor of `shape` (ints or dimension expressions; [] is a scalar)
    with every element `value`, in the output logical tensor's dtype.
    Integer dtypes take value truncated toward zero (it must fit 32 bits);
    bool takes value != 0."""
    dt = output_dtype(ctx)
    shape = tuple(as_expr(d) for d in attrs["shape"])
    for i, d in enumerate(shape):
        if d.bounds()[1] < 1:
            raise ctx.error(f"shape {format_shape(shape)}: dimension {i} is {d}; dimensions must be positive")
    v = attrs["value"]
    if dt.is_int:
        if not math.isfinite(v) or not INT32_MIN <= math.trunc(v) <= INT32_MAX:
            raise ctx.dtype_error(f"value {v} cannot be stored as {dt} (the backend's integers are 32-bit)")
    return [TensorType(dt, shape)]


def _single_value(t: TensorType, name: str, ctx) -> None:
    """A Dropout parameter is one value: a scalar, or a 1-D tensor of one element."""
    if t.rank == 0 or (t.rank == 1 and t.shape[0].is_const and t.shape[0].value == 1):
        return
    raise ctx.error(f"{name} must be a single value (shape [] or [1]), got shape {format_shape(t.shape)}")


@register(K.Dropout, inputs=(4, 4), outputs=(1, 2), dtypes=("float", "int", "int", "float"),
          out_dtypes=("float", "int8"), input_names=("src", "seed", "offset", "probability"), high_rank="lowering")
def dropout(attrs, ins, ctx):
    """oneDNN's Dropout: mask = draw(seed, offset, i) > probability * (2^32 - 1),
    dst = mask ? src * (1 / (1 - probability)) : 0 (0 where probability is 1),
    for the element of linear index i. The draw is Philox4x32-10 (Salmon et al.
    2011) keyed by the seed and counted from the offset, as oneDNN draws it:
    bit for bit the mask oneDNN's CPU engine writes. seed and offset are
    i32 or i64 single values, probability an f32 single value in [0, 1]
    (checked when the graph runs); outputs dst (src's shape and dtype) and,
    when a second output is declared, the mask (u8, 0 or 1)."""
    src, seed, offset, prob = ins
    for t, name in ((seed, "seed"), (offset, "offset"), (prob, "probability")):
        _single_value(t, name, ctx)
    if prob.dtype is not DataType.f32:
        raise ctx.dtype_error(f"probability must be f32, got {prob.dtype}")
    outs = [TensorType(src.dtype, src.shape)]
    if len(ctx.declared_outputs) > 1:
        declared = ctx.declared_outputs[1]
        dt = getattr(declared, "dtype", None)
        if dt is not None and dt is not DataType.u8:
            raise ctx.dtype_error(f"the mask (output 1) is u8, declared {dt}")
        outs.append(TensorType(DataType.u8, src.shape))
    return outs
