"""Shape rules of MaxPool, AvgPool (oneDNN Graph's attributes and
semantics), 1-D, 2-D and 3-D, and AdaptiveAvgPool (PyTorch's), 1-D and 2-D.

Windows never lie wholly in the padding: pads must be smaller than the
(dilated) kernel, and with ``rounding_type="ceil"`` a last window that
would start past the input is dropped (as PyTorch does).
"""

from __future__ import annotations

from ..op import OpKind as K
from .registry import AttrSpec, TensorType, register
from .spatial import (DATA_FORMAT, MAX_WINDOW, RESOLVED_PADS, WINDOW_ATTRS, channel_axis, check_spatial_rank, per_axis,
                      require_positive, spatial_axes, window_out, with_spatial)

_POOL_ATTRS = {
    **WINDOW_ATTRS,
    "kernel": AttrSpec("ints", min=1, max=MAX_WINDOW),
    "rounding_type": AttrSpec("str", "floor", ("floor", "ceil")),
}


def _pool(attrs, ins, ctx, dilations):
    x = ins[0]
    n_sp = check_spatial_rank(x, ctx)
    fmt = attrs["data_format"]
    kernel = per_axis(attrs, "kernel", n_sp, ctx)
    strides = per_axis(attrs, "strides", n_sp, ctx)
    dil = per_axis(attrs, "dilations", n_sp, ctx, 1) if dilations else (1,) * n_sp
    pb = per_axis(attrs, "pads_begin", n_sp, ctx, 0)
    pe = per_axis(attrs, "pads_end", n_sp, ctx, 0)
    ceil = attrs["rounding_type"] == "ceil"
    out, rb, re = [], [], []
    for a, ax in enumerate(spatial_axes(x.rank, fmt)):
        dk = dil[a] * (kernel[a] - 1) + 1
        if attrs["auto_pad"] == "none" and max(pb[a], pe[a]) >= dk:
            raise ctx.error(f"pads ({pb[a]}, {pe[a]}) of spatial axis {a} must be smaller than the window ({dk}): "
                            f"a window would lie wholly in the padding")
        size, b, e = window_out(x.shape[ax], kernel[a], strides[a], dil[a], attrs["auto_pad"], pb[a], pe[a], ceil)
        require_positive(size, ctx, f"output size of spatial axis {a}")
        out.append(size)
        rb.append(b)
        re.append(e)
    ctx.backend_attrs.update(resolved_pads_begin=tuple(rb), resolved_pads_end=tuple(re))
    return [TensorType(x.dtype, with_spatial(x, fmt, x.shape[channel_axis(x.rank, fmt)], out))]


@register(K.MaxPool, attrs={**_POOL_ATTRS, "dilations": AttrSpec("ints", (), min=1, max=MAX_WINDOW)}, resolved=RESOLVED_PADS,
          dtypes=("float",), out_dtype_of=0, high_rank="lowering")
def max_pool(attrs, ins, ctx):
    """The largest value of each window (padding never wins; NaN propagates)."""
    return _pool(attrs, ins, ctx, dilations=True)


@register(K.AvgPool, attrs={**_POOL_ATTRS, "exclude_pad": AttrSpec("bool")}, resolved=RESOLVED_PADS,
          dtypes=("float",), out_dtype_of=0, high_rank="lowering")
def avg_pool(attrs, ins, ctx):
    """The mean of each window: over its input elements (exclude_pad), or over
    its positions inside the padded input (padding counts as zeros)."""
    return _pool(attrs, ins, ctx, dilations=False)


@register(K.AdaptiveAvgPool, attrs={"sizes": AttrSpec("ints", min=1, max=MAX_WINDOW), "data_format": DATA_FORMAT},
          dtypes=("float",), out_dtype_of=0)
def adaptive_avg_pool(attrs, ins, ctx):
    """PyTorch's adaptive average pooling to `sizes` (one per spatial axis):
    output i of an axis of size L averages input [floor(i*L/n), ceil((i+1)*L/n))."""
    x = ins[0]
    n_sp = check_spatial_rank(x, ctx, max_spatial=2)
    fmt = attrs["data_format"]
    sizes = per_axis(attrs, "sizes", n_sp, ctx)
    return [TensorType(x.dtype, with_spatial(x, fmt, x.shape[channel_axis(x.rank, fmt)], sizes))]
