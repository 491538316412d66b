"""dyngraph's f32 MatMul (a constant [K, N] weight, as a compiled partition
holds it: in panels where the CPU has AVX2) against torch.matmul, shape by
shape, one thread each, pinned to one CPU, interleaved rounds: the time
ratio from the medians and from the minima, and each side's GFLOP/s.

    python tests/benchmarks/f32_products.py [--shapes 197x3072x768,1024x384x1536] [--rounds 31]

A plain script (not collected by pytest). docs/design/gemm-choices.md,
"Large K", has what it measured; gemm_choices.py compares the BLAS
libraries themselves.
"""

from __future__ import annotations

import argparse
import os
import sys

SHAPES = "197x768x768,197x768x3072,197x3072x768,1024x384x384,1024x384x1536,1024x1536x384,4096x384x1536"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default=SHAPES, help="comma-separated MxKxN")
    ap.add_argument("--rounds", type=int, default=31)
    ap.add_argument("--cpu", type=int, help="CPU to pin to (default: the last one allowed)")
    a = ap.parse_args()
    shapes = [tuple(int(v) for v in s.split("x")) for s in a.shapes.split(",")]
    os.sched_setaffinity(0, {a.cpu if a.cpu is not None else sorted(os.sched_getaffinity(0))[-1]})

    import numpy as np
    import torch

    import dyngraph as dg

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from gemm_choices import dyngraph_matmul, time_cases

    torch.set_num_threads(1)
    eng = dg.Engine(dg.Engine.CPU, num_threads=1)
    stream = dg.Stream(eng)
    rng = np.random.default_rng(0)
    print(f"# f32 products, 1 thread: dyngraph ({dg._backend.kernel_isa()} kernels) against torch "
          f"{torch.__version__} ({torch.backends.cpu.get_cpu_capability()})\n")
    print("| M x K x N | dyngraph ms | torch ms | ratio (medians) | ratio (minima) | dyngraph GFLOP/s | torch GFLOP/s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for M, K, N in shapes:
        W = rng.standard_normal((K, N), dtype=np.float32)
        A = rng.standard_normal((M, K), dtype=np.float32)
        C = np.empty((M, N), np.float32)
        run = dyngraph_matmul(dg, eng, stream, W)(A, C)
        run()
        ref = A.astype(np.float64) @ W
        err = np.abs(C - ref).max() / np.abs(ref).max()
        if not err < 1e-5:
            raise SystemExit(f"{M}x{K}x{N}: dyngraph's product is off by {err:.2e} of the largest value")
        tA, tW, tC = torch.from_numpy(A), torch.from_numpy(W), torch.empty(M, N)
        med, mn = time_cases({"dg": run, "torch": lambda: torch.matmul(tA, tW, out=tC)}, a.rounds, 0.02)
        flop = 2 * M * K * N
        print(f"| {M} x {K} x {N} | {med['dg'] / 1e6:.3f} | {med['torch'] / 1e6:.3f} | "
              f"{med['dg'] / med['torch']:.2f} | {mn['dg'] / mn['torch']:.2f} | {flop / med['dg']:.1f} | "
              f"{flop / med['torch']:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
