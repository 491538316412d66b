"""The benchmark cases, prepared once and shared by the pytest-benchmark suite
(test_bench_stack.py) and the side-by-side report (report.py).

Every dyngraph case times what a caller does per step: ``infer_outputs``
(which builds the graph on a cache miss) then ``execute``, into buffers
allocated beforehand. Reference cases time the numpy float32 forward of the
same model. All on one thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

import dyngraph as dg

from mlp import build_mlp
from stack import SEQ_MAX, build_stack, causal_mask

STACK_SEQ = 7  # the short prompt of the padded-vs-dynamic comparison
STACK_ALT_SEQ = 8  # the other length of the alternating rebuild case
MLP_BATCHES = (1, 8, 64, 256)


class Step:
    """One prepared execution: input and output tensors made once, then
    ``infer_outputs`` + ``execute`` per call."""

    def __init__(self, cp: dg.CompiledPartition, arrays: Sequence[np.ndarray]):
        eng = cp.engine
        self.cp = cp
        self.stream = dg.Stream(eng)
        self.ins = [dg.Tensor(lt, eng, a) for lt, a in zip(cp.get_inputs(), arrays)]
        out_lts = cp.infer_outputs(self.ins, build=False)
        self.out_arrays = [np.empty(lt.shape, lt.dtype.numpy) for lt in out_lts]
        self.outs = [dg.Tensor(lt, eng, a) for lt, a in zip(out_lts, self.out_arrays)]

    def __call__(self) -> np.ndarray:
        self.cp.infer_outputs(self.ins)
        self.cp.execute(self.stream, self.ins, self.outs)
        return self.out_arrays[0]


@dataclass
class Case:
    name: str  # unique, says what is timed
    group: str  # cases of a group compare with each other
    fn: Callable[[], np.ndarray]  # one timed call
    kind: str  # "dyngraph" or "numpy"
    expect: Optional[Callable[[], np.ndarray]] = None  # the correct result of fn(), for checking
    cp: Optional[dg.CompiledPartition] = None


class _Counted:
    def __init__(self, fn: Callable[[], np.ndarray]):
        self.fn = fn
        self.calls = 0

    def __call__(self) -> np.ndarray:
        self.calls += 1
        return self.fn()


def stack_cases(engine: dg.Engine, n: int = STACK_SEQ) -> Dict[str, Case]:
    """The decoder stack at seq ``n``: cached, two ways of forcing a rebuild,
    padded to the static maximum, and numpy."""
    st = build_stack()
    x, mask = st.make_inputs(n)
    x_alt, mask_alt = st.make_inputs(STACK_ALT_SEQ, seed=2)
    group = f"stack-seq{n}"
    cases: Dict[str, Case] = {}

    # (a) a cached shape: warmed once, every timed call is a cache hit
    cp = st.compile(engine)
    cached = Step(cp, [x, mask])
    cached()
    cases["cached"] = Case(f"stack dyngraph cached seq{n}", group, cached, "dyngraph", cp=cp)

    # (b1) a rebuild per call by clearing the cache first (the clear is timed too)
    cp_clear = st.compile(engine)
    step_clear = Step(cp_clear, [x, mask])

    def clear_then_step():
        cp_clear.clear_cache()
        return step_clear()

    cases["rebuild_clear"] = Case(f"stack dyngraph rebuild (clear_cache each call) seq{n}", group,
                                  _Counted(clear_then_step), "dyngraph", cp=cp_clear)

    # (b2) a rebuild per call by alternating two lengths through a cache of one graph
    cp_alt = st.compile(engine, cache_capacity=1)
    steps = [Step(cp_alt, [x, mask]), Step(cp_alt, [x_alt, mask_alt])]
    turn = [0]

    def alternate():
        s = steps[turn[0] & 1]
        turn[0] += 1
        return s()

    cases["rebuild_alt"] = Case(f"stack dyngraph rebuild (capacity 1, alternating seq {n}|{STACK_ALT_SEQ})", group,
                                _Counted(alternate), "dyngraph", cp=cp_alt)

    # (c) the same n rows padded to the static maximum, on a graph compiled for seq=SEQ_MAX
    static = build_stack(seq=SEQ_MAX)  # same seed: the same weights
    cp_pad = static.compile(engine)
    padded = np.zeros((SEQ_MAX, st.hidden), np.float32)
    pad_step = Step(cp_pad, [padded, causal_mask(SEQ_MAX)])
    pad_step()

    def pad_and_step():
        padded[:n] = x  # the caller's padding copy is part of the padded path
        return pad_step()[:n]

    cases["padded"] = Case(f"stack dyngraph padded to static seq{SEQ_MAX} ({n} real rows)", group, pad_and_step,
                           "dyngraph", cp=cp_pad)

    # (d) numpy float32
    cases["numpy"] = Case(f"stack numpy f32 seq{n}", group, lambda: st.reference(x, mask, np.float32), "numpy")

    ref = st.reference(x, mask)
    for key in ("cached", "rebuild_clear", "padded", "numpy"):
        cases[key].expect = lambda: ref
    return cases


def mlp_cases(engine: dg.Engine, batches: Sequence[int] = MLP_BATCHES) -> Dict[str, Case]:
    """The example's MLP at several batch sizes (one compiled partition, all cached) vs numpy."""
    m = build_mlp()
    cp = m.compile(engine)
    rng = np.random.default_rng(3)
    cases: Dict[str, Case] = {}
    for b in batches:
        x = rng.standard_normal((b, m.hidden), dtype=np.float32)
        step = Step(cp, [x])
        step()
        ref = m.reference(x)
        group = f"mlp-batch{b}"
        cases[f"dyngraph{b}"] = Case(f"mlp dyngraph cached batch {b}", group, step, "dyngraph", lambda r=ref: r, cp=cp)
        cases[f"numpy{b}"] = Case(f"mlp numpy f32 batch {b}", group, lambda x=x: m.reference(x), "numpy",
                                  lambda r=ref: r)
    return cases


