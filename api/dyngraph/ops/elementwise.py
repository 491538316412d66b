"""Shape rules of elementwise ops: binary with numpy broadcasting, unary, BiasAdd."""

from __future__ import annotations

from ..dtypes import DataType
from ..op import OpKind as K
from .common import broadcast_shapes, normalize_axis, require_float, same_dtype
from .registry import AttrSpec, TensorType, register

UNARY_FLOAT = (K.ReLU, K.SiLU, K.Sigmoid, K.Tanh, K.Exp, K.Log, K.Sqrt, K.Square, K.Abs, K.Neg, K.Sin, K.Cos)
_BROADCAST = {"auto_broadcast": AttrSpec("str", "numpy", ("numpy", "none"))}


def _broadcast(attrs, ins, ctx):
    """Elementwise a (op) b with numpy broadcasting; both inputs share one dtype."""
    a, b = ins
    dt = same_dtype(ins, ctx)
    if attrs["auto_broadcast"] == "none":
        if a.rank != b.rank:
            raise ctx.error(f"auto_broadcast='none' needs equal shapes, got ranks {a.rank} and {b.rank}")
        shape = tuple(ctx.equal(x, y, f"dimension {i}") for i, (x, y) in enumerate(zip(a.shape, b.shape)))
    else:
        shape = broadcast_shapes(a.shape, b.shape, ctx)
    return [TensorType(dt, shape)]


@register((K.Add, K.Multiply, K.Maximum, K.Minimum), inputs=(2, 2), attrs=_BROADCAST, same_dtypes=(0, 1), out_dtype_of=0)
def binary(attrs, ins, ctx):
    """Elementwise a (op) b with numpy broadcasting: any dtype (on bool, Add is
    logical or and Multiply logical and, as in numpy; i32 wraps around on overflow)."""
    return _broadcast(attrs, ins, ctx)


@register(K.Subtract, inputs=(2, 2), attrs=_BROADCAST, dtypes=("nonbool",), same_dtypes=(0, 1), out_dtype_of=0)
def subtract(attrs, ins, ctx):
    """a - b with numpy broadcasting; not on bool (as in numpy)."""
    if same_dtype(ins, ctx) is DataType.boolean:
        raise ctx.dtype_error("Subtract is not defined on bool tensors")
    return _broadcast(attrs, ins, ctx)


@register(K.Divide, inputs=(2, 2), attrs=_BROADCAST, dtypes=("float",), same_dtypes=(0, 1), out_dtype_of=0)
def divide(attrs, ins, ctx):
    """a / b with numpy broadcasting; floating point only (no integer division)."""
    same_dtype(ins, ctx)
    require_float(ins[0], ctx, "input of Divide (no integer division)")
    return _broadcast(attrs, ins, ctx)


@register(UNARY_FLOAT, dtypes=("float",), out_dtype_of=0)
def unary(attrs, ins, ctx):
    """y = f(x), same shape and dtype; x is floating point."""
    require_float(ins[0], ctx)
    return [ins[0]]


@register(K.GELU, attrs={"mode": AttrSpec("str", "erf", ("erf", "tanh"))}, dtypes=("float",), out_dtype_of=0)
def gelu(attrs, ins, ctx):
    """GELU, exact (erf) or tanh-approximated."""
    require_float(ins[0], ctx)
    return [ins[0]]


@register(K.BiasAdd, inputs=(2, 2), attrs={"data_format": AttrSpec("str", "NXC", ("NXC", "NCX"))}, dtypes=("float",),
          input_names=("x", "bias"), same_dtypes=(0, 1), out_dtype_of=0)
def bias_add(attrs, ins, ctx):
    """x + bias along the channel axis (last for NXC, 1 for NCX); bias is 1-D."""
    x, b = ins
    same_dtype(ins, ctx)
    require_float(x, ctx)
    if b.rank != 1:
        raise ctx.error(f"bias must be 1-D, got rank {b.rank}")
    axis = normalize_axis(-1 if attrs["data_format"] == "NXC" else 1, x.rank, ctx, "channel axis")
    ctx.equal(b.shape[0], x.shape[axis], f"bias length vs channel dimension {axis}")
    return [x]
