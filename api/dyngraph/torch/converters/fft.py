"""Discrete Fourier transforms as products with the DFT matrix.

``torch.fft.fft`` / ``fft2`` / ``fftn``, their inverses and ``rfft`` / ``rfftn``
(and the ``_fft_c2c`` / ``_fft_r2c`` a decomposed program holds) along
dimensions of any size, dynamic ones included: along an axis of ``n`` the
transform is ``x @ (C - i s S)`` with ``C[j, k] = cos(2 pi (jk mod n) / n)``,
``S`` the sine and ``s`` +1 forward, -1 inverse (``T = -s S`` is the matrix
held). O(n^2) per axis where an FFT is O(n log n): fine for the sizes models
transform (FNet's sequence and width, at most a few thousand), not a
signal-processing FFT: an axis that may be longer than 8192 (a dynamic one
without a smaller max) runs in PyTorch. The matrices are constants where
``n`` is known, computed in the graph where it is a size expression; the
product ``jk`` is int64 before its modulo, so the angle is exact at every
size.

A real input costs two products along its first axis (its imaginary part is
known to be zero), and ``.real`` of a result reads the real part without
slicing it out (the imaginary part's products are then never computed), so
FNet's ``fftn(x).real`` over two axes is four products.
"""

from __future__ import annotations

import math

import numpy as np

from ...dtypes import DataType
from ...op import OpKind as K
from ...symbolic import Expr, as_expr
from .common import aten, norm_dim, plain
from .complex import from_parts, parts_of
from .pad import pad_axis
from .registry import Unsupported, complex_converter

F32, I64 = DataType.f32, DataType.i64
CONSTANT_UP_TO = 1024  # a known size's matrices as constants up to this (4 MB each)
LARGEST_AXIS = 8192  # an axis that may be longer runs in PyTorch (its matrices: 256 MiB each and more)


def _matrices(cx, n, sign):
    """``C`` and ``T = -sign S`` ([n, n] float32): the DFT matrix along an axis of ``n``
    is ``C + i T``."""
    if isinstance(n, int) and n <= CONSTANT_UP_TO:
        angle = 2 * np.pi * (np.outer(np.arange(n), np.arange(n)) % n) / n
        return cx.constant(np.cos(angle).astype(np.float32)), cx.constant((-sign * np.sin(angle)).astype(np.float32))
    j = cx.emit(K.Arange, [], {"start": 0, "end": n, "step": 1}, dtype=I64)
    jk = cx.emit(K.Multiply, [cx.reshape(j, (n, 1)), cx.reshape(j, (1, n))])
    size = cx.full(n, I64)
    jk = cx.emit(K.Subtract, [jk, cx.emit(K.Multiply, [cx.emit(K.FloorDivide, [jk, size]), size])])
    step = cx.emit(K.Divide, [cx.full(2 * math.pi, F32), cx.cast(size, F32)])
    angle = cx.emit(K.Multiply, [cx.cast(jk, F32), step])
    minus = cx.emit(K.Multiply, [angle, cx.full(-float(sign), F32)])  # (sin is odd)
    return cx.emit(K.Cos, [angle]), cx.emit(K.Sin, [minus])


def _along(cx, x, m, axis, rank):
    """``x`` times the symmetric ``m`` along ``axis``."""
    if axis == rank - 1:
        return cx.emit(K.MatMul, [x, m])
    if axis == rank - 2:
        return cx.emit(K.MatMul, [m, x])
    order = list(range(rank))
    order[axis], order[-1] = order[-1], order[axis]
    return cx.transpose(cx.emit(K.MatMul, [cx.transpose(x, order), m]), order)


def _dft(cx, arg, dims, sign, scale_mode, pads=None):
    """The transform of ``arg`` (real or complex) along ``dims`` (each first padded with
    zeros or cropped by ``pads[d]``): parts (re, im)."""
    shape = list(cx.shape_of(arg))
    rank = len(shape)
    if rank < 1:
        raise Unsupported("a transform of a 0-d tensor")
    if cx.is_complex(arg):
        re, im = parts_of(cx, arg)
    else:
        re, im = cx.cast(cx.tensor(arg), F32), None
    for d, k in (pads or {}).items():
        re = pad_axis(cx, re, d, 0, k, 0.0, F32)
        im = None if im is None else pad_axis(cx, im, d, 0, k, 0.0, F32)
        shape[d] = plain(as_expr(shape[d]) + k)
    if rank == 1:  # (MatMul takes rank >= 2)
        re = cx.reshape(re, [1] + shape)
        im = None if im is None else cx.reshape(im, [1] + shape)
    r = max(rank, 2)
    offset = r - rank
    count = 1
    for d in dims:
        n = shape[d]
        if as_expr(n).bounds()[1] > LARGEST_AXIS:
            raise Unsupported(f"an axis of up to {as_expr(n).bounds()[1]} entries: the DFT matrices are n^2 floats "
                              f"(dyngraph takes axes of at most {LARGEST_AXIS}; give the dimension a smaller max)")
        c, t = _matrices(cx, n, sign)
        ax = d + offset
        # (a + ib)(C + iT) = (aC - bT) + i(aT + bC)
        new_re, new_im = _along(cx, re, c, ax, r), _along(cx, re, t, ax, r)
        if im is not None:
            new_re = cx.emit(K.Subtract, [new_re, _along(cx, im, t, ax, r)])
            new_im = cx.emit(K.Add, [new_im, _along(cx, im, c, ax, r)])
        re, im = new_re, new_im
        count = plain(as_expr(count) * n)
    if scale_mode:
        k = cx.cast(cx.full(count, I64), F32) if isinstance(count, Expr) else cx.full(float(count), F32)
        if scale_mode == 1:
            k = cx.emit(K.Sqrt, [k])
        re = cx.emit(K.Divide, [re, k])
        im = cx.emit(K.Divide, [im, k])
    if rank == 1:
        re, im = cx.reshape(re, shape), cx.reshape(im, shape)
    return re, im


