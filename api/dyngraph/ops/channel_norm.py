"""Shape rules of the normalizations along the channel axis of spatial data
(oneDNN Graph's BatchNormInference and GroupNorm). Instance normalization is
GroupNorm with one group per channel.

Inputs have rank 2 to 4: ``[N, C]``, or ``[N, C, X...]`` (NCX) /
``[N, X..., C]`` (NXC) with one or two spatial axes.
"""

from __future__ import annotations

from ..op import OpKind as K
from ..symbolic import format_shape
from .registry import AttrSpec, register
from .spatial import DATA_FORMAT, channel_axis, check_channel_vector


def _channels(x, fmt: str, ctx):
    if not 2 <= x.rank <= 4:
        raise ctx.error(f"src must have rank 2 to 4 ([N, C] and one or two spatial axes), got {format_shape(x.shape)}")
    return x.shape[channel_axis(x.rank, fmt)]


@register(K.BatchNormInference, inputs=(5, 5),
          attrs={"epsilon": AttrSpec("float", min=0.0, finite=True), "data_format": DATA_FORMAT},
          dtypes=("float",), input_names=("src", "gamma", "beta", "mean", "variance"), out_dtype_of=0)
def batch_norm_inference(attrs, ins, ctx):
    """dst = (src - mean[c]) / sqrt(variance[c] + epsilon) * gamma[c] + beta[c], c the channel."""
    x = ins[0]
    c = _channels(x, attrs["data_format"], ctx)
    for t, name in zip(ins[1:], ("gamma", "beta", "mean", "variance")):
        check_channel_vector(t, c, ctx, name)
    return [x]


@register(K.GroupNorm, inputs=(1, 3),
          attrs={
              "groups": AttrSpec("int", min=1),
              "keep_stats": AttrSpec("bool", False),
              "use_affine": AttrSpec("bool", True),
              "epsilon": AttrSpec("float", 1e-5, min=0.0, finite=True),
              "data_format": DATA_FORMAT,
          },
          dtypes=("float",), input_names=("src", "gamma", "beta"), out_dtype_of=0)
def group_norm(attrs, ins, ctx):
    """The channels split into `groups` consecutive groups; each group of each
    batch element is normalized over its channels and spatial positions
    (mean and biased variance), then scaled by gamma[c] and shifted by beta[c]."""
    x = ins[0]
    c = _channels(x, attrs["data_format"], ctx)
    groups = attrs["groups"]
    if attrs["keep_stats"]:
        raise ctx.error("keep_stats=True is not supported (inference only)")
    if c.is_const and c.value % groups:
        raise ctx.error(f"the channel count ({c.value}) is not divisible by groups ({groups})")
    if not c.is_const:
        ctx.equal(c % groups, 0, f"the channel count modulo groups ({groups})")
    if attrs["use_affine"]:
        if len(ins) != 3:
            raise ctx.error(f"use_affine=True needs gamma and beta inputs, got {len(ins) - 1} of them")
        check_channel_vector(ins[1], c, ctx, "gamma")
        check_channel_vector(ins[2], c, ctx, "beta")
    elif len(ins) != 1:
        raise ctx.error("use_affine=False takes only the src tensor")
    return [x]
