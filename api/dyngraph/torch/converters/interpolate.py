"""Interpolation: upsample_nearest1d/2d (PyTorch's "nearest": asymmetric
coordinates), _upsample_nearest_exact1d/2d ("nearest-exact": half-pixel),
upsample_linear1d / upsample_bilinear2d and upsample_bicubic2d (half-pixel or
align_corners).

The output sizes are the node's (expressions of the input's). Interpolate
maps coordinates by the real size ratio, PyTorch by 1 / scale_factor when
one is given: they agree when the scale factor is an integer; other scale
factors run in PyTorch. upsample_bicubic2d is kept whole (torch's
decomposition computes its coordinates with symbolic floats when a size is
dynamic)."""

from __future__ import annotations

from ...op import OpKind as K
from .common import aten
from .registry import Unsupported, converter
from .spatial import batched, unbatch

_NEAREST = (aten.upsample_nearest1d.vec, aten.upsample_nearest2d.vec, aten.upsample_nearest1d.default,
            aten.upsample_nearest2d.default)
_NEAREST_EXACT = (aten._upsample_nearest_exact1d.vec, aten._upsample_nearest_exact2d.vec,
                  aten._upsample_nearest_exact1d.default, aten._upsample_nearest_exact2d.default)
_LINEAR = (aten.upsample_linear1d.vec, aten.upsample_bilinear2d.vec, aten.upsample_linear1d.default,
           aten.upsample_bilinear2d.default)


def _scales(node, a, ns):
    """The scale factors torch maps coordinates with (None per axis when it uses the sizes)."""
    if node.target._overloadname == "vec":
        sf = a.scale_factors
        return list(sf) if sf is not None and a.output_size is None else [None] * ns
    names = ["scales"] if ns == 1 else ["scales_h", "scales_w"]
    return [getattr(a, n, None) for n in names]


def _src(a):
    return a.input if hasattr(a, "input") else a.self


def _interpolate(cx, node, a, mode, coord):
    x_arg = _src(a)
    ns = cx.rank_of(x_arg) - 2
    if ns not in (1, 2):
        raise Unsupported(f"interpolation of rank {ns + 2}")
    out_sp = cx.out_shape()[2:]
    for s in _scales(node, a, ns):
        if s is not None and not float(s).is_integer():
            raise Unsupported(f"scale factor {s}: PyTorch maps coordinates by 1 / {s}, not by the size ratio")
    x, unbatched = batched(cx, x_arg, ns)
    attrs = {"mode": mode, "sizes": list(out_sp), "coordinate_transformation_mode": coord, "data_format": "NCX"}
    return unbatch(cx, cx.emit(K.Interpolate, [cx.cast(x, cx.out_dtype())], attrs), unbatched)


@converter(*_NEAREST, keep=(aten.upsample_nearest1d.vec, aten.upsample_nearest2d.vec))
def upsample_nearest(cx, node, a):
    return _interpolate(cx, node, a, "nearest", "asymmetric")


@converter(*_NEAREST_EXACT, keep=(aten._upsample_nearest_exact1d.vec, aten._upsample_nearest_exact2d.vec))
def upsample_nearest_exact(cx, node, a):
    return _interpolate(cx, node, a, "nearest", "half_pixel")


@converter(*_LINEAR, keep=(aten.upsample_linear1d.vec, aten.upsample_bilinear2d.vec))
def upsample_linear(cx, node, a):
    ns = cx.rank_of(_src(a)) - 2
    coord = "align_corners" if a.align_corners else "half_pixel"
    return _interpolate(cx, node, a, "linear" if ns == 1 else "bilinear", coord)


@converter(aten.upsample_bicubic2d.vec, aten.upsample_bicubic2d.default, keep=(aten.upsample_bicubic2d.vec,))
def upsample_bicubic(cx, node, a):
    return _interpolate(cx, node, a, "bicubic", "align_corners" if a.align_corners else "half_pixel")
