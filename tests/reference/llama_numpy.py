"""A numpy (float64) reference of dyngraph.models.llama: the same math, written plainly."""

from __future__ import annotations

import numpy as np


def rms_norm(x, g, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * g


def rope_neox(x, pos, base):
    """x [seq, heads, d]; rotate the two halves by pos * base^(-2i/d)."""
    d = x.shape[-1]
    half = d // 2
    inv = base ** (-np.arange(half) * 2.0 / d)
    ang = pos[:, None].astype(np.float64) * inv[None, :]  # [seq, half]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


class LlamaNumpy:
    def __init__(self, cfg, weights):
        self.cfg = cfg
        self.w = {k: v.astype(np.float64) for k, v in weights.items()}
        self.reset()

    def reset(self):
        c = self.cfg
        self.k = np.zeros((c.layers, c.kv_heads, c.max_seq, c.head_dim))
        self.v = np.zeros_like(self.k)

    def forward(self, tokens, positions):
        c, w = self.cfg, self.w
        H, KV, D = c.heads, c.kv_heads, c.head_dim
        n = len(tokens)
        h = w["embed"][np.asarray(tokens)]
        for i in range(c.layers):
            p = f"l{i}."
            x = rms_norm(h, w[p + "attn_norm"], c.eps)
            q = rope_neox((x @ w[p + "wq"]).reshape(n, H, D), positions, c.rope_base)
            k = rope_neox((x @ w[p + "wk"]).reshape(n, KV, D), positions, c.rope_base)
            v = (x @ w[p + "wv"]).reshape(n, KV, D)
            self.k[i][:, positions] = k.transpose(1, 0, 2)
            self.v[i][:, positions] = v.transpose(1, 0, 2)
            out = np.empty((n, H, D))
            visible = np.arange(c.max_seq)[None, :] <= positions[:, None]  # [n, S]
            for hq in range(H):
                kv = hq // (H // KV)
                s = (q[:, hq] @ self.k[i][kv].T) / np.sqrt(D)  # [n, S]
                s = np.where(visible, s, -np.inf)
                s = np.exp(s - s.max(axis=-1, keepdims=True))
                s /= s.sum(axis=-1, keepdims=True)
                out[:, hq] = s @ self.v[i][kv]
            h = h + out.reshape(n, H * D) @ w[p + "wo"]
            x = rms_norm(h, w[p + "ffn_norm"], c.eps)
            gate = x @ w[p + "w_gate"]
            h = h + (gate / (1 + np.exp(-gate)) * (x @ w[p + "w_up"])) @ w[p + "w_down"]
        x = rms_norm(h, w["final_norm"], c.eps)
        return x @ (w["embed"].T if c.tied_embeddings else w["lm_head"])
