"""Shape rules of the transformer ops ScaledDotProductAttention and RoPE."""

from __future__ import annotations

import math

from ..dtypes import DataType
from ..errors import GraphError
from ..op import OpKind as K
from ..symbolic import Expr, format_shape, sym_min
from .common import ONE
from .registry import AttrSpec, TensorType, register

ZERO = Expr.const(0)


def _finite(attrs, name: str, label: str) -> float:
    v = attrs[name]
    if not math.isfinite(v):
        raise GraphError(f"{label}: attribute {name!r} must be finite, got {v!r}")
    return v


@register(
    K.ScaledDotProductAttention,
    inputs=(3, 4),
    attrs={"scale": AttrSpec("float", 0.0, finite=True), "is_causal": AttrSpec("bool", False)},
    dtypes=("float", "float", "float", "float_or_bool"),
    input_names=("q", "k", "v", "mask"),
    same_dtypes=(0, 1, 2),
    out_dtype_of=0,
)
def scaled_dot_product_attention(attrs, ins, ctx):
    """softmax(q @ k^T * scale + mask) @ v, as torch.nn.functional.scaled_dot_product_attention.

    Inputs: q ``[B, Hq, Sq, D]``, k ``[B, Hkv, Skv, D]``, v ``[B, Hkv, Skv, Dv]``
    (or all three without the batch axis: ``[Hq, Sq, D]`` ...) and an optional
    ``mask`` that broadcasts (numpy rules, rank 2 up to the rank of q) to
    ``[B, Hq, Sq, Skv]``. Output ``[B, Hq, Sq, Dv]`` in q's dtype.

    - q, k and v share one floating-point dtype.
    - A floating-point mask is added to the scaled scores. A bool mask says
      which keys a query may attend to (True: attend), like torch's; it is
      applied as 0 / -inf.
    - ``scale`` multiplies q @ k^T. ``0.0`` (the default) means ``1/sqrt(D)``,
      torch's ``scale=None``; a scale of exactly zero cannot be asked for.
    - ``is_causal``: query i attends to keys j <= i (torch's top-left aligned
      lower-triangular mask, also when Sq != Skv: with Sq = 1 the query sees
      key 0 only). It combines with a mask.
    - Grouped-query attention: Hq must be a multiple of Hkv; query head h uses
      key/value head ``h // (Hq // Hkv)`` (torch's ``enable_gqa=True``).
    - A query whose keys are all masked out (-inf or False) outputs zeros.

    The backend runs ggml's flash attention (K and V in f32, the mask in f16)
    unless the mask is f32: an f32 mask is applied exactly, with
    mul_mat + softmax, since rounding it to f16 would change its values.
    """
    label = ctx.op_label
    q, k, v = ins[0], ins[1], ins[2]
    _finite(attrs, "scale", label)
    if q.rank not in (3, 4):
        raise ctx.error(f"q must have rank 3 or 4 ([B,] H, S, D), got shape {format_shape(q.shape)}")
    for name, t in (("k", k), ("v", v)):
        if t.rank != q.rank:
            raise ctx.error(
                f"{name} must have the rank of q ({q.rank}), got {name} {format_shape(t.shape)} and q {format_shape(q.shape)}"
            )
    hq, sq, d = q.shape[-3:]
    hkv, skv, dk = k.shape[-3:]
    ctx.equal(dk, d, f"head size of k {format_shape(k.shape)} and q {format_shape(q.shape)}")
    ctx.equal(v.shape[-2], skv, f"sequence length of v {format_shape(v.shape)} and k {format_shape(k.shape)}")
    ctx.equal(v.shape[-3], hkv, f"head count of v {format_shape(v.shape)} and k {format_shape(k.shape)}")
    if hq.is_const and hkv.is_const:
        if hq.value % hkv.value:
            raise ctx.error(f"query heads ({hq}) must be a multiple of key/value heads ({hkv})")
    elif hq != hkv:
        ctx.equal(hq % hkv, ZERO, f"query heads ({hq}) must be a multiple of key/value heads ({hkv})")
    batch = ()
    if q.rank == 4:
        b = q.shape[0]
        ctx.equal(k.shape[0], b, f"batch of k {format_shape(k.shape)} and q {format_shape(q.shape)}")
        ctx.equal(v.shape[0], b, f"batch of v {format_shape(v.shape)} and q {format_shape(q.shape)}")
        batch = (b,)
    if len(ins) == 4:
        m = ins[3]
        if not (m.dtype.is_float or m.dtype is DataType.boolean):
            raise ctx.dtype_error(f"mask must be a floating-point or bool tensor, got {m.dtype}")
        if not 2 <= m.rank <= q.rank:
            raise ctx.error(f"mask must have rank 2 to {q.rank}, got shape {format_shape(m.shape)}")
        full = batch + (hq, sq, skv)
        target = full[len(full) - m.rank :]
        for i, (md, td) in enumerate(zip(m.shape, target)):
            if md == ONE:
                continue
            if md.is_const and td.is_const and md != td:
                raise ctx.error(
                    f"mask {format_shape(m.shape)} does not broadcast to the scores {format_shape(full)} (dimension {i}: {md} vs {td})"
                )
            ctx.equal(md, td, f"mask {format_shape(m.shape)} dimension {i} against the scores {format_shape(full)}")
    return [TensorType(q.dtype, batch + (hq, sq, v.shape[-1]))]


