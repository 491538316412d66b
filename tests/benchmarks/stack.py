"""A 4-layer transformer-style decoder stack built with the public graph API,
with a dynamic sequence length, and a numpy forward of the same model.

Per layer (pre-norm, LLaMA-like):

    a = RMSNorm(h)
    q, k, v = a @ Wq, a @ Wk, a @ Wv                  [seq, hidden]
    q, k, v -> reshape [seq, heads, head_dim] -> transpose [heads, seq, head_dim]
    s = (q @ k^T) * 1/sqrt(head_dim) + mask           [heads, seq, seq]; mask is a runtime input
    o = SoftMax(s) @ v                                [heads, seq, head_dim]
    o -> transpose [seq, heads, head_dim] -> reshape [seq, hidden]
    h = h + o @ Wo
    h = h + SiLU(RMSNorm(h) @ W1) @ W2

and a final RMSNorm. Weights are stored [in, out] (``x @ W``); the compiler
stores constant MatMul weights transposed for ggml by itself.

The causal mask is a runtime input of shape [seq, seq] (0 where a position
may attend, -inf elsewhere): :func:`causal_mask` makes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Union

import numpy as np

import dyngraph as dg

HIDDEN, HEADS, FFN, LAYERS = 256, 4, 1024, 4
SEQ_MAX = 127
EPS = 1e-6


def causal_mask(n: int, dtype=np.float32) -> np.ndarray:
    """[n, n]: 0 on and below the diagonal, -inf above."""
    return np.triu(np.full((n, n), -np.inf, dtype=dtype), k=1)


@dataclass
class Stack:
    """What a caller needs to compile, run and check the stack."""

    graph: dg.Graph
    partition: dg.Partition
    x: dg.LogicalTensor  # [seq, hidden] runtime input, id 0
    mask: dg.LogicalTensor  # [seq, seq] runtime input, id 1
    weights: List[dg.LogicalTensor]  # CONSTANT ports
    output: dg.LogicalTensor  # [seq, hidden]
    constants: Dict[int, np.ndarray]  # id -> data, for compile(constants=...)
    params: Dict[str, np.ndarray]  # the same data by name, for the reference
    seq: Union[dg.Dim, int]
    layers: int
    hidden: int
    heads: int
    ffn: int
    _ref_params: Dict[object, Dict[str, np.ndarray]] = field(default_factory=dict, repr=False)

    @property
    def inputs(self) -> List[dg.LogicalTensor]:
        """The compile() inputs: runtime ones first (x, mask), then the weights."""
        return [self.x, self.mask] + self.weights

    def compile(self, engine: dg.Engine, **options) -> dg.CompiledPartition:
        return self.partition.compile(self.inputs, [self.output], engine, constants=self.constants, **options)

    def make_inputs(self, n: int, seed: int = 1):
        """A [n, hidden] input and its [n, n] causal mask."""
        rng = np.random.default_rng(seed)
        return rng.standard_normal((n, self.hidden), dtype=np.float32), causal_mask(n)

    def reference(self, x: np.ndarray, mask: np.ndarray, dtype=np.float64) -> np.ndarray:
        """The numpy forward, computed in ``dtype`` (float64 for accuracy
        checks, float32 for a like-for-like speed comparison)."""
        p = self._ref_params.get(np.dtype(dtype))
        if p is None:
            p = {k: v.astype(dtype) for k, v in self.params.items()}
            self._ref_params[np.dtype(dtype)] = p
        return reference_forward(p, x.astype(dtype, copy=False), mask.astype(dtype, copy=False),
                                 self.layers, self.heads)


def _rms_norm(x: np.ndarray, gamma: np.ndarray) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + EPS) * gamma


def _softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def reference_forward(p: Dict[str, np.ndarray], x: np.ndarray, mask: np.ndarray, layers: int, heads: int) -> np.ndarray:
    n, hidden = x.shape
    d = hidden // heads
    scale = p["scale"][0]
    h = x
    for i in range(layers):
        a = _rms_norm(h, p[f"l{i}.attn_norm"])
        q = (a @ p[f"l{i}.wq"]).reshape(n, heads, d).transpose(1, 0, 2)
        k = (a @ p[f"l{i}.wk"]).reshape(n, heads, d).transpose(1, 0, 2)
        v = (a @ p[f"l{i}.wv"]).reshape(n, heads, d).transpose(1, 0, 2)
        s = q @ k.transpose(0, 2, 1) * scale + mask
        o = (_softmax(s) @ v).transpose(1, 0, 2).reshape(n, hidden)
        h = h + o @ p[f"l{i}.wo"]
        m = _rms_norm(h, p[f"l{i}.mlp_norm"]) @ p[f"l{i}.w1"]
        h = h + (m / (1.0 + np.exp(-m))) @ p[f"l{i}.w2"]
    return _rms_norm(h, p["final_norm"])


class _Weights:
    """Random weights as constants of the builder, also kept by name for the reference."""

    def __init__(self, b: dg.GraphBuilder, rng: np.random.Generator):
        self.b = b
        self.rng = rng
        self.params: Dict[str, np.ndarray] = {}

    def const(self, name: str, data: np.ndarray) -> dg.LogicalTensor:
        data = np.ascontiguousarray(data, dtype=np.float32)
        self.params[name] = data
        return self.b.constant(name, data)

    def linear(self, name: str, fan_in: int, fan_out: int) -> dg.LogicalTensor:
        w = self.rng.standard_normal((fan_in, fan_out), dtype=np.float32) / np.float32(np.sqrt(fan_in))
        return self.const(name, w)

    def gamma(self, name: str, n: int) -> dg.LogicalTensor:
        return self.const(name, 1.0 + 0.1 * self.rng.standard_normal(n, dtype=np.float32))


def build_stack(
    seq: Optional[Union[dg.Dim, int]] = None,
    layers: int = LAYERS,
    hidden: int = HIDDEN,
    heads: int = HEADS,
    ffn: int = FFN,
    seed: int = 0,
) -> Stack:
    """Build the stack. ``seq``: the sequence dimension, by default
    ``dg.Dim("seq", min=1, max=127)``; an int builds a static graph of that
    length (the same weights for the same seed)."""
    if seq is None:
        seq = dg.Dim("seq", min=1, max=SEQ_MAX)
    if hidden % heads:
        raise ValueError(f"hidden {hidden} is not a multiple of heads {heads}")
    d = hidden // heads
    b = dg.GraphBuilder()
    x = b.input("x", dg.f32, [seq, hidden])  # id 0
    mask = b.input("mask", dg.f32, [seq, seq])  # id 1
    w = _Weights(b, np.random.default_rng(seed))
    scale = w.const("scale", np.array([1.0 / np.sqrt(d)], np.float32))

    h = x
    for i in range(layers):
        p = f"l{i}."
        wq, wk, wv, wo = (w.linear(p + n, hidden, hidden) for n in ("wq", "wk", "wv", "wo"))
        w1, w2 = w.linear(p + "w1", hidden, ffn), w.linear(p + "w2", ffn, hidden)
        g_attn, g_mlp = w.gamma(p + "attn_norm", hidden), w.gamma(p + "mlp_norm", hidden)

        a = b.rms_norm(h, g_attn, epsilon=EPS, name=p + "attn_norm_out")
        heads_of = {}
        for nm, wt in (("q", wq), ("k", wk), ("v", wv)):
            t = b.matmul(a, wt, name=p + nm)
            t = b.static_reshape(t, shape=[seq, heads, d], name=p + nm + "_split")
            heads_of[nm] = b.static_transpose(t, order=[1, 0, 2], name=p + nm + "_heads")
        s = b.matmul(heads_of["q"], heads_of["k"], transpose_b=True, name=p + "scores")  # [heads, seq, seq]
        s = b.multiply(s, scale, name=p + "scores_scaled")
        s = b.add(s, mask, name=p + "scores_masked")
        s = b.softmax(s, axis=-1, name=p + "probs")
        o = b.matmul(s, heads_of["v"], name=p + "attn")  # [heads, seq, d]
        o = b.static_transpose(o, order=[1, 0, 2], name=p + "attn_merge_t")
        o = b.static_reshape(o, shape=[seq, hidden], name=p + "attn_merged")
        o = b.matmul(o, wo, name=p + "attn_out")
        h = b.add(h, o, name=p + "resid_attn")

        m = b.rms_norm(h, g_mlp, epsilon=EPS, name=p + "mlp_norm_out")
        m = b.matmul(m, w1, name=p + "up")
        m = b.silu(m, name=p + "act")
        m = b.matmul(m, w2, name=p + "down")
        h = b.add(h, m, name=p + "resid_mlp")

    y = b.rms_norm(h, w.gamma("final_norm", hidden), epsilon=EPS, name="y")
    b.output(y)
    parts = b.partitions()
    if len(parts) != 1 or not parts[0].is_supported():
        raise RuntimeError(f"the stack should be one supported partition, got {parts}")
    return Stack(
        graph=b.graph,
        partition=parts[0],
        x=x,
        mask=mask,
        weights=b.constant_tensors,
        output=y,
        constants=b.constants,
        params=w.params,
        seq=seq,
        layers=layers,
        hidden=hidden,
        heads=heads,
        ffn=ffn,
    )


def run(cp: dg.CompiledPartition, x: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """One execution through the explicit API (infer_outputs, allocate, execute)."""
    eng = cp.engine
    lx, lm = cp.get_inputs()
    ins = [dg.Tensor(lx, eng, x), dg.Tensor(lm, eng, mask)]
    (lo,) = cp.infer_outputs(ins)
    out = np.empty(lo.shape, np.float32)
    cp.execute(dg.Stream(eng), ins, [dg.Tensor(lo, eng, out)])
    return out


__all__ = ["Stack", "build_stack", "causal_mask", "reference_forward", "run"]
