"""Shape rules of elementwise ops: binary with numpy broadcasting, unary
activations (oneDNN's attribute names where oneDNN has the op), Expand,
Reorder, BiasAdd."""

from __future__ import annotations

import math

from ..op import OpKind as K
from ..symbolic import as_expr, format_shape
from .common import ONE, broadcast_shapes, normalize_axis
from .registry import AttrSpec, TensorType, register

UNARY_FLOAT = (K.ReLU, K.SiLU, K.Sigmoid, K.Tanh, K.Exp, K.Log, K.Sqrt, K.Square, K.Abs, K.Neg, K.Sin, K.Cos,
               K.Reciprocal, K.Rsqrt, K.Erf, K.HardSwish, K.Mish, K.Round, K.Ceil, K.Floor, K.Acos, K.Asin,
               K.Atan)
_BROADCAST = {"auto_broadcast": AttrSpec("str", "numpy", ("numpy", "none"))}


def _broadcast(attrs, ins, ctx):
    """Elementwise a (op) b with numpy broadcasting; both inputs share one dtype."""
    a, b = ins
    dt = ins[0].dtype
    if attrs["auto_broadcast"] == "none":
        if a.rank != b.rank:
            raise ctx.error(f"auto_broadcast='none' needs equal shapes, got ranks {a.rank} and {b.rank}")
        shape = tuple(ctx.equal(x, y, f"dimension {i}") for i, (x, y) in enumerate(zip(a.shape, b.shape)))
    else:
        shape = broadcast_shapes(a.shape, b.shape, ctx)
    return [TensorType(dt, shape)]


@register((K.Add, K.Multiply, K.Maximum, K.Minimum), inputs=(2, 2), attrs=_BROADCAST, same_dtypes=(0, 1), out_dtype_of=0,
          high_rank="elementwise")
def binary(attrs, ins, ctx):
    """Elementwise a (op) b with numpy broadcasting: any dtype (on bool, Add is
    logical or and Multiply logical and, as in numpy; i32 wraps around on overflow)."""
    return _broadcast(attrs, ins, ctx)


@register(K.Subtract, inputs=(2, 2), attrs=_BROADCAST, dtypes=("nonbool",), same_dtypes=(0, 1), out_dtype_of=0,
          high_rank="elementwise")
def subtract(attrs, ins, ctx):
    """a - b with numpy broadcasting; not on bool (as in numpy)."""
    return _broadcast(attrs, ins, ctx)


@register(K.Divide, inputs=(2, 2), attrs=_BROADCAST, dtypes=("float",), same_dtypes=(0, 1), out_dtype_of=0,
          high_rank="elementwise")
def divide(attrs, ins, ctx):
    """a / b with numpy broadcasting; floating point only (no integer division)."""
    return _broadcast(attrs, ins, ctx)


@register(K.SquaredDifference, inputs=(2, 2), attrs=_BROADCAST, dtypes=("float",), same_dtypes=(0, 1),
          out_dtype_of=0, high_rank="elementwise")
def squared_difference(attrs, ins, ctx):
    """(a - b)^2 with numpy broadcasting; floating point."""
    return _broadcast(attrs, ins, ctx)


@register(K.FloorDivide, inputs=(2, 2), attrs=_BROADCAST, dtypes=("nonbool",), same_dtypes=(0, 1),
          out_dtype_of=0, high_rank="elementwise")
def floor_divide(attrs, ins, ctx):
    """floor(a / b) with numpy broadcasting, as numpy's floor_divide (and
    torch's ``//``): integers round toward negative infinity (x // 0 is 0,
    as numpy's), floats are floor of the exact quotient (from fmod, not the
    rounded a / b)."""
    return _broadcast(attrs, ins, ctx)


@register(UNARY_FLOAT, dtypes=("float",), out_dtype_of=0, high_rank="elementwise")
def unary(attrs, ins, ctx):
    """y = f(x), same shape and dtype; x is floating point. Reciprocal is 1/x
    (inf at 0), Rsqrt 1/sqrt(x), HardSwish x min(max(x + 3, 0), 6) / 6, Mish
    x tanh(softplus(x)), Round to the nearest integer with ties to even (as
    numpy and torch), Ceil and Floor toward +inf / -inf, Acos and Asin NaN
    outside [-1, 1] (as numpy and torch)."""
    return [ins[0]]


def _float_unary(attrs, ins, ctx):
    return [ins[0]]


@register(K.Pow, inputs=(1, 2), attrs={"beta": AttrSpec("float", 1.0)}, dtypes=("float",),
          input_names=("src", "exponent"), same_dtypes=(0, 1), out_dtype_of=0, high_rank="elementwise")
def pow_(attrs, ins, ctx):
    """src ** beta (oneDNN's Pow); with a second input, src ** exponent
    elementwise with numpy broadcasting (beta then stays 1). A negative base
    with a non-integer exponent is NaN, as in numpy."""
    if len(ins) == 1:
        return [ins[0]]
    if attrs["beta"] != 1.0:
        raise ctx.error(f"beta is {attrs['beta']}: with an exponent input, beta must stay 1")
    return [TensorType(ins[0].dtype, broadcast_shapes(ins[0].shape, ins[1].shape, ctx))]


