"""ScaledDotProductAttention and RoPE, as their shape rules' docstrings define them."""

from __future__ import annotations

import math

import numpy as np

from ..op import OpKind as K
from .norm import softmax
from .registry import implements


@implements(K.ScaledDotProductAttention)
def sdpa(attrs, ins, ctx):
    q, k, v = ins[0], ins[1], ins[2]
    squeeze = q.ndim == 3
    if squeeze:
        q, k, v = q[None], k[None], v[None]
    _, hq, sq, d = q.shape
    hkv, skv = k.shape[1], k.shape[2]
    rep = hq // hkv
    k = np.repeat(k, rep, axis=1)
    v = np.repeat(v, rep, axis=1)
    scale = attrs["scale"] or 1.0 / math.sqrt(d)
    with np.errstate(all="ignore"):
        s = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
        allowed = np.ones(s.shape, dtype=bool)
        if len(ins) == 4:
            m = ins[3]
            if m.dtype == bool:
                allowed &= np.broadcast_to(m, s.shape)
            else:
                s = s + m
        if attrs["is_causal"]:
            allowed &= np.tril(np.ones((sq, skv), dtype=bool))
        s = np.where(allowed, s, -np.inf)
        p = softmax({"axis": -1}, [s], ctx)[0]
        p = np.where(np.isneginf(s).all(axis=-1, keepdims=True), 0.0, p)  # all keys masked: zeros
        out = np.matmul(p, v)
    return [out[0] if squeeze else out]


@implements(K.RoPE)
def rope(attrs, ins, ctx):
    x, pos = ins[:2]
    d = x.shape[-1]
    n = attrs["rotary_dims"] or d
    half = n // 2
    i = np.arange(half, dtype=np.float64)
    inv = attrs["base"] ** (-2.0 * i / n)
    if len(ins) == 3:
        inv = inv / ins[2].astype(np.float64)
    p = pos.astype(np.float64) * attrs["scale"]  # [S] or [B, S]
    theta = p[..., None] * inv  # [..., S, n/2]
    m = attrs["attention_factor"]
    cos, sin = m * np.cos(theta)[..., None, :], m * np.sin(theta)[..., None, :]  # broadcast over heads
    out = x.copy()
    if attrs["mode"] == "neox":
        a, b = x[..., :half], x[..., half:n]
        out[..., :half] = a * cos - b * sin
        out[..., half:n] = a * sin + b * cos
    else:
        a, b = x[..., 0:n:2], x[..., 1:n:2]
        out[..., 0:n:2] = a * cos - b * sin
        out[..., 1:n:2] = a * sin + b * cos
    return [out]
