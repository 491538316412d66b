"""Shape rules of SoftMax, LayerNorm and RMSNorm."""

from __future__ import annotations

from ..op import OpKind as K
from ..symbolic import format_shape
from .common import normalize_axis
from .registry import ALL_INPUTS, AttrSpec, TensorType, register


@register(K.SoftMax, attrs={"axis": AttrSpec("int", -1, axis_of=0)}, dtypes=("float",), out_dtype_of=0,
          high_rank="lowering")
def softmax(attrs, ins, ctx):
    """softmax along `axis` (default: the last)."""
    normalize_axis(attrs["axis"], ins[0].rank, ctx)
    return [ins[0]]


def _check_affine(x: TensorType, params, begin: int, ctx, names) -> None:
    norm_shape = x.shape[begin:]
    for name, p in zip(names, params):
        if p.rank != len(norm_shape):
            raise ctx.error(
                f"{name} must have the normalized shape {format_shape(norm_shape)}, got {format_shape(p.shape)}"
            )
        for i, (d, e) in enumerate(zip(p.shape, norm_shape)):
            ctx.equal(d, e, f"{name} dimension {i}")


@register(
    K.LayerNorm,
    inputs=(1, 3),
    attrs={
        "begin_norm_axis": AttrSpec("int", -1, axis_of=0),
        "use_affine": AttrSpec("bool", True),
        "epsilon": AttrSpec("float", 1e-5, min=0.0, finite=True),
        "keep_stats": AttrSpec("bool", False),
    },
    dtypes=("float",),
    input_names=("x", "gamma", "beta"),
    same_dtypes=ALL_INPUTS,
    out_dtype_of=0,
    high_rank="lowering",
)
def layer_norm(attrs, ins, ctx):
    """(x - mean) / sqrt(var + eps) over the axes from begin_norm_axis, then * gamma + beta."""
    x = ins[0]
    begin = normalize_axis(attrs["begin_norm_axis"], x.rank, ctx, "begin_norm_axis")
    if attrs["keep_stats"]:
        raise ctx.error("keep_stats=True is not supported (inference only)")
    if attrs["use_affine"]:
        if len(ins) != 3:
            raise ctx.error(f"use_affine=True needs gamma and beta inputs, got {len(ins) - 1} of them")
        _check_affine(x, ins[1:], begin, ctx, ("gamma", "beta"))
    elif len(ins) != 1:
        raise ctx.error("use_affine=False takes only the input tensor")
    return [x]


@register(
    K.RMSNorm,
    inputs=(1, 2),
    attrs={
        "begin_norm_axis": AttrSpec("int", -1, axis_of=0),
        "epsilon": AttrSpec("float", 1e-6, min=0.0, finite=True),
    },
    dtypes=("float",),
    input_names=("x", "gamma"),
    same_dtypes=ALL_INPUTS,
    out_dtype_of=0,
    high_rank="lowering",
)
def rms_norm(attrs, ins, ctx):
    """x / sqrt(mean(x^2) + eps) over the axes from begin_norm_axis, then * gamma."""
    x = ins[0]
    begin = normalize_axis(attrs["begin_norm_axis"], x.rank, ctx, "begin_norm_axis")
    if len(ins) == 2:
        _check_affine(x, ins[1:], begin, ctx, ("gamma",))
    return [x]
