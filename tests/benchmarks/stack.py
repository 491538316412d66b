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


class _Builder:
    """Hands out tensor and op ids and collects constants."""

    def __init__(self, rng: np.random.Generator):
        self.g = dg.Graph(dg.Engine.CPU)
        self.rng = rng
        self.next_tensor = 2  # 0: x, 1: mask
        self.next_op = 0
        self.weights: List[dg.LogicalTensor] = []
        self.constants: Dict[int, np.ndarray] = {}
        self.params: Dict[str, np.ndarray] = {}

    def tensor(self, name: str) -> dg.LogicalTensor:
        lt = dg.LogicalTensor(self.next_tensor, dg.f32, None, name=name)
        self.next_tensor += 1
        return lt

    def const(self, name: str, data: np.ndarray) -> dg.LogicalTensor:
        data = np.ascontiguousarray(data, dtype=np.float32)
        lt = dg.LogicalTensor(self.next_tensor, dg.f32, list(data.shape), property=dg.CONSTANT, name=name)
        self.next_tensor += 1
        self.weights.append(lt)
        self.constants[lt.id] = data
        self.params[name] = data
        return lt

    def linear(self, name: str, fan_in: int, fan_out: int) -> dg.LogicalTensor:
        w = self.rng.standard_normal((fan_in, fan_out), dtype=np.float32) / np.float32(np.sqrt(fan_in))
        return self.const(name, w)

    def gamma(self, name: str, n: int) -> dg.LogicalTensor:
        return self.const(name, 1.0 + 0.1 * self.rng.standard_normal(n, dtype=np.float32))

    def op(self, kind: dg.OpKind, ins, name: str, **attrs) -> dg.LogicalTensor:
        out = self.tensor(name)
        self.g.add_op(dg.Op(self.next_op, kind, ins, [out], attrs, name=name))
        self.next_op += 1
        return out


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
    b = _Builder(np.random.default_rng(seed))
    K = dg.OpKind
    x = dg.LogicalTensor(0, dg.f32, [seq, hidden], name="x")
    mask = dg.LogicalTensor(1, dg.f32, [seq, seq], name="mask")
    scale = b.const("scale", np.array([1.0 / np.sqrt(d)], np.float32))

    h = x
    for i in range(layers):
        p = f"l{i}."
        wq, wk, wv, wo = (b.linear(p + w, hidden, hidden) for w in ("wq", "wk", "wv", "wo"))
        w1, w2 = b.linear(p + "w1", hidden, ffn), b.linear(p + "w2", ffn, hidden)
        g_attn, g_mlp = b.gamma(p + "attn_norm", hidden), b.gamma(p + "mlp_norm", hidden)

        a = b.op(K.RMSNorm, [h, g_attn], p + "attn_norm_out", epsilon=EPS)
        heads_of = {}
        for nm, w in (("q", wq), ("k", wk), ("v", wv)):
            t = b.op(K.MatMul, [a, w], p + nm)
            t = b.op(K.StaticReshape, [t], p + nm + "_split", shape=[seq, heads, d])
            heads_of[nm] = b.op(K.StaticTranspose, [t], p + nm + "_heads", order=[1, 0, 2])
        s = b.op(K.MatMul, [heads_of["q"], heads_of["k"]], p + "scores", transpose_b=True)  # [heads, seq, seq]
        s = b.op(K.Multiply, [s, scale], p + "scores_scaled")
        s = b.op(K.Add, [s, mask], p + "scores_masked")
        s = b.op(K.SoftMax, [s], p + "probs", axis=-1)
        o = b.op(K.MatMul, [s, heads_of["v"]], p + "attn")  # [heads, seq, d]
        o = b.op(K.StaticTranspose, [o], p + "attn_merge_t", order=[1, 0, 2])
        o = b.op(K.StaticReshape, [o], p + "attn_merged", shape=[seq, hidden])
        o = b.op(K.MatMul, [o, wo], p + "attn_out")
        h = b.op(K.Add, [h, o], p + "resid_attn")

        m = b.op(K.RMSNorm, [h, g_mlp], p + "mlp_norm_out", epsilon=EPS)
        m = b.op(K.MatMul, [m, w1], p + "up")
        m = b.op(K.SiLU, [m], p + "act")
        m = b.op(K.MatMul, [m, w2], p + "down")
        h = b.op(K.Add, [h, m], p + "resid_mlp")

    g_final = b.gamma("final_norm", hidden)
    y = b.op(K.RMSNorm, [h, g_final], "y", epsilon=EPS)

    b.g.finalize()
    parts = b.g.get_partitions()
    if len(parts) != 1 or not parts[0].is_supported():
        raise RuntimeError(f"the stack should be one supported partition, got {parts}")
    return Stack(
        graph=b.g,
        partition=parts[0],
        x=x,
        mask=mask,
        weights=b.weights,
        output=y,
        constants=b.constants,
        params=b.params,
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
