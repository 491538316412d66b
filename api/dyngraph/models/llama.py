"""A Llama-style decoder built with the graph API.

Embedding, RMSNorm, RoPE (NeoX style, as Llama), grouped-query attention
over a KV cache held in STATE tensors, a SwiGLU MLP, and a tied or untied LM
head. One partition, compiled once: prefill runs at any prompt length and
decode one token at a time, each at a graph built once.

The KV cache holds ``max_seq`` positions per layer and is written in place
at the token positions given as an input; attention reads the whole cache
under a causal mask built inside the graph from those positions, so decode
keeps one shape (and one graph) for the whole generation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

import numpy as np

from .. import dtypes as dt
from ..builder import GraphBuilder
from ..compiled_partition import CompiledPartition
from ..engine import Engine
from ..symbolic import Dim


@dataclass
class LlamaConfig:
    vocab: int = 256
    hidden: int = 64
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    ffn: int = 128
    max_seq: int = 64
    rope_base: float = 10000.0
    eps: float = 1e-5
    tied_embeddings: bool = True

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


def random_weights(cfg: LlamaConfig, seed: int = 0) -> Dict[str, np.ndarray]:
    """Weights with the names and layouts of :func:`build` (numpy, [in, out] matmul layout)."""
    rng = np.random.default_rng(seed)
    D, H, KV = cfg.head_dim, cfg.heads, cfg.kv_heads

    def w(*shape, scale=None):
        scale = scale if scale is not None else 1.0 / np.sqrt(shape[0])
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    p = {"embed": w(cfg.vocab, cfg.hidden, scale=0.5), "final_norm": 1.0 + 0.1 * w(cfg.hidden, scale=1.0)}
    if not cfg.tied_embeddings:
        p["lm_head"] = w(cfg.hidden, cfg.vocab)
    for i in range(cfg.layers):
        p[f"l{i}.attn_norm"] = 1.0 + 0.1 * w(cfg.hidden, scale=1.0)
        p[f"l{i}.wq"] = w(cfg.hidden, H * D)
        p[f"l{i}.wk"] = w(cfg.hidden, KV * D)
        p[f"l{i}.wv"] = w(cfg.hidden, KV * D)
        p[f"l{i}.wo"] = w(H * D, cfg.hidden)
        p[f"l{i}.ffn_norm"] = 1.0 + 0.1 * w(cfg.hidden, scale=1.0)
        p[f"l{i}.w_gate"] = w(cfg.hidden, cfg.ffn)
        p[f"l{i}.w_up"] = w(cfg.hidden, cfg.ffn)
        p[f"l{i}.w_down"] = w(cfg.ffn, cfg.hidden)
    return p


def build(cfg: LlamaConfig, weights: Dict[str, np.ndarray]) -> GraphBuilder:
    """Build the decoder graph: runtime inputs tokens [seq] i64 and positions
    [seq] i64, the weights as constants, the KV cache as state; one output,
    logits [seq, vocab] f32."""
    b = GraphBuilder()
    seq = Dim("seq", min=1, max=cfg.max_seq)
    H, KV, D, S = cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.max_seq
    tokens = b.input("tokens", dt.i64, [seq])
    positions = b.input("positions", dt.i64, [seq])

    embed = b.constant("embed", weights["embed"])
    h = b.gather(embed, tokens, name="embed_lookup")

    # causal mask over the whole cache: key j is visible to query i when j <= positions[i]
    # (a bool mask: attention takes it on its flash path)
    kv_index = b.arange(start=0, end=S, dtype=dt.i64, name="kv_index")
    pos_col = b.static_reshape(positions, shape=[seq, 1], name="pos_col")
    mask = b.less_equal(kv_index, pos_col, name="visible")  # [seq, S]

    for i in range(cfg.layers):
        p = f"l{i}."
        x = b.rms_norm(h, b.constant(p + "attn_norm", weights[p + "attn_norm"]), epsilon=cfg.eps)

        def heads(n, w):
            y = b.matmul(x, b.constant(p + w, weights[p + w]))
            return b.static_reshape(y, shape=[1, seq, n, D])

        def rope(t):
            return b.rope(t, positions, mode="neox", base=cfg.rope_base)

        def to_bhsd(t):
            return b.static_transpose(t, order=[0, 2, 1, 3])

        q = to_bhsd(rope(heads(H, "wq")))
        k = to_bhsd(rope(heads(KV, "wk")))
        v = to_bhsd(heads(KV, "wv"))
        k_cache = b.state(p + "k_cache", dt.f32, [1, KV, S, D])
        v_cache = b.state(p + "v_cache", dt.f32, [1, KV, S, D])
        k_all = b.scatter_rows(k_cache, positions, k, name=p + "k_write")
        v_all = b.scatter_rows(v_cache, positions, v, name=p + "v_write")
        attn = b.scaled_dot_product_attention(q, k_all, v_all, mask, name=p + "attention")
        attn = b.static_transpose(attn, order=[0, 2, 1, 3])
        attn = b.static_reshape(attn, shape=[seq, H * D])
        attn = b.matmul(attn, b.constant(p + "wo", weights[p + "wo"]))
        h = b.add(h, attn, name=p + "attn_residual")

        x = b.rms_norm(h, b.constant(p + "ffn_norm", weights[p + "ffn_norm"]), epsilon=cfg.eps)
        gate = b.matmul(x, b.constant(p + "w_gate", weights[p + "w_gate"]))
        up = b.matmul(x, b.constant(p + "w_up", weights[p + "w_up"]))
        down = b.matmul(b.multiply(b.silu(gate), up), b.constant(p + "w_down", weights[p + "w_down"]))
        h = b.add(h, down, name=p + "ffn_residual")

    x = b.rms_norm(h, b.constant("final_norm", weights["final_norm"]), epsilon=cfg.eps)
    if cfg.tied_embeddings:
        logits = b.matmul(x, embed, transpose_b=True, name="logits")
    else:
        logits = b.matmul(x, b.constant("lm_head", weights["lm_head"]), name="logits")
    b.output(logits)
    return b


class LlamaRunner:
    """Compile the decoder once; prefill and decode through its KV cache state."""

    def __init__(self, cfg: LlamaConfig, weights: Dict[str, np.ndarray], engine: Optional[Engine] = None, **options):
        self.cfg = cfg
        self.engine = engine if engine is not None else Engine.shared()
        self.cp: CompiledPartition = build(cfg, weights).compile(self.engine, **options)
        self.pos = 0

    def reset(self) -> None:
        self.cp.reset_state()
        self.pos = 0

    def forward(self, tokens: Sequence[int]) -> np.ndarray:
        """Logits [len(tokens), vocab] for tokens at the next positions of the sequence."""
        n = len(tokens)
        if self.pos + n > self.cfg.max_seq:
            raise ValueError(f"the KV cache holds {self.cfg.max_seq} positions; {self.pos} used, {n} more asked")
        toks = np.asarray(tokens, dtype=np.int64)
        pos = np.arange(self.pos, self.pos + n, dtype=np.int64)
        (logits,) = self.cp(toks, pos)
        self.pos += n
        return logits

    def generate(self, prompt: Sequence[int], max_new_tokens: int) -> List[int]:
        """Greedy decoding: prefill the prompt, then one token per step."""
        logits = self.forward(prompt)
        out = []
        for _ in range(max_new_tokens):
            nxt = int(np.argmax(logits[-1]))
            out.append(nxt)
            if len(out) == max_new_tokens:
                break
            logits = self.forward([nxt])
        return out
