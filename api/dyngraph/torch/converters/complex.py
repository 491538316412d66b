"""Complex tensors, held as their float32 parts.

A complex64 value of torch shape ``S`` is a float32 logical tensor of shape
``S + [2]``, real part first (``torch.view_as_real``'s layout), wrapped in
:class:`~.registry.Complex` so that no real-valued converter takes it for a
tensor. The ops complex rotary embeddings are written with (Llama 4's and
DeepSeek-V2's ``torch.polar`` / ``view_as_complex`` / ``view_as_real``) and
the views around them convert here; any other op that reads or makes a
complex tensor runs in PyTorch, fed the parts as a complex tensor.

A dimension argument counts in torch's rank, so it names the same axis of
the parts; views reshape to torch's shape plus the axis of 2.
"""

from __future__ import annotations

import torch

from ...dtypes import DataType
from ...op import OpKind as K
from ...symbolic import as_expr
from .common import aten, is_call, norm_dim, number
from .layout import selected, slice_of
from .registry import Complex, Unsupported, complex_converter


F32 = DataType.f32


def _parts_shape(cx) -> tuple:
    """torch's shape of the node's result, plus the axis of the parts."""
    return tuple(cx.out_shape()) + (2,)


def _split(cx, z):
    """The real and imaginary parts of ``z`` ([..., 2]), each [..., 1]."""
    d = cx.type(z).rank - 1
    re = cx.emit(K.Slice, [z], {"begin": [0], "end": [1], "axes": [d]})
    im = cx.emit(K.Slice, [z], {"begin": [1], "end": [2], "axes": [d]})
    return re, im


def _join(cx, re, im):
    """Parts [..., 1] (broadcast to one shape) as one [..., 2]."""
    if not _same_shape(cx.type(re).shape, cx.type(im).shape):
        want = tuple(cx.out_shape()) + (1,)
        re = cx.emit(K.Expand, [re], {"shape": list(want)})
        im = cx.emit(K.Expand, [im], {"shape": list(want)})
    return Complex(cx.emit(K.Concat, [re, im], {"axis": cx.type(re).rank - 1}))


def _real_operand(cx, arg):
    """A real tensor argument as [..., 1] (to broadcast against parts), or a real number."""
    n = number(arg)
    if n is not None:
        if isinstance(n, complex):
            raise Unsupported("a complex number operand")
        return float(n)
    return cx.reshape(cx.cast(cx.tensor(arg), F32), tuple(cx.shape_of(arg)) + (1,))


@complex_converter(aten.view_as_complex.default)
def view_as_complex(cx, node, a):
    x = cx.tensor(a.self)
    if x.dtype is not F32:
        raise Unsupported(f"parts of dtype {x.dtype}")
    return Complex(x)


@complex_converter(aten.view_as_real.default)
def view_as_real(cx, node, a):
    return cx.complex(a.self)


@complex_converter(aten.polar.default)
def polar(cx, node, a):
    """abs * (cos(angle) + i sin(angle))."""
    angle = cx.cast(cx.tensor(a.angle), F32)
    shape = tuple(cx.shape_of(a.angle)) + (1,)
    re = cx.reshape(cx.emit(K.Cos, [angle]), shape)
    im = cx.reshape(cx.emit(K.Sin, [angle]), shape)
    if not (_is_ones(cx, a.abs) and _same_shape(cx.shape_of(a.abs), cx.shape_of(a.angle))):
        r = cx.reshape(cx.cast(cx.tensor(a.abs), F32), tuple(cx.shape_of(a.abs)) + (1,))
        re, im = cx.emit(K.Multiply, [re, r]), cx.emit(K.Multiply, [im, r])
    return _join(cx, re, im)


def _same_shape(a, b) -> bool:
    return len(a) == len(b) and all(as_expr(x) == as_expr(y) for x, y in zip(a, b))


def _is_ones(cx, arg) -> bool:
    """``ones_like(x)`` / ``full_like(x, 1)`` / ``ones(...)``: a factor that changes nothing."""
    if is_call(arg, aten.ones_like.default, aten.ones.default):
        return True
    return is_call(arg, aten.full_like.default, aten.full.default) and number(arg.args[1]) == 1