@register(
    K.RoPE,
    inputs=(2, 3),
    attrs={
        "mode": AttrSpec("str", "normal", choices=("normal", "neox")),
        "base": AttrSpec("float", 10000.0, finite=True),
        "scale": AttrSpec("float", 1.0, finite=True),
        "rotary_dims": AttrSpec("int", 0, min=0),
        "attention_factor": AttrSpec("float", 1.0, finite=True),
    },
    dtypes=("float", "int", "float"),
    input_names=("x", "positions", "freq_factors"),
    out_dtype_of=0,
)
def rope(attrs, ins, ctx):
    """Rotary position embedding of x ``[B, S, H, D]`` (or ``[S, H, D]``) at
    positions ``[S]`` (or ``[B, S]``, one row per batch entry), i32 or i64.

    With ``n = rotary_dims or D`` (even, at most D; D even), for each position p of
    the sequence and each i in ``[0, n/2)``::

        theta_i = p * scale * base ** (-2 i / n) / freq_factors[i]
        c, s = attention_factor * cos theta_i, attention_factor * sin theta_i
        (x_a, x_b) -> (x_a c - x_b s,  x_a s + x_b c)

    where the pair (a, b) is ``(2i, 2i+1)`` for ``mode="normal"`` (adjacent
    pairs: GPT-J, the RoFormer paper) and ``(i, i + n/2)`` for ``mode="neox"``
    (the two halves: GPT-NeoX, Llama's ``rotate_half``). Features ``[n, D)``
    pass through unchanged. ``base`` (theta) defaults to 10000, ``scale``
    (linear position interpolation: positions are multiplied by it) to 1.
    ``freq_factors`` (optional, ``[n/2]``, f32) divide each pair's frequency,
    as ggml's and llama.cpp's ``rope_freqs`` do (Llama 3's scaled RoPE);
    without it they are 1. With ``base=1`` the frequencies are
    ``1 / freq_factors``: any table of inverse frequencies, such as a Hugging
    Face model's ``inv_freq``, is ``freq_factors = 1 / inv_freq``.
    ``attention_factor`` (default 1) multiplies cos and sin (YaRN's attention
    scaling). The output has x's shape and dtype.
    """
    label = ctx.op_label
    x, pos = ins[:2]
    if not pos.dtype.is_int:
        raise ctx.dtype_error(f"positions must be i32 or i64, got {pos.dtype}")
    base = _finite(attrs, "base", label)
    _finite(attrs, "scale", label)
    if base <= 0:
        raise GraphError(f"{label}: attribute 'base' must be positive, got {base}")
    if x.rank not in (3, 4):
        raise ctx.error(f"x must have rank 3 or 4 ([B,] S, H, D), got shape {format_shape(x.shape)}")
    s, d = x.shape[-3], x.shape[-1]
    if pos.rank == 1:
        ctx.equal(pos.shape[0], s, f"positions {format_shape(pos.shape)} against the sequence of x {format_shape(x.shape)}")
    elif pos.rank == 2 and x.rank == 4:
        ctx.equal(pos.shape[0], x.shape[0], f"positions {format_shape(pos.shape)} against the batch of x {format_shape(x.shape)}")
        ctx.equal(pos.shape[1], s, f"positions {format_shape(pos.shape)} against the sequence of x {format_shape(x.shape)}")
    else:
        want = "[S] or [B, S]" if x.rank == 4 else "[S]"
        raise ctx.error(f"positions must have shape {want} for x {format_shape(x.shape)}, got {format_shape(pos.shape)}")
    n = attrs["rotary_dims"]
    if n < 0 or n % 2:
        raise ctx.error(f"rotary_dims must be even and >= 0 (0: all of D), got {n}")
    # D even also with rotary_dims < D: ggml's rope moves the features past n in pairs (an odd D's last
    # pair would reach past the row)
    if d.is_const and d.value % 2:
        raise ctx.error(f"the head size D={d} must be even")
    if not d.is_const:
        ctx.equal(d % 2, ZERO, f"head size D={d} of x {format_shape(x.shape)} must be even")
    if n and d.is_const and n > d.value:
        raise ctx.error(f"rotary_dims {n} is larger than the head size D={d}")
    elif n and not d.is_const:
        # n <= D, written as an equality the runtime checks: min(D, n) == n
        ctx.equal(sym_min(d, n), Expr.const(n), f"rotary_dims {n} must not exceed the head size D={d} of x")
    if len(ins) == 3:
        ff = ins[2]
        if ff.rank != 1:
            raise ctx.error(f"freq_factors must have shape [n/2], got {format_shape(ff.shape)}")
        half = Expr.const(n // 2) if n else d // 2
        ctx.equal(ff.shape[0], half, f"freq_factors {format_shape(ff.shape)} against the {half} rotated pairs of x {format_shape(x.shape)}")
    return [x]
