"""Pooling: max_pool1d/2d (and max_pool2d_with_indices, its values),
avg_pool1d/2d, adaptive_avg_pool1d/2d. PyTorch pads both sides alike; its
ceil_mode is oneDNN's rounding_type="ceil" (a window starting past the
input is dropped, as in the MaxPool/AvgPool shape rules)."""

from __future__ import annotations

from ...op import OpKind as K
from .common import aten
from .registry import Unsupported, converter
from .spatial import batched, missing, per_axis, unbatch

_MAX = (aten.max_pool1d.default, aten.max_pool2d.default, aten.max_pool2d_with_indices.default)
_AVG = (aten.avg_pool1d.default, aten.avg_pool2d.default)
_ADAPTIVE = (aten.adaptive_avg_pool1d.default, aten.adaptive_avg_pool2d.default, aten._adaptive_avg_pool2d.default)


def _spatial_count(target) -> int:
    return 1 if "1d" in target._schema.name else 2


def _window(a, ns):
    kernel = per_axis(a.kernel_size, ns, "kernel_size")
    stride = per_axis(a.stride, ns, "stride") if a.stride not in (None, []) else kernel  # [] means the kernel
    pads = per_axis(a.padding, ns, "padding")
    return {"kernel": kernel, "strides": stride, "pads_begin": pads, "pads_end": pads, "data_format": "NCX",
            "rounding_type": "ceil" if a.ceil_mode else "floor"}


@converter(*_MAX)
def max_pool(cx, node, a):
    ns = _spatial_count(node.target)
    x, unbatched = batched(cx, a.self, ns)
    attrs = {**_window(a, ns), "dilations": per_axis(a.dilation, ns, "dilation")}
    y = unbatch(cx, cx.emit(K.MaxPool, [x], attrs), unbatched)
    return (y, missing(node, 1)) if node.target is aten.max_pool2d_with_indices.default else y


@converter(*_AVG)
def avg_pool(cx, node, a):
    ns = _spatial_count(node.target)
    if getattr(a, "divisor_override", None) is not None:
        raise Unsupported(f"divisor_override={a.divisor_override}")
    x, unbatched = batched(cx, a.self, ns)
    attrs = {**_window(a, ns), "exclude_pad": not a.count_include_pad}
    return unbatch(cx, cx.emit(K.AvgPool, [x], attrs), unbatched)


@converter(*_ADAPTIVE, keep=(aten.adaptive_avg_pool1d.default, aten.adaptive_avg_pool2d.default))
def adaptive_avg_pool(cx, node, a):
    ns = _spatial_count(node.target)
    sizes = per_axis(a.output_size, ns, "output_size")
    x, unbatched = batched(cx, a.self, ns)
    return unbatch(cx, cx.emit(K.AdaptiveAvgPool, [x], {"sizes": sizes, "data_format": "NCX"}), unbatched)
