"""Hugging Face's rotary embedding, recognized and emitted as one RoPE op.

Most models of ``transformers`` with rotary embeddings write them one way
(``apply_rotary_pos_emb``)::

    freqs = positions[..., None].float() * inv_freq        # [B', S, D/2]
    emb = cat(freqs, freqs, -1)                             # [B', S, D]
    cos, sin = emb.cos() * a, emb.sin() * a                 # a: attention_scaling
    x_embed = x * cos.unsqueeze(u) + rotate_half(x) * sin.unsqueeze(u)
    rotate_half(x) = cat(-x[..., D/2:], x[..., :D/2], -1)

which, op by op, is ten ggml nodes per rotated tensor (and copies of the
transposed ``x``), twice per layer. It is RoPE in "neox" mode with base 1 and
``freq_factors = 1 / inv_freq`` (any table of inverse frequencies: Llama 3's
scaled ones, YaRN's, partial rotation through a slice of ``x``) and
``attention_factor = a``: one node (``ggml_rope_ext``), on every device.

Cohere's form pairs neighbours instead: ``rotate_every_two(x) = stack(-x[...,
1::2], x[..., ::2], -1).flatten(-2)`` and each frequency twice in a row
(``repeat_interleave(freqs, 2, -1)``): RoPE in "normal" mode, otherwise the
same. (DeepSeek's ``apply_rotary_pos_emb_interleave`` writes its result
de-interleaved, and GPT-J gathers sin and cos from a table: not matched.)

The match is made at the final ``add`` and asks for all of it: the same
``x`` in the three places, ``inv_freq`` a constant of the program, the
positions an integer tensor, ``cos`` and ``sin`` of one ``emb`` with one
factor. Anything else converts op by op, as before.
"""

from __future__ import annotations

import numpy as np
import torch

from ...logical_tensor import Property
from ...op import OpKind as K
from ...symbolic import as_expr
from .common import IDENTITY_OPS, aten, is_call, meta, norm_dim, number, through_identities
from .registry import Unsupported

_BIG = 2**62  # slice ends at least this large mean "to the end"


def _float(node) -> bool:
    m = meta(node)
    return isinstance(m, torch.Tensor) and m.dtype.is_floating_point


def _through_float_casts(node):
    """Skip identities and casts between floating dtypes (``cos.to(x.dtype)``)."""
    while is_call(node, *IDENTITY_OPS) and _float(node) and _float(node.args[0]):
        node = node.args[0]
    return node


def _same(a, b) -> bool:
    return through_identities(a) is through_identities(b)


def _dim(d, rank):
    if not isinstance(d, int) or isinstance(d, bool):
        return None
    try:
        return norm_dim(d, rank)
    except Unsupported:
        return None


def _cat_axis(node, rank):
    """A cat's or stack's axis, normalized for `rank` (None if out of range)."""
    return _dim(node.args[1] if len(node.args) > 1 else 0, rank)


def _mul_operands(node):
    node = through_identities(node)
    if is_call(node, aten.mul.Tensor) and len(node.args) == 2:
        return node.args
    return None


def _rotate_half_of(cx, node, d):
    """x when ``node`` is cat(-x[..., d/2:], x[..., :d/2], -1), else None."""
    node = through_identities(node)
    if not is_call(node, aten.cat.default) or len(node.args[0]) != 2:
        return None
    rank = cx.rank_of(node)
    if _cat_axis(node, rank) != rank - 1:
        return None
    neg, low = (through_identities(a) for a in node.args[0])
    if not is_call(neg, aten.neg.default):
        return None
    high = through_identities(neg.args[0])
    h = d // 2

    def half(s, start, end):
        if not is_call(s, aten.slice.Tensor) or len(s.args) < 2:
            return None
        args = list(s.args) + [None] * (5 - len(s.args))
        dim, lo, hi, step = args[1:5]
        if _dim(dim, rank) != rank - 1 or (step not in (None, 1)):
            return None
        lo = 0 if lo is None else number(lo)
        hi = _BIG if hi is None else number(hi)
        if lo != start or hi is None or not (hi == end or (end == d and hi >= d)):
            return None
        return s.args[0]

    x_high, x_low = half(high, h, d), half(low, 0, h)
    if x_high is None or x_low is None or not _same(x_high, x_low):
        return None
    return x_high