def _norm_mode(norm, forward: bool) -> int:
    """torch's norm string as _fft_c2c's normalization: 0 none, 1 by sqrt(n), 2 by n."""
    if norm in (None, "backward"):
        return 0 if forward else 2
    if norm == "ortho":
        return 1
    if norm == "forward":
        return 2 if forward else 0
    raise Unsupported(f"norm={norm!r}")


def _dims(cx, arg, dims, sizes):
    """The axes transformed and, per axis, how many zeros pad it (a negative count:
    entries cropped) to the length ``s`` / ``n`` asks for: a number known now."""
    rank, shape = cx.rank_of(arg), cx.shape_of(arg)
    if dims is None:
        dims = range(rank - len(sizes), rank) if sizes is not None else range(rank)
    dims = [norm_dim(d, rank) for d in ([dims] if isinstance(dims, int) else dims)]
    if len(set(dims)) != len(dims):
        raise Unsupported(f"an axis transformed twice: {dims}")
    pads = {}
    for d, n in zip(dims, sizes if sizes is not None else ()):
        if n is not None and n != -1:
            extra = as_expr(cx.size(n)) - as_expr(shape[d])
            if not extra.is_const:
                raise Unsupported(f"a transform length {n} that differs from the axis by a size expression")
            if extra.value:
                pads[d] = extra.value
    return dims, pads


def _onesided(cx, re, im, d):
    """The first n // 2 + 1 entries along ``d`` (rfft's half)."""
    half = plain(as_expr(cx.type(re).shape[d]) // 2 + 1)
    return tuple(cx.emit(K.Slice, [p], {"begin": [0], "end": [half], "axes": [d]}) for p in (re, im))


_FORWARD = {aten.fft_fft.default: True, aten.fft_fft2.default: True, aten.fft_fftn.default: True,
            aten.fft_ifft.default: False, aten.fft_ifft2.default: False, aten.fft_ifftn.default: False,
            aten.fft_rfft.default: True, aten.fft_rfft2.default: True, aten.fft_rfftn.default: True}
_ONE_DIM = (aten.fft_fft.default, aten.fft_ifft.default, aten.fft_rfft.default)
_TWO_DIM = (aten.fft_fft2.default, aten.fft_ifft2.default, aten.fft_rfft2.default)
_REAL = (aten.fft_rfft.default, aten.fft_rfft2.default, aten.fft_rfftn.default)


@complex_converter(*_FORWARD)
def fft(cx, node, a):
    forward = _FORWARD[node.target]
    if node.target in _ONE_DIM:
        dims, pads = _dims(cx, a.self, a.dim, None if a.n is None else [a.n])
    else:
        default = [-2, -1] if node.target in _TWO_DIM else None
        dims, pads = _dims(cx, a.self, a.dim if a.dim is not None else default, a.s)
    if node.target in _REAL and cx.is_complex(a.self):
        raise Unsupported("rfft of a complex tensor")
    re, im = _dft(cx, a.self, dims, 1 if forward else -1, _norm_mode(a.norm, forward), pads)
    if node.target in _REAL:
        re, im = _onesided(cx, re, im, dims[-1])
    return from_parts(cx, re, im)


@complex_converter(aten._fft_c2c.default)
def fft_c2c(cx, node, a):
    dims, _ = _dims(cx, a.self, a.dim, None)
    re, im = _dft(cx, a.self, dims, 1 if a.forward else -1, a.normalization)
    return from_parts(cx, re, im)


@complex_converter(aten._fft_r2c.default)
def fft_r2c(cx, node, a):
    dims, _ = _dims(cx, a.self, a.dim, None)
    re, im = _dft(cx, a.self, dims, 1, a.normalization)
    if a.onesided:
        re, im = _onesided(cx, re, im, dims[-1])
    return from_parts(cx, re, im)
