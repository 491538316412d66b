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
from ..compiled_partition import CompiledPartition
from ..engine import Engine
from ..graph import Graph
from ..logical_tensor import CONSTANT, STATE, LogicalTensor
from ..op import Op, OpKind
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


class _Builder:
    def __init__(self):
        self.g = Graph()
        self.next_tensor = 0
        self.next_op = 0
        self.constants: Dict[int, np.ndarray] = {}
        self.const_lts: List[LogicalTensor] = []
        self.state_lts: List[LogicalTensor] = []

    def tensor(self, dtype=dt.f32, shape=None, name=None, prop=None) -> LogicalTensor:
        t = LogicalTensor(self.next_tensor, dtype, shape, **({"property": prop} if prop else {}), name=name)
        self.next_tensor += 1
        return t

    def const(self, name: str, data: np.ndarray, dtype=dt.f32) -> LogicalTensor:
        t = self.tensor(dtype, list(data.shape), name, CONSTANT)
        self.constants[t.id] = data
        self.const_lts.append(t)
        return t

    def state(self, name: str, shape, dtype=dt.f32) -> LogicalTensor:
        t = self.tensor(dtype, list(shape), name, STATE)
        self.state_lts.append(t)
        return t

    def op(self, kind: OpKind, inputs: Sequence[LogicalTensor], attrs=None, dtype=dt.f32, name=None) -> LogicalTensor:
        out = self.tensor(dtype, None, name)
        self.g.add_op(Op(self.next_op, kind, list(inputs), [out], attrs or {}, name))
        self.next_op += 1
        return out


def build(cfg: LlamaConfig, weights: Dict[str, np.ndarray]):
    """Build the decoder graph. Returns (graph, inputs, outputs, constants):
    inputs = [tokens [seq] i64, positions [seq] i64, *constants, *KV-cache states],
    outputs = [logits [seq, vocab] f32]."""
    b = _Builder()
    seq = Dim("seq", min=1, max=cfg.max_seq)
    H, KV, D, S = cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.max_seq
    tokens = b.tensor(dt.i64, [seq], "tokens")
    positions = b.tensor(dt.i64, [seq], "positions")

    embed = b.const("embed", weights["embed"])
    h = b.op(OpKind.Gather, [embed, tokens], name="embed_lookup")

    # causal mask over the whole cache: key j is visible to query i when j <= positions[i]
    # (a bool mask: attention takes it on its flash path)
    kv_index = b.op(OpKind.Arange, [], {"start": 0, "end": S}, dtype=dt.i64, name="kv_index")
    pos_col = b.op(OpKind.StaticReshape, [positions], {"shape": [seq, 1]}, dtype=dt.i64, name="pos_col")
    mask = b.op(OpKind.LessEqual, [kv_index, pos_col], dtype=dt.boolean, name="visible")  # [seq, S]

    for i in range(cfg.layers):
        p = f"l{i}."
        x = b.op(OpKind.RMSNorm, [h, b.const(p + "attn_norm", weights[p + "attn_norm"])], {"epsilon": cfg.eps})

        def heads(w, n, name):
            y = b.op(OpKind.MatMul, [x, b.const(p + name, weights[p + name])])
            return b.op(OpKind.StaticReshape, [y], {"shape": [1, seq, n, D]})

        def rope(t):
            return b.op(OpKind.RoPE, [t, positions], {"mode": "neox", "base": cfg.rope_base})

        def to_bhsd(t):
            return b.op(OpKind.StaticTranspose, [t], {"order": [0, 2, 1, 3]})

        q = to_bhsd(rope(heads("wq", H, "wq")))
        k = to_bhsd(rope(heads("wk", KV, "wk")))
        v = to_bhsd(heads("wv", KV, "wv"))
        k_cache = b.state(p + "k_cache", [1, KV, S, D])
        v_cache = b.state(p + "v_cache", [1, KV, S, D])
        k_all = b.op(OpKind.ScatterRows, [k_cache, positions, k], name=p + "k_write")
        v_all = b.op(OpKind.ScatterRows, [v_cache, positions, v], name=p + "v_write")
        attn = b.op(OpKind.ScaledDotProductAttention, [q, k_all, v_all, mask], name=p + "attention")
        attn = b.op(OpKind.StaticTranspose, [attn], {"order": [0, 2, 1, 3]})
        attn = b.op(OpKind.StaticReshape, [attn], {"shape": [seq, H * D]})
        attn = b.op(OpKind.MatMul, [attn, b.const(p + "wo", weights[p + "wo"])])
        h = b.op(OpKind.Add, [h, attn], name=p + "attn_residual")

        x = b.op(OpKind.RMSNorm, [h, b.const(p + "ffn_norm", weights[p + "ffn_norm"])], {"epsilon": cfg.eps})
        gate = b.op(OpKind.MatMul, [x, b.const(p + "w_gate", weights[p + "w_gate"])])
        up = b.op(OpKind.MatMul, [x, b.const(p + "w_up", weights[p + "w_up"])])
        act = b.op(OpKind.Multiply, [b.op(OpKind.SiLU, [gate]), up])
        down = b.op(OpKind.MatMul, [act, b.const(p + "w_down", weights[p + "w_down"])])
        h = b.op(OpKind.Add, [h, down], name=p + "ffn_residual")

    x = b.op(OpKind.RMSNorm, [h, b.const("final_norm", weights["final_norm"])], {"epsilon": cfg.eps})
    if cfg.tied_embeddings:
        logits = b.op(OpKind.MatMul, [x, embed], {"transpose_b": True}, name="logits")
    else:
        logits = b.op(OpKind.MatMul, [x, b.const("lm_head", weights["lm_head"])], name="logits")
    b.g.finalize()
    inputs = [tokens, positions] + b.const_lts + b.state_lts
    return b.g, inputs, [logits], b.constants


class LlamaRunner:
    """Compile the decoder once; prefill and decode through its KV cache state."""

    def __init__(self, cfg: LlamaConfig, weights: Dict[str, np.ndarray], engine: Optional[Engine] = None, **options):
        self.cfg = cfg
        g, inputs, outputs, constants = build(cfg, weights)
        parts = g.get_partitions()
        if len(parts) != 1 or not parts[0].is_supported():
            raise RuntimeError(f"the decoder did not form one supported partition: {parts}")
        self.engine = engine or Engine()
        self.cp: CompiledPartition = parts[0].compile(inputs, outputs, self.engine, constants=constants, **options)
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