def _rotate_every_two_of(cx, node, d):
    """x when ``node`` is x's pairs (a, b) made (-b, a): stack(-x[..., 1::2], x[..., ::2], -1) flattened
    to x's shape (or the same as a cat of the two unsqueezed); else None."""
    node = through_identities(node)
    if not is_call(node, aten.view.default, aten.reshape.default, aten._unsafe_view.default, aten.flatten.using_ints):
        return None
    st = through_identities(node.args[0])
    rank = cx.rank_of(st)
    if rank < 2 or list(cx.shape_of(st))[-1] != 2:
        return None
    if is_call(st, aten.stack.default):
        if len(st.args[0]) != 2 or _cat_axis(st, rank) != rank - 1:
            return None
        neg, even = (through_identities(a) for a in st.args[0])
    elif is_call(st, aten.cat.default):
        if len(st.args[0]) != 2 or _cat_axis(st, rank) != rank - 1:
            return None
        parts = [through_identities(a) for a in st.args[0]]
        if not all(is_call(q, aten.unsqueeze.default) and _dim(q.args[1], rank) == rank - 1 for q in parts):
            return None
        neg, even = (through_identities(q.args[0]) for q in parts)
    else:
        return None
    if not is_call(neg, aten.neg.default):
        return None
    odd = through_identities(neg.args[0])

    def every_other(s, start):
        if not is_call(s, aten.slice.Tensor) or len(s.args) < 5:
            return None
        dim, lo, hi, step = s.args[1:5]
        if _dim(dim, rank - 1) != rank - 2 or number(step) != 2 or number(lo) != start:
            return None
        hi = number(hi)
        return s.args[0] if hi is not None and hi >= d else None

    x_odd, x_even = every_other(odd, 1), every_other(even, 0)
    if x_odd is None or x_even is None or not _same(x_odd, x_even):
        return None
    if list(cx.shape_of(node)) != list(cx.shape_of(x_odd)):
        return None
    return x_odd


def _cos_sin(node, fn):
    """(emb, factor, u) when ``node`` is unsqueeze(fn(emb) [* factor], u); else None."""
    node = through_identities(node)
    if not is_call(node, aten.unsqueeze.default):
        return None
    u = node.args[1]
    c = _through_float_casts(node.args[0])
    factor = 1.0
    ops = _mul_operands(c)
    if ops is not None:
        a, b = ops
        if number(b) is not None and not isinstance(number(b), bool):
            c, factor = a, float(number(b))
        elif number(a) is not None and not isinstance(number(a), bool):
            c, factor = b, float(number(a))
        else:
            return None
        c = _through_float_casts(c)
    if not is_call(c, fn):
        return None
    return through_identities(c.args[0]), factor, u


def _frequencies(cx, emb, mode):
    """(positions node, inv_freq as float64 [h]) when emb is freqs = p[..., None].float() * inv_freq
    [B', S, h] twice over: cat(freqs, freqs) ("neox") or each frequency twice in a row ("normal":
    repeat_interleave(freqs, 2, -1), or its decomposition view(expand(freqs[..., None], [..., 2])))."""
    if cx.rank_of(emb) != 3:
        return None
    if mode == "neox":
        if not is_call(emb, aten.cat.default) or len(emb.args[0]) != 2:
            return None
        if _cat_axis(emb, 3) != 2:
            return None
        f0, f1 = emb.args[0]
        if not _same(f0, f1):
            return None
        freqs = f0
    else:
        freqs = _repeated_twice(cx, emb)
        if freqs is None:
            return None
    ops = _mul_operands(freqs)
    if ops is None:
        return None
    for p, i in (ops, ops[::-1]):
        table = _constant_vector(cx, i)
        pos = _positions(cx, p)
        if table is not None and pos is not None:
            return pos, table
    return None


def _repeated_twice(cx, emb):
    """f when emb [B', S, 2h] is each value of f [B', S, h] twice in a row; else None."""
    if is_call(emb, aten.repeat_interleave.self_int):
        args = list(emb.args) + [None] * (3 - len(emb.args))
        dim = emb.kwargs.get("dim", args[2])
        if number(args[1]) == 2 and dim is not None and _dim(dim, 3) == 2:
            return emb.args[0]
        return None
    if not is_call(emb, aten.view.default, aten.reshape.default, aten._unsafe_view.default):
        return None
    e = through_identities(emb.args[0])
    if not is_call(e, aten.expand.default) or cx.rank_of(e) != 4 or list(cx.shape_of(e))[-1] != 2:
        return None
    u = through_identities(e.args[0])
    if not is_call(u, aten.unsqueeze.default) or _dim(u.args[1], 4) != 3:
        return None
    f = u.args[0]
    fs, es = cx.shape_of(f), cx.shape_of(emb)
    if len(fs) != 3 or as_expr(es[2]) != as_expr(fs[2]) * 2 or any(as_expr(a) != as_expr(b) for a, b in zip(fs[:2], es[:2])):
        return None
    return f


