"""What the spatial op families (convolution, pooling, channel norms,
interpolation) share: the data layouts of oneDNN Graph (``NCX``: batch,
channels, spatial axes; ``NXC``: batch, spatial axes, channels), the
attributes every sliding-window op has, and output sizes as dimension
expressions.

Spatial ops take 1-D, 2-D or 3-D spatial data: inputs of rank 3, 4 or 5.
"""

from __future__ import annotations

from typing import List, Sequence, Tuple

from ..symbolic import Expr, as_expr, format_shape, sym_max, sym_min
from .registry import AttrSpec, TensorType

DATA_FORMATS = ("NXC", "NCX")
AUTO_PADS = ("none", "same_upper", "same_lower", "valid")
MIN_RANK, MAX_RANK = 3, 5  # one, two or three spatial axes

DATA_FORMAT = AttrSpec("str", "NXC", DATA_FORMATS)

# the largest stride, dilation, kernel size, padding or group count: the kernels multiply and
# add them with positions (which are below 2^31 too) in int64, where no such sum can overflow
MAX_WINDOW = (1 << 31) - 1

# the deepest kernel of a convolution over 3 spatial axes: its lowering joins one view of the input
# per kernel depth (backend/lower/spatial.h kMaxKernelDepth), so the depth bounds the graph it builds
MAX_KERNEL_DEPTH = 4096

# the attributes of a sliding window (oneDNN's names; one entry per spatial axis)
WINDOW_ATTRS = {
    "strides": AttrSpec("ints", min=1, max=MAX_WINDOW),
    "pads_begin": AttrSpec("ints", min=0, max=MAX_WINDOW),
    # oneDNN allows a negative end padding: it crops the input's end (fewer outputs)
    "pads_end": AttrSpec("ints", min=-MAX_WINDOW, max=MAX_WINDOW),
    "auto_pad": AttrSpec("str", "none", AUTO_PADS),
    "data_format": DATA_FORMAT,
}

# what the shape rule resolves for the backend: the padding actually applied
# (auto_pad makes it depend on the input size), one expression per spatial axis
RESOLVED_PADS = {
    "resolved_pads_begin": AttrSpec("exprs"),
    "resolved_pads_end": AttrSpec("exprs"),
}


def channel_axis(rank: int, data_format: str) -> int:
    return 1 if data_format == "NCX" else rank - 1


def spatial_axes(rank: int, data_format: str) -> List[int]:
    return list(range(2, rank)) if data_format == "NCX" else list(range(1, rank - 1))


def check_spatial_rank(x: TensorType, ctx, what: str = "input", max_spatial: int = 3) -> int:
    """The number of spatial axes (1 to max_spatial: 3, or 2 for the ops without a 3-D lowering)."""
    if not MIN_RANK <= x.rank <= min(MAX_RANK, max_spatial + 2):
        if max_spatial == 2:
            raise ctx.error(f"{what} must have rank 3 (1-D spatial) or 4 (2-D spatial), got shape {format_shape(x.shape)}")
        raise ctx.error(f"{what} must have rank 3, 4 or 5 (1-D, 2-D or 3-D spatial), got shape {format_shape(x.shape)}")
    return x.rank - 2


def per_axis(attrs, name: str, n: int, ctx, default=None) -> Tuple[int, ...]:
    """Attribute `name`, one entry per spatial axis (an empty list means `default` on every axis)."""
    v = attrs[name]
    if not v and default is not None:
        return (default,) * n
    if len(v) != n:
        raise ctx.error(f"attribute {name!r} needs {n} entries (one per spatial axis), got {list(v)}")
    return tuple(v)


def static_dim(d: Expr, ctx, what: str) -> int:
    d = as_expr(d)
    if not d.is_const:
        raise ctx.error(f"{what} must be static, got {d}")
    return d.value


def window_out(size: Expr, kernel: int, stride: int, dilation: int, auto_pad: str, pad_begin: int, pad_end: int,
               ceil: bool = False) -> Tuple[Expr, Expr, Expr]:
    """(output size, resolved begin padding, resolved end padding) of one
    spatial axis of a sliding window, as expressions of the input size.

    - ``none``: ``(size + pads - dilated kernel) // stride + 1`` (``ceil``:
      rounded up, and a last window that would start past the input and its
      begin padding is dropped, as PyTorch and ONNX do);
    - ``valid``: no padding;
    - ``same_upper`` / ``same_lower``: ``ceil(size / stride)`` outputs, the
      padding that needs split in two halves, the odd one at the end (upper)
      or at the beginning (lower).
    """
    size = as_expr(size)
    dk = dilation * (kernel - 1) + 1
    if auto_pad in ("same_upper", "same_lower"):
        out = (size + (stride - 1)) // stride
        total = sym_max((out - 1) * stride + dk - size, 0)
        begin = total // 2 if auto_pad == "same_upper" else (total + 1) // 2
        return out, begin, total - begin
    if auto_pad == "valid":
        pad_begin = pad_end = 0
    span = size + (pad_begin + pad_end - dk)
    if not ceil:
        return span // stride + 1, Expr.const(pad_begin), Expr.const(pad_end)
    out = (span + (stride - 1)) // stride + 1
    # drop the last window when it starts at or past size + pad_begin: (out - 1) * stride - pad_begin >= size
    over = (out - 1) * stride - pad_begin - size  # >= 0: drop one
    drop = sym_min(sym_max(over + 1, 0), 1)
    return out - drop, Expr.const(pad_begin), Expr.const(pad_end)


def require_positive(out: Expr, ctx, what: str) -> None:
    """A size that is below 1 for every value of the dimensions is an error now
    (otherwise the runtime checks it for each binding)."""
    if as_expr(out).bounds()[1] < 1:
        raise ctx.error(f"{what} is {out}, below 1 for every input size: the input is too small")


def with_spatial(x: TensorType, data_format: str, channels: Expr, spatial: Sequence[Expr]) -> Tuple[Expr, ...]:
    """x's shape with its channel and spatial dimensions replaced."""
    shape = list(x.shape)
    shape[channel_axis(x.rank, data_format)] = as_expr(channels)
    for a, d in zip(spatial_axes(x.rank, data_format), spatial):
        shape[a] = as_expr(d)
    return tuple(shape)


def check_channel_vector(t: TensorType, channels: Expr, ctx, what: str) -> None:
    """A per-channel parameter: 1-D, one entry per channel."""
    if t.rank != 1:
        raise ctx.error(f"{what} must be 1-D (one value per channel), got shape {format_shape(t.shape)}")
    ctx.equal(t.shape[0], channels, f"{what} length vs the channel count")
