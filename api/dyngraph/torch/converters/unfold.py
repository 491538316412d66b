"""``F.unfold`` (``aten.im2col``): the sliding blocks of an image as columns, and
``F.fold`` (``aten.col2im``): columns summed back into an image.

unfold: each kernel offset (i, j) is one strided slice of the zero-padded input,
[N, C, OH, OW]; the kh * kw slices side by side are [N, C, kh * kw, OH * OW], which is
torch's [N, C * kh * kw, L] (column c * kh * kw + i * kw + j). Kernels are small
(ConvBERT's span attention: 9 x 1), so that is a handful of slices and one
concatenation; sizes may be dynamic (OH = (H + 2 ph - dh (kh - 1) - 1) // sh + 1).

fold: blocks that tile the image (stride = kernel, MobileViT's patches) are a reshape
and a permutation; overlapping blocks of stride 1 are each offset's block padded to
its place in the image and summed. Other strides run in PyTorch.
"""

from __future__ import annotations

from ...op import OpKind as K
from ...symbolic import as_expr
from .common import aten, plain
from .pad import pad_axis
from .registry import Unsupported, converter
from .spatial import batched, per_axis

MAX_OFFSETS = 64  # kernel positions (one slice each)


def _window(a):
    """(kernel, dilation, padding, stride), each (rows, columns)."""
    kh, kw = per_axis(a.kernel_size, 2, "kernel_size")
    dh, dw = per_axis(a.dilation, 2, "dilation")
    ph, pw = per_axis(a.padding, 2, "padding")
    sh, sw = per_axis(a.stride, 2, "stride")
    if kh * kw > MAX_OFFSETS:
        raise Unsupported(f"a {kh} x {kw} kernel ({kh * kw} slices)")
    if min(kh, kw, dh, dw, sh, sw) < 1 or min(ph, pw) < 0:
        raise Unsupported("kernel, dilation and stride of at least 1, padding of at least 0")
    return (kh, kw), (dh, dw), (ph, pw), (sh, sw)


@converter(aten.im2col.default, keep=True)
def im2col(cx, node, a):
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = _window(a)
    dt = cx.out_dtype()
    x, _ = batched(cx, a.self, 2)
    for d, p in ((2, ph), (3, pw)):
        if p:
            x = pad_axis(cx, x, d, p, p, 0, dt)
    n, c, h, w = (as_expr(s) for s in cx.type(x).shape)
    oh, ow = (h - dh * (kh - 1) - 1) // sh + 1, (w - dw * (kw - 1) - 1) // sw + 1
    cols = []
    for i in range(kh):
        for j in range(kw):
            block = cx.emit(K.Slice, [x], {"begin": [i * dh, j * dw],
                                           "end": [plain(i * dh + sh * (oh - 1) + 1), plain(j * dw + sw * (ow - 1) + 1)],
                                           "axes": [2, 3], "steps": [sh, sw]})
            cols.append(cx.reshape(block, (plain(n), plain(c), 1, plain(oh * ow))))
    y = cols[0] if len(cols) == 1 else cx.emit(K.Concat, cols, {"axis": 2})
    return cx.reshape(y, cx.out_shape())


@converter(aten.col2im.default, keep=True)
def col2im(cx, node, a):
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = _window(a)
    dt = cx.out_dtype()
    out = [as_expr(d) for d in cx.out_shape()]  # [N, C, H, W] or [C, H, W]
    if len(out) == 3:
        out = [as_expr(1)] + out
    n, c, h, w = out
    cols = cx.cast(cx.tensor(a.self), dt)
    if (sh, sw) == (kh, kw) and (dh, dw) == (1, 1) and (ph, pw) == (0, 0):  # tiles: a permutation
        oh, ow = h // kh, w // kw
        if not (oh * kh - h).is_const or (oh * kh - h).value or not (ow * kw - w).is_const or (ow * kw - w).value:
            raise Unsupported("tiles that do not cover the image")
        y = cx.reshape(cols, tuple(plain(d) for d in (n, c, kh, kw, oh, ow)))
        y = cx.transpose(y, (0, 1, 4, 2, 5, 3))
        return cx.reshape(y, cx.out_shape())
    if (sh, sw) != (1, 1):
        raise Unsupported(f"fold with stride {(sh, sw)} and kernel {(kh, kw)}")
    oh, ow = h + 2 * ph - dh * (kh - 1), w + 2 * pw - dw * (kw - 1)
    blocks = cx.reshape(cols, tuple(plain(d) for d in (n, c, kh * kw, oh, ow)))
    total = None
    for i in range(kh):
        for j in range(kw):
            k = i * kw + j
            b = cx.emit(K.Slice, [blocks], {"begin": [k], "end": [k + 1], "axes": [2]})
            b = cx.reshape(b, tuple(plain(d) for d in (n, c, oh, ow)))
            b = pad_axis(cx, b, 2, i * dh, dh * (kh - 1 - i), 0, dt)  # to its place in the padded image
            b = pad_axis(cx, b, 3, j * dw, dw * (kw - 1 - j), 0, dt)
            total = b if total is None else cx.emit(K.Add, [total, b])
    for d, p in ((2, ph), (3, pw)):
        if p:
            total = pad_axis(cx, total, d, -p, -p, 0, dt)
    return cx.reshape(total, cx.out_shape())