@complex_converter(aten.complex.default)
def complex_(cx, node, a):
    re = cx.reshape(cx.cast(cx.tensor(a.real), F32), tuple(cx.shape_of(a.real)) + (1,))
    im = cx.reshape(cx.cast(cx.tensor(a.imag), F32), tuple(cx.shape_of(a.imag)) + (1,))
    return _join(cx, re, im)


def parts_of(cx, arg):
    """The real and imaginary parts of a complex argument at torch's shape (the
    imaginary None where it is known to be zero)."""
    v = cx.value(arg)
    if isinstance(v, Complex) and v.parts is not None:
        return v.parts
    return tuple(cx.reshape(p, cx.shape_of(arg)) for p in _split(cx, cx.complex(arg)))


def from_parts(cx, re, im):
    """A complex value of the node's shape from float32 parts at torch's shape (``im``
    None: zero)."""
    shape = tuple(cx.out_shape())
    one = shape + (1,)
    im_ = cx.full(0.0, F32, one) if im is None else cx.reshape(im, one)
    return Complex(cx.emit(K.Concat, [cx.reshape(re, one), im_], {"axis": len(shape)}), (re, im))


@complex_converter(aten.real.default)
def real(cx, node, a):
    return cx.reshape(parts_of(cx, a.self)[0], cx.out_shape())


@complex_converter(aten.imag.default)
def imag(cx, node, a):
    im = parts_of(cx, a.self)[1]
    return cx.full(0.0, F32, cx.out_shape()) if im is None else cx.reshape(im, cx.out_shape())


@complex_converter(aten.abs.default)
def abs_(cx, node, a):
    """sqrt(re^2 + im^2) (torch's hypot does not overflow where re^2 does: |z| above about 1.8e19)."""
    z = cx.complex(a.self)
    sq = cx.emit(K.Multiply, [z, z])
    re, im = _split(cx, sq)
    return cx.reshape(cx.emit(K.Sqrt, [cx.emit(K.Add, [re, im])]), cx.out_shape())


@complex_converter(aten.mul.Tensor, aten.mul.Scalar)
def mul(cx, node, a):
    """(a + bi)(c + di) = (ac - bd) + (ad + bc)i; a real factor scales both parts."""
    if cx.is_complex(a.self) and cx.is_complex(a.other):
        x_re, x_im = _split(cx, cx.complex(a.self))
        y_re, y_im = _split(cx, cx.complex(a.other))
        re = cx.emit(K.Subtract, [cx.emit(K.Multiply, [x_re, y_re]), cx.emit(K.Multiply, [x_im, y_im])])
        im = cx.emit(K.Add, [cx.emit(K.Multiply, [x_re, y_im]), cx.emit(K.Multiply, [x_im, y_re])])
        return _join(cx, re, im)
    z, r = (a.self, a.other) if cx.is_complex(a.self) else (a.other, a.self)
    parts = cx.complex(z)
    f = _real_operand(cx, r)
    if isinstance(f, float):
        if f == 1.0:
            return Complex(parts)
        f = cx.full(f, F32)
    y = cx.emit(K.Multiply, [parts, f])
    return Complex(_broadcast(cx, y))


def _broadcast(cx, y):
    """``y`` at the result's shape (a real operand may have broadcast the parts)."""
    want = tuple(cx.out_shape()) + (2,)
    if _same_shape(cx.type(y).shape, want):
        return y
    return cx.emit(K.Expand, [y], {"shape": list(want)})


def _add_sub(cx, a, kind):
    alpha = number(a.alpha) if a.alpha is not None else 1
    if alpha is None or isinstance(alpha, complex):
        raise Unsupported(f"alpha {a.alpha!r}")

    def scaled(v):
        return v if alpha == 1 else cx.emit(K.Multiply, [v, cx.full(float(alpha), F32)])

    if cx.is_complex(a.self) and cx.is_complex(a.other):
        return Complex(_broadcast(cx, cx.emit(kind, [cx.complex(a.self), scaled(cx.complex(a.other))])))
    if cx.is_complex(a.self):  # complex +- real: the real part only
        re, im = _split(cx, cx.complex(a.self))
        r = _real_operand(cx, a.other)
        r = cx.full(r, F32) if isinstance(r, float) else r
        return _join(cx, cx.emit(kind, [re, scaled(r)]), im)
    raise Unsupported("a real tensor plus or minus a complex one")