def _constant_vector(cx, node):
    """The values of a constant tensor of shape [1, ..., 1, h], as float64 [h]; else None."""
    m = meta(node)
    if not isinstance(m, torch.Tensor) or not m.dtype.is_floating_point:
        return None
    node = _through_float_casts(node)
    if not cx.is_tensor(node):
        return None
    lt = cx.value(node)
    t = cx.torch_constants.get(lt.id)  # (as torch holds it: bf16 and f16 converted exactly)
    if t is None or lt.property is not Property.CONSTANT or not t.dtype.is_floating_point:
        return None
    shape = tuple(t.shape)
    if len(shape) == 0 or any(d != 1 for d in shape[:-1]):
        return None
    return t.detach().to(torch.float64).reshape(-1).numpy()


def _positions(cx, node):
    """q when ``node`` is q.unsqueeze(-1) cast to float, q an integer tensor [B', S]; else None."""
    if not _float(node):
        return None
    node = through_identities(node)
    while is_call(node, *IDENTITY_OPS):  # the float cast
        node = node.args[0]
    if not is_call(node, aten.unsqueeze.default) or _dim(node.args[1], cx.rank_of(node)) != 2:
        return None
    q = node.args[0]
    m = meta(q)
    if not isinstance(m, torch.Tensor) or m.dtype not in (torch.int32, torch.int64) or m.dim() != 2:
        return None
    return q if cx.is_tensor(q) else None


def rotary_pattern(cx, a, b):
    """RoPE for add(a, b) when it is Hugging Face's rotary embedding; else None."""
    if not cx.supports(K.RoPE):
        return None
    for first, second in ((a, b), (b, a)):
        y = _match(cx, first, second)
        if y is not None:
            return y
    return None


def _match(cx, xc, rs):
    p, q = _mul_operands(xc), _mul_operands(rs)
    if p is None or q is None:
        return None
    for x, cu in (p, p[::-1]):
        m = meta(x)
        if not isinstance(m, torch.Tensor) or m.dim() != 4 or not cx.is_tensor(x):
            continue
        d = m.shape[-1]
        if not isinstance(d, int) or d % 2:
            continue
        cos = _cos_sin(cu, aten.cos.default)
        if cos is None:
            continue
        for r, su in (q, q[::-1]):
            sin = _cos_sin(su, aten.sin.default)
            if sin is None or sin[0] is not cos[0] or sin[1] != cos[1] or sin[2] != cos[2]:
                continue
            for mode, rotated in (("neox", _rotate_half_of), ("normal", _rotate_every_two_of)):
                rx = rotated(cx, r, d)
                if rx is None or not _same(rx, x):
                    continue
                try:
                    y = _emit(cx, x, cos, mode)
                except Unsupported:  # (ops it emitted before are unused: pruned)
                    y = None
                if y is not None:
                    return y
    return None


def _emit(cx, x, cos, mode):
    emb, factor, u = cos
    u = _dim(u, 4)
    if u not in (1, 2) or not np.isfinite(factor):
        return None
    found = _frequencies(cx, emb, mode)
    if found is None:
        return None
    pos, inv_freq = found
    xs = cx.shape_of(x)
    es = cx.shape_of(emb)  # [B', S, D]
    seq = xs[2] if u == 1 else xs[1]
    if len(inv_freq) * 2 != xs[3] or as_expr(es[2]) != as_expr(xs[3]) or as_expr(es[1]) != as_expr(seq):
        return None
    if not np.all(np.isfinite(inv_freq)) or not np.all(inv_freq > 0):
        return None
    lt = cx.tensor(x)
    dt = cx.out_dtype()
    if not dt.is_float:
        return None
    lt = cx.cast(lt, dt)
    positions = cx.tensor(pos)
    if as_expr(es[0]) != as_expr(xs[0]):
        if as_expr(es[0]) != as_expr(1):
            return None
        positions = cx.reshape(positions, (es[1],))
    ff = cx.constant((1.0 / inv_freq).astype(np.float32))
    xt = cx.transpose(lt, [0, 2, 1, 3]) if u == 1 else lt
    attrs = {"mode": mode, "base": 1.0, "attention_factor": factor}
    y = cx.emit(K.RoPE, [xt, positions, ff], attrs)
    return cx.transpose(y, [0, 2, 1, 3]) if u == 1 else y