STATIC_ROWS = (7, 127)  # the shapes: a short prompt and the stack's maximum
STATIC_HIDDEN, STATIC_LAYERS = 512, 4


def _mlp_stack(rows, seed: int = 4):
    """4 x (x @ W + b -> GELU), hidden 512: ``rows`` an int (a static compile) or a Dim."""
    rng = np.random.default_rng(seed)
    b = dg.GraphBuilder()
    h = b.input("x", dg.f32, [rows, STATIC_HIDDEN])
    params = []
    for i in range(STATIC_LAYERS):
        w = rng.standard_normal((STATIC_HIDDEN, STATIC_HIDDEN), dtype=np.float32) / np.float32(np.sqrt(STATIC_HIDDEN))
        bias = rng.standard_normal(STATIC_HIDDEN, dtype=np.float32) * np.float32(0.1)
        params.append((w, bias))
        h = b.gelu(b.matmul(h, b.constant(f"w{i}", w), b.constant(f"b{i}", bias)))
    b.output(h)
    return b, params


def static_dynamic_cases(engine: dg.Engine, rows: Sequence[int] = STATIC_ROWS) -> Dict[str, Case]:
    """The same 4-layer MLP stack compiled for the fixed shape [n, 512] and
    with a dynamic first dimension run at n rows (both warmed: cache hits).

    Every row count gets its own dynamic partition, as it gets its own static one: one
    dynamic partition shared by all row counts would find its 4 MiB of weights in the
    cache after running another row count, where each static one reads its own copy
    (measured: static / dynamic at 7 rows 1.08-1.13 in one process with 127 rows beside
    it against 0.98-0.99 alone, with the same bare compute time)."""
    from mlp import erf

    cases: Dict[str, Case] = {}
    params = _mlp_stack(dg.Dim("rows", min=1, max=4096))[1]
    for n in rows:
        dyn = _mlp_stack(dg.Dim("rows", min=1, max=4096))[0].compile(engine)
        x = np.random.default_rng(5).standard_normal((n, STATIC_HIDDEN), dtype=np.float32)
        ref = x.astype(np.float64)
        for w, bias in params:
            ref = ref @ w + bias
            ref = 0.5 * ref * (1.0 + erf(ref / np.sqrt(2.0)))
        static = _mlp_stack(n)[0].compile(engine)
        group = f"static-vs-dynamic-{n}"
        for key, cp in (("static", static), ("dynamic", dyn)):
            step = Step(cp, [x])
            step()
            cases[f"{key}{n}"] = Case(f"mlp stack {key} compile, {n} rows", group, step, "dyngraph",
                                      lambda r=ref: r.astype(np.float32), cp=cp)
    return cases


def one_op_step(engine) -> Step:
    """x + x on a [n, 64] input with a dynamic n, prepared and run once at n = 16."""
    b = dg.GraphBuilder()
    x = b.input("x", dg.f32, [dg.Dim("n"), 64])
    b.output(b.add(x, x))
    cp = b.compile(engine)
    step = Step(cp, [np.ones((16, 64), np.float32)])
    step()
    return step


LLAMA_PREFILL = 32


def llama_cases(engine: dg.Engine) -> Dict[str, Case]:
    """The Llama-style decoder of dyngraph.models.llama (random weights): a prefill
    of LLAMA_PREFILL tokens, and one decode step after it (KV cache in state)."""
    from dyngraph.models.llama import LlamaConfig, LlamaRunner, random_weights

    cfg = LlamaConfig(vocab=2048, hidden=256, layers=4, heads=8, kv_heads=2, ffn=768, max_seq=256)
    runner = LlamaRunner(cfg, random_weights(cfg, seed=0), engine)
    cp = runner.cp
    prompt = np.random.default_rng(0).integers(0, cfg.vocab, LLAMA_PREFILL)
    pre = Step(cp, [prompt, np.arange(LLAMA_PREFILL)])
    dec = Step(cp, [prompt[:1].copy(), np.array([LLAMA_PREFILL])])  # the token after the prompt
    pre()
    dec()
    group = "llama-4layer"
    return {
        "prefill": Case(f"llama dyngraph prefill {LLAMA_PREFILL} tokens", group, pre, "dyngraph", cp=cp),
        "decode": Case("llama dyngraph decode step (1 token)", group, dec, "dyngraph", cp=cp),
    }


def check(case: Case, rtol: float = 2e-5, atol: float = 2e-5) -> None:
    """The case computes what it claims (not a timing check)."""
    if case.expect is not None:
        np.testing.assert_allclose(case.fn(), case.expect(), rtol=rtol, atol=atol, err_msg=case.name)


def calls_of(case: Case) -> int:
    """How many times a rebuild case's fn() ran (0 for the others)."""
    return case.fn.calls if isinstance(case.fn, _Counted) else 0


__all__: List[str] = ["Case", "Step", "calls_of", "check", "llama_cases", "mlp_cases", "one_op_step", "stack_cases",
                      "static_dynamic_cases"]
