"""Run the benchmark cases side by side in one process and print a table.

    python tests/benchmarks/report.py [--rounds N] [--max-seconds S]

(with DYNGRAPH_DEV=1 it uses the in-tree build in api/, like the tests).

Every round calls each case once, in a fresh random order (so no case
always follows the same neighbour, whose memory traffic it would inherit),
timed with time.perf_counter_ns; the table gives per-case medians over the
rounds, and a rebuild's cost over the cached case as the median of the
per-round differences. dyngraph runs on one engine thread and numpy on one BLAS thread.
The cases are those of the pytest-benchmark suite (cases.py); each is
checked against its reference before it is timed.
"""

from __future__ import annotations

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import gc  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
if os.environ.get("DYNGRAPH_DEV") == "1":
    sys.path.insert(0, os.path.join(HERE, "..", "..", "api"))

import numpy as np  # noqa: E402

import dyngraph as dg  # noqa: E402
from cases import LLAMA_PREFILL, STACK_SEQ, calls_of, check, llama_cases, mlp_cases, stack_cases  # noqa: E402
from threads import limit_blas_threads  # noqa: E402


def fmt(ns: float) -> str:
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e3:.1f} us"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=300, help="timed rounds (default 300)")
    ap.add_argument("--warmup", type=int, default=10, help="untimed rounds first (default 10)")
    ap.add_argument("--max-seconds", type=float, default=90.0, help="stop the timed rounds after this long")
    args = ap.parse_args()

    t_start = time.perf_counter()
    blas_one = limit_blas_threads(1)
    engine = dg.Engine(dg.Engine.CPU, num_threads=1)
    stack = stack_cases(engine)
    mlp = mlp_cases(engine)
    llama = llama_cases(engine)
    cases = list(stack.values()) + list(mlp.values()) + list(llama.values())
    for c in cases:
        check(c)

    samples = {c.name: [] for c in cases}
    rebuilds = [stack["rebuild_clear"], stack["rebuild_alt"]]
    build_us = {c.name: [] for c in rebuilds}  # the C++ build time of each timed rebuild, read after it
    for _ in range(args.warmup):
        for c in cases:
            c.fn()
    gc.collect()
    gc.disable()
    t_timed = time.perf_counter()
    rounds = 0
    clock = time.perf_counter_ns
    order = list(cases)
    shuffle = random.Random(0).shuffle
    try:
        for _ in range(args.rounds):
            shuffle(order)
            for c in order:
                t0 = clock()
                c.fn()
                samples[c.name].append(clock() - t0)
                if c.name in build_us:
                    build_us[c.name].append(c.cp.cache_info().last_build_seconds * 1e6)
            rounds += 1
            if time.perf_counter() - t_timed > args.max_seconds:
                break
    finally:
        gc.enable()
    med = {name: statistics.median(v) for name, v in samples.items()}

    # -- the table ---------------------------------------------------------------
    rows = []
    ref_stack = stack["numpy"]
    cached = med[stack["cached"].name]
    for key in ("cached", "rebuild_clear", "rebuild_alt", "padded"):
        c = stack[key]
        d, ref = med[c.name], med[ref_stack.name]
        note = ""
        if key.startswith("rebuild"):
            diffs = [a - b for a, b in zip(samples[c.name], samples[stack["cached"].name])]
            note = f"+{fmt(statistics.median(diffs))} over cached (median paired difference)"
        if key == "padded":
            note = f"dynamic seq{STACK_SEQ} is {d / cached:.1f}x faster than padded"
        rows.append((c.name, fmt(d), f"{fmt(ref)} (numpy seq{STACK_SEQ})", f"{d / ref:.2f}", note))
    for key, c in mlp.items():
        if not key.startswith("dyngraph"):
            continue
        b = key[len("dyngraph"):]
        d, ref = med[c.name], med[mlp[f"numpy{b}"].name]
        rows.append((c.name, fmt(d), f"{fmt(ref)} (numpy)", f"{d / ref:.2f}", ""))

    for key, n in (("prefill", LLAMA_PREFILL), ("decode", 1)):
        c = llama[key]
        d = med[c.name]
        rows.append((c.name, fmt(d), "", "", f"{n / (d * 1e-9):.0f} tok/s"))

    head = ("case", "dyngraph median", "reference median", "ratio dg/ref", "")
    widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(5)]
    line = "  ".join("-" * w for w in widths[:4])
    print(f"dyngraph {dg.__version__}, ggml {dg._backend.ggml_version()}, numpy {np.__version__}; "
          f"1 engine thread, 1 BLAS thread{'' if blas_one else ' (requested by environment only)'}; "
          f"{os.cpu_count()} CPUs")
    print(f"{rounds} interleaved rounds of {len(cases)} cases; medians of time.perf_counter_ns per call")
    print()
    print("  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip())
    print(line)
    for r in rows:
        print("  ".join(str(x).ljust(w) if i == 0 or i == 4 else str(x).rjust(w)
                        for i, (x, w) in enumerate(zip(r, widths))).rstrip())
    print()

    clear = stack["rebuild_clear"]
    info = clear.cp.cache_info()
    nodes = info.last_graph_nodes
    print(f"stack graph: {nodes} ggml nodes; {len(cases)} cases checked against their references; "
          f"rebuild cases built on every call ({info.builds} builds = {calls_of(clear)} calls, "
          f"{stack['rebuild_alt'].cp.cache_info().builds} = {calls_of(stack['rebuild_alt'])})")
    for c in rebuilds:
        b = statistics.median(build_us[c.name])
        print(f"C++ build_graph time inside '{c.name}' (cache_info, median): {b:.1f} us, {b / nodes:.2f} us/node")
    print(f"total {time.perf_counter() - t_start:.1f} s")


if __name__ == "__main__":
    main()
