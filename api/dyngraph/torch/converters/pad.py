"""constant_pad_nd (``F.pad`` with mode "constant"): pads of sizes known at
compile become slices (negative pads) and a concatenation with filled
blocks; a pad that is a size expression (Mamba2 pads its sequence up to a
multiple of the chunk length, by an amount that may be 0 or negative at
run time) becomes a Gather of the input at ``arange(-begin, length + end)``
with the positions outside the input replaced by the fill value, correct for
any sign of the pads and never a zero-size tensor."""

from __future__ import annotations

from ...dtypes import DataType
from ...op import OpKind as K
from ...symbolic import Expr, as_expr
from .common import aten, number, plain
from .registry import Unsupported, converter

I64 = DataType.i64


def pad_axis(cx, x, d, begin: int, end: int, value, dt):
    """Pad (or crop, for negative sizes) axis ``d`` by numbers known now."""
    shape = list(cx.type(x).shape)
    length = as_expr(shape[d])
    lo, hi = max(-begin, 0), length - max(-end, 0)
    if lo or end < 0:
        x = cx.emit(K.Slice, [x], {"begin": [lo], "end": [hi.value if hi.is_const else hi], "axes": [d]})
    parts = [x]
    for n, where in ((begin, 0), (end, 1)):
        if n > 0:
            block = list(cx.type(x).shape)
            block[d] = n
            fill = cx.full(value, dt, [b.value if isinstance(b, Expr) and b.is_const else b for b in block])
            parts.insert(0 if where == 0 else len(parts), fill)
    return parts[0] if len(parts) == 1 else cx.emit(K.Concat, parts, {"axis": d})


def _symbolic_axis(cx, x, d, begin, end, value, dt):
    """Pad axis ``d`` by size expressions: out[i] = x[i - begin] where that is
    inside x, else ``value``."""
    shape = list(cx.type(x).shape)
    rank = len(shape)
    length = as_expr(shape[d])
    start, stop = -as_expr(begin), length + end
    src = cx.emit(K.Arange, [], {"start": plain(start), "end": plain(stop), "step": 1}, dtype=I64)
    inside = cx.emit(K.LogicalAnd, [cx.emit(K.GreaterEqual, [src, cx.full(0, I64)]),
                                    cx.emit(K.Less, [src, cx.full(plain(length), I64)])])
    safe = cx.emit(K.Select, [inside, src, cx.full(0, I64)])
    y = cx.emit(K.Gather, [x, safe], {"axis": d})
    out_len = cx.type(src).shape[0]
    mask_shape = [1] * rank
    mask_shape[d] = out_len.value if out_len.is_const else out_len
    mask = cx.reshape(inside, mask_shape)
    return cx.emit(K.Select, [mask, y, cx.full(value, dt)])


@converter(aten.constant_pad_nd.default)
def constant_pad_nd(cx, node, a):
    dt = cx.out_dtype()
    value = number(a.value)
    if value is None:
        raise Unsupported(f"fill value {a.value!r}")
    pad = [cx.size(p) for p in a.pad]
    rank = cx.rank_of(a.self)
    if len(pad) % 2 or len(pad) > 2 * rank:
        raise Unsupported(f"{len(pad)} pad sizes for a rank-{rank} input")
    x = cx.cast(cx.tensor(a.self), dt)
    for k in range(len(pad) // 2):
        d = rank - 1 - k  # pad lists the last axis first
        begin, end = pad[2 * k], pad[2 * k + 1]
        if isinstance(begin, int) and isinstance(end, int):
            if begin == 0 and end == 0:
                continue
            x = pad_axis(cx, x, d, begin, end, value, dt)
        else:
            x = _symbolic_axis(cx, x, d, begin, end, value, dt)
    return cx.reshape(x, cx.out_shape())