@complex_converter(aten.add.Tensor, aten.add.Scalar)
def add(cx, node, a):
    return _add_sub(cx, a, K.Add)


@complex_converter(aten.sub.Tensor, aten.sub.Scalar)
def sub(cx, node, a):
    return _add_sub(cx, a, K.Subtract)


@complex_converter(aten.neg.default)
def neg(cx, node, a):
    return Complex(cx.emit(K.Multiply, [cx.complex(a.self), cx.full(-1.0, F32)]))


@complex_converter(aten._conj.default, aten.conj_physical.default, aten.resolve_conj.default)
def conj(cx, node, a):
    z = cx.complex(a.self)
    if node.target is aten.resolve_conj.default:
        return Complex(z)
    re, im = _split(cx, z)
    return _join(cx, re, cx.emit(K.Multiply, [im, cx.full(-1.0, F32)]))


# ------------------------------------------------------------------ views
@complex_converter(
    aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.view_copy.default,
    aten.unsqueeze.default, aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims,
    aten.flatten.using_ints, aten.unflatten.int,
)
def reshape(cx, node, a):
    return Complex(cx.reshape(cx.complex(node.args[0]), _parts_shape(cx)))


@complex_converter(aten.clone.default, aten.contiguous.default, aten.alias.default, aten.detach.default,
                   aten.lift_fresh_copy.default, aten.alias_copy.default, aten.detach_copy.default)
def identity(cx, node, a):
    return Complex(cx.complex(a.self))


@complex_converter(aten._to_copy.default, aten.to.dtype, aten.to.dtype_layout, aten.to.device, aten.type_as.default)
def to_copy(cx, node, a):
    out = cx.out
    if out.dtype is torch.complex64 and not cx.is_complex(node.args[0]):  # a real tensor as complex
        return from_parts(cx, cx.cast(cx.tensor(node.args[0]), F32), None)
    if not (out.dtype.is_complex and cx.is_complex(node.args[0])):
        raise Unsupported(f"a cast between complex and {out.dtype}")
    return Complex(cx.complex(node.args[0]))


@complex_converter(aten.permute.default, aten.permute_copy.default)
def permute(cx, node, a):
    rank = cx.rank_of(a.self)
    return Complex(cx.transpose(cx.complex(a.self), [norm_dim(d, rank) for d in a.dims] + [rank]))


@complex_converter(aten.transpose.int)
def transpose(cx, node, a):
    rank = cx.rank_of(a.self)
    order = list(range(rank + 1))
    d0, d1 = norm_dim(a.dim0, rank), norm_dim(a.dim1, rank)
    order[d0], order[d1] = order[d1], order[d0]
    return Complex(cx.transpose(cx.complex(a.self), order))


@complex_converter(aten.slice.Tensor, aten.slice_copy.Tensor)
def slice_(cx, node, a):
    return Complex(slice_of(cx, a, cx.complex(a.self)))


@complex_converter(aten.select.int, aten.select_copy.int)
def select(cx, node, a):
    return Complex(cx.reshape(selected(cx, a, cx.complex(a.self)), _parts_shape(cx)))


@complex_converter(aten.expand.default, aten.expand_copy.default, aten.broadcast_to.default)
def expand(cx, node, a):
    return Complex(_broadcast(cx, cx.complex(a.self)))


@complex_converter(aten.cat.default, aten.concat.default)
def cat(cx, node, a):
    parts = [cx.complex(t) for t in a.tensors]
    if len(parts) == 1:
        return Complex(parts[0])
    return Complex(cx.emit(K.Concat, parts, {"axis": norm_dim(a.dim, cx.out.dim())}))