@register(K.Clamp, attrs={"min": AttrSpec("float"), "max": AttrSpec("float")}, dtypes=("float",), out_dtype_of=0,
          high_rank="elementwise")
def clamp(attrs, ins, ctx):
    """min(max(x, min), max) (oneDNN's Clamp; -inf / inf leave a side open);
    NaN stays NaN."""
    if math.isnan(attrs["min"]) or math.isnan(attrs["max"]):
        raise ctx.error(f"bounds [{attrs['min']}, {attrs['max']}] must not be NaN")
    return _float_unary(attrs, ins, ctx)


@register(K.Elu, attrs={"alpha": AttrSpec("float", min=0.0, finite=True)}, dtypes=("float",), out_dtype_of=0,
          high_rank="elementwise")
def elu(attrs, ins, ctx):
    """x where x >= 0, alpha (e^x - 1) where x < 0 (oneDNN's Elu)."""
    return _float_unary(attrs, ins, ctx)


@register(K.LeakyReLU, attrs={"alpha": AttrSpec("float", finite=True)}, dtypes=("float",), out_dtype_of=0,
          high_rank="elementwise")
def leaky_relu(attrs, ins, ctx):
    """x where x >= 0, alpha x where x < 0 (oneDNN's LeakyReLU)."""
    return _float_unary(attrs, ins, ctx)


@register(K.HardSigmoid, attrs={"alpha": AttrSpec("float", finite=True), "beta": AttrSpec("float", finite=True)},
          dtypes=("float",), out_dtype_of=0, high_rank="elementwise")
def hard_sigmoid(attrs, ins, ctx):
    """max(0, min(1, alpha x + beta)) (oneDNN's HardSigmoid; torch's is alpha 1/6, beta 1/2)."""
    return _float_unary(attrs, ins, ctx)


@register(K.SoftPlus, attrs={"beta": AttrSpec("float", 1.0, finite=True)}, dtypes=("float",), out_dtype_of=0,
          high_rank="elementwise")
def soft_plus(attrs, ins, ctx):
    """ln(1 + e^(beta x)) / beta (oneDNN's SoftPlus), computed without overflow."""
    if attrs["beta"] == 0.0:
        raise ctx.error("beta must be nonzero")
    return _float_unary(attrs, ins, ctx)


@register(K.Expand, attrs={"shape": AttrSpec("exprs")}, out_dtype_of=0, high_rank="elementwise")
def expand(attrs, ins, ctx):
    """numpy broadcast_to(x, shape): shape (ints or dimension expressions) has
    at least x's rank; each of x's dimensions, aligned right, is 1 or equal."""
    x = ins[0]
    shape = tuple(as_expr(d) for d in attrs["shape"])
    if len(shape) < x.rank:
        raise ctx.error(f"cannot broadcast {format_shape(x.shape)} to the lower rank {format_shape(shape)}")
    lead = len(shape) - x.rank
    for i, d in enumerate(x.shape):
        t = shape[lead + i]
        if t.bounds()[1] < 1:
            raise ctx.error(f"shape {format_shape(shape)}: dimension {lead + i} is {t}; dimensions must be positive")
        if d != ONE:
            ctx.equal(d, t, f"broadcast of {format_shape(x.shape)} to {format_shape(shape)}, dimension {lead + i}")
    return [TensorType(x.dtype, shape)]


@register(K.Reorder, out_dtype_of=0, high_rank="elementwise")
def reorder(attrs, ins, ctx):
    """A copy of x (oneDNN's Reorder; dyngraph tensors have one, dense,
    layout, so it changes neither shape nor dtype: TypeCast converts)."""
    return [ins[0]]


@register(K.GELU, attrs={"mode": AttrSpec("str", "erf", ("erf", "tanh"))}, dtypes=("float",), out_dtype_of=0,
          high_rank="elementwise")
def gelu(attrs, ins, ctx):
    """GELU, exact (erf) or tanh-approximated."""
    return [ins[0]]


@register(K.BiasAdd, inputs=(2, 2), attrs={"data_format": AttrSpec("str", "NXC", ("NXC", "NCX"))}, dtypes=("float",),
          input_names=("x", "bias"), same_dtypes=(0, 1), out_dtype_of=0, high_rank="lowering")
def bias_add(attrs, ins, ctx):
    """x + bias along the channel axis (last for NXC, 1 for NCX); bias is 1-D."""
    x, b = ins
    if b.rank != 1:
        raise ctx.error(f"bias must be 1-D, got rank {b.rank}")
    axis = normalize_axis(-1 if attrs["data_format"] == "NXC" else 1, x.rank, ctx, "channel axis")
    ctx.equal(b.shape[0], x.shape[axis], f"bias length vs channel dimension {axis}")
    return [x]
