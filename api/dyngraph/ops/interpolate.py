"""Shape rule of Interpolate (oneDNN Graph's attributes and semantics), 1-D,
2-D and 3-D spatial (``linear`` is 1-D linear or 3-D trilinear, ``bilinear``
2-D; ``bicubic``, 2-D, is not a oneDNN mode: PyTorch's, Keys' cubic
convolution with a = -0.75 over 4 x 4 neighbours, indices clamped to the
input).

The output's spatial sizes are ``sizes`` (ints or dimension expressions) or
``floor(size * scale)`` for ``scales``. A scale that is a ratio of small
integers (2.0, 0.5, 1.5) gives an exact expression of a dynamic input size;
any other positive scale (0.809524) takes a static input size and gives
what oneDNN computes, ``trunc(f32(size) * f32(scale))`` in f32 arithmetic
(21 x 0.809524 -> 17). Source coordinates use the real size ratio
``scale = out / in``, as oneDNN does:

- ``half_pixel``: ``x_src = (x + 0.5) / scale - 0.5`` (linear; nearest takes
  ``floor((x + 0.5) / scale)``, PyTorch's ``nearest-exact`` and oneDNN's
  nearest);
- ``align_corners``: ``x_src = x * (in - 1) / (out - 1)`` (linear and bicubic);
- ``asymmetric`` (not a oneDNN mode; PyTorch's ``nearest``):
  ``floor(x / scale)`` (nearest only).

Linear modes clamp the source coordinate to the input (PyTorch's rule);
bicubic clamps the indices of its taps instead (PyTorch's rule too).
"""

from __future__ import annotations

from fractions import Fraction
import struct
from typing import Optional

from ..op import OpKind as K
from ..symbolic import Expr, as_expr
from .registry import AttrSpec, TensorType, register
from .spatial import DATA_FORMAT, channel_axis, check_spatial_rank, spatial_axes, with_spatial

MAX_SCALE_DENOMINATOR = 1000


def small_ratio(scale: float) -> Optional[Fraction]:
    """`scale` as p/q with q <= MAX_SCALE_DENOMINATOR, or None."""
    r = Fraction(scale).limit_denominator(MAX_SCALE_DENOMINATOR)
    return r if abs(float(r) - scale) <= 1e-9 * scale else None


def _f32(v: float) -> float:
    """v rounded to f32 (a product of two f32 values is exact in f64: rounded once, as in f32)."""
    return struct.unpack("f", struct.pack("f", v))[0]


def scaled_size(size, scale: float, ctx) -> Expr:
    """The output size of one spatial axis of `size` resized by `scale`."""
    if not scale > 0 or scale != scale or scale == float("inf"):
        raise ctx.error(f"scale {scale} must be positive and finite")
    size = as_expr(size)
    r = small_ratio(scale)
    if r is not None:
        return (size * r.numerator) // r.denominator
    if not size.is_const:
        raise ctx.error(f"scale {scale} is not a ratio of small integers and the size {size} is dynamic; "
                        "give the output sizes instead")
    out = int(_f32(_f32(size.value) * _f32(scale)))  # oneDNN: in f32, truncated
    if out < 1:
        raise ctx.error(f"scale {scale} of a size {size.value} gives an empty output")
    return Expr.const(out)


@register(
    K.Interpolate,
    attrs={
        "mode": AttrSpec("str", choices=("nearest", "linear", "bilinear", "bicubic")),
        "coordinate_transformation_mode": AttrSpec("str", "half_pixel", ("half_pixel", "align_corners", "asymmetric")),
        "sizes": AttrSpec("exprs", ()),
        "scales": AttrSpec("floats", (), finite=True),
        "data_format": DATA_FORMAT,
    },
    dtypes=("float",),
    out_dtype_of=0,
    high_rank="lowering",
)
def interpolate(attrs, ins, ctx):
    """Resize the spatial axes: nearest neighbour, (bi)linear or bicubic."""
    x = ins[0]
    n_sp = check_spatial_rank(x, ctx)
    mode, coord = attrs["mode"], attrs["coordinate_transformation_mode"]
    if mode != "nearest" and mode not in (("bilinear", "bicubic") if n_sp == 2 else ("linear",)):
        raise ctx.error(f"mode {mode!r} is for {'1-D or 3-D' if mode == 'linear' else '2-D'} data, "
                        f"the input has {n_sp} spatial axes")
    if mode == "nearest" and coord == "align_corners":
        raise ctx.error("coordinate_transformation_mode 'align_corners' is for linear modes")
    if mode != "nearest" and coord == "asymmetric":
        raise ctx.error("coordinate_transformation_mode 'asymmetric' is for mode 'nearest'")
    fmt = attrs["data_format"]
    axes = spatial_axes(x.rank, fmt)
    if attrs["sizes"]:
        if len(attrs["sizes"]) != n_sp:
            raise ctx.error(f"sizes {list(attrs['sizes'])} needs {n_sp} entries (one per spatial axis)")
        out = [as_expr(s) for s in attrs["sizes"]]
        for a, s in enumerate(out):
            if s.bounds()[1] < 1:
                raise ctx.error(f"size {s} of spatial axis {a} must be positive")
    elif attrs["scales"]:
        if len(attrs["scales"]) != n_sp:
            raise ctx.error(f"scales {list(attrs['scales'])} needs {n_sp} entries (one per spatial axis)")
        out = []
        out = [scaled_size(x.shape[ax], s, ctx) for ax, s in zip(axes, attrs["scales"])]
    else:
        raise ctx.error("either sizes or scales must be given")
    return [TensorType(x.dtype, with_spatial(x, fmt, x.shape[channel_axis(x.rank, fmt)], out))]
