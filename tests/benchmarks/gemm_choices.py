"""Which f32 product (and convolution) library wins at which shape: side by
side in one process, one thread, interleaved rounds, medians.

    python tests/benchmarks/gemm_choices.py --fetch      # pip download + unpack the wheels once
    python tests/benchmarks/gemm_choices.py [--rounds 51] [--sample-ms 2] [--cpu 1]

Products C[M, N] = A[M, K] . B[K, N] in f32 for M in {8, 32, 64, 128, 512} and
(K, N) in {(384,384), (384,1536), (1536,384), (576,576), (576,1536)}:

- dyngraph: what MatMul runs today, through the Python API (a MatMul with a
  constant weight [K, N], compiled once with a dynamic first dim, run at each
  M; an engine of 1 thread; the input and output Tensors made once). The time
  includes the Python call (`execute`); the `dyngraph call` line measures that
  floor on a 1x8x8 product.
- OpenBLAS: scipy-openblas32 (what dyngraph links), `scipy_cblas_sgemm` via
  ctypes, `scipy_openblas_set_num_threads(1)`.
- MKL: the `mkl` wheel from PyPI, `libmkl_rt` via ctypes, sequential layer
  (MKL_THREADING_LAYER=SEQUENTIAL, mkl_set_num_threads(1)), `cblas_sgemm`.
- oneDNN: the `onednn` wheel from PyPI, `dnnl_sgemm` via ctypes (its TBB
  runtime held to one thread by the process's CPU affinity, see --cpu).
- torch: torch.matmul, torch.set_num_threads(1) (PyTorch's own MKL / oneDNN).

The libraries run both with B as the user has it ([K, N], "nn") and with B
stored transposed ([N, K], "nt", as dyngraph keeps MatMul weights for ggml).
Every result is checked against numpy float64 (max |error| / max |ref|).
Weights and activations stay in cache between calls (each case reuses its
arrays): this compares the compute kernels, not memory bandwidth.

Convolutions (batch 1, 56x56, NCHW, f32): dyngraph's Convolution (a compiled
partition with constant weights) against torch.nn.functional.conv2d (oneDNN
underneath in PyTorch).

The whole process is pinned to one CPU (os.sched_setaffinity) before any
library starts its threads. Not collected by pytest (no test_ prefix).
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import os
import platform
import subprocess
import sys
import zipfile

WHEEL_DIR = "/tmp/gemm_choices_wheels"
# (requirement, what it is for); pip download --no-deps, so every runtime library is named here.
WHEELS = [
    ("mkl==2026.2.0", "MKL"), ("intel-openmp==2026.2.0", "MKL (libiomp5, not used: sequential layer)"),
    ("tbb==2023.2.0", "MKL, oneDNN (libtbb)"), ("tcmlib==1.6.0", "tbb (libhwloc)"),
    ("onednn==2026.1.0", "oneDNN"), ("onednn-devel==2026.1.0", "oneDNN headers"),
    ("intel-cmplr-lib-rt==2026.2.0", "oneDNN (libimf, libsvml, libintlc)"),
    ("intel-sycl-rt==2026.2.0", "oneDNN (libsycl: the wheel is built with the SYCL CPU runtime)"),
    ("intel-cmplr-lib-ur==2026.2.0", "libsycl (libur_loader)"),
]

SHAPES_M = [8, 32, 64, 128, 512]
SHAPES_KN = [(384, 384), (384, 1536), (1536, 384), (576, 576), (576, 1536)]
# (name, C in, C out, kernel, H=W)
CONVS = [("3x3 64->64", 64, 64, 3, 56), ("1x1 256->64", 256, 64, 1, 56), ("1x1 64->256", 64, 256, 1, 56)]


def fetch(dest: str) -> None:
    os.makedirs(dest, exist_ok=True)
    reqs = [r for r, _ in WHEELS]
    subprocess.check_call([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", dest, *reqs])
    for whl in glob.glob(os.path.join(dest, "*.whl")):
        with zipfile.ZipFile(whl) as z:
            z.extractall(os.path.join(dest, "x"))
    for f in glob.glob(os.path.join(dest, "x", "*.data", "data", "lib", "*")):
        os.chmod(f, 0o755)


def lib_dirs(dest: str):
    return sorted(glob.glob(os.path.join(dest, "x", "*.data", "data", "lib")))


def reexec_with_libs(dest: str) -> None:
    """dlopen reads LD_LIBRARY_PATH at process start: set it (and the thread
    settings, read when the libraries load) and start again."""
    if os.environ.get("GEMM_CHOICES_CHILD"):
        return
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = ":".join(lib_dirs(dest) + [env.get("LD_LIBRARY_PATH", "")]).rstrip(":")
    env.update(GEMM_CHOICES_CHILD="1", MKL_THREADING_LAYER="SEQUENTIAL", MKL_NUM_THREADS="1",
               OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", DNNL_VERBOSE="0")
    os.execve(sys.executable, [sys.executable, *sys.argv], env)


def cpu_features():
    flags = set()
    model = platform.processor()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
            elif line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
    want = ["avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16",
            "amx_tile", "amx_bf16", "amx_int8"]
    return model, [w for w in want if w in flags], [w for w in want if w not in flags]


# ---------------------------------------------------------------------------------------------- libraries

CblasRowMajor, CblasNoTrans, CblasTrans = 101, 111, 112
fp = ctypes.POINTER(ctypes.c_float)


def ptr(a):
    return a.ctypes.data_as(fp)



def cblas_sgemm(f):
    """A CBLAS cblas_sgemm entry point of a library, typed for ctypes."""
    f.restype = None
    f.argtypes = [ctypes.c_int] * 6 + [ctypes.c_float, fp, ctypes.c_int, fp, ctypes.c_int, ctypes.c_float, fp,
                                       ctypes.c_int]
    return f


def cblas_gemm(self, A, B, C, nt):
    """C = A B (B [K, N]) or A B^T (nt: B [N, K]) through self.sgemm, as a call to time."""
    M, K = A.shape
    N = C.shape[1]
    fn, pa, pb, pc = self.sgemm, ptr(A), ptr(B), ptr(C)
    tb, ldb = (CblasTrans, K) if nt else (CblasNoTrans, N)
    return lambda: fn(CblasRowMajor, CblasNoTrans, tb, M, N, K, 1.0, pa, K, pb, ldb, 0.0, pc, N)

class OpenBLAS:
    def __init__(self):
        import scipy_openblas32 as so
        self.lib = ctypes.CDLL(os.path.join(so.get_lib_dir(), "lib" + so.get_library() + ".so"))
        self.lib.scipy_openblas_set_num_threads(1)
        self.lib.scipy_openblas_get_config.restype = ctypes.c_char_p
        self.lib.scipy_openblas_get_corename.restype = ctypes.c_char_p
        self.version = (f"scipy-openblas32 {so.__version__} ({self.lib.scipy_openblas_get_config().decode()}; "
                        f"core {self.lib.scipy_openblas_get_corename().decode()})")
        f = self.lib.scipy_cblas_sgemm
        self.sgemm = cblas_sgemm(f)

    gemm = cblas_gemm


class MKL:
    def __init__(self, dest):
        found = sorted(glob.glob(os.path.join(dest, "x", "mkl-*.data", "data", "lib", "libmkl_rt.so.*")))
        if not found:
            raise FileNotFoundError(f"libmkl_rt.so.* under {dest} (run with --fetch)")
        self.lib = ctypes.CDLL(found[0])
        self.lib.MKL_Set_Num_Threads(1)  # the C names (the lowercase ones are Fortran: pointers)
        buf = ctypes.create_string_buffer(256)
        self.lib.MKL_Get_Version_String(buf, 256)
        self.lib.MKL_Get_Max_Threads.restype = ctypes.c_int
        self.version = f"{buf.value.decode().strip()} (max threads {self.lib.MKL_Get_Max_Threads()})"
        f = self.lib.cblas_sgemm
        self.sgemm = cblas_sgemm(f)

    gemm = cblas_gemm


class DnnlVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_int), ("minor", ctypes.c_int), ("patch", ctypes.c_int),
                ("hash", ctypes.c_char_p), ("cpu_runtime", ctypes.c_uint), ("gpu_runtime", ctypes.c_uint)]


class OneDNN:
    def __init__(self, dest):
        found = sorted(glob.glob(os.path.join(dest, "x", "onednn-*.data", "data", "lib", "libdnnl.so.*")))
        if not found:
            raise FileNotFoundError(f"libdnnl.so.* under {dest} (run with --fetch)")
        self.lib = ctypes.CDLL(found[0])
        self.lib.dnnl_version.restype = ctypes.POINTER(DnnlVersion)
        v = self.lib.dnnl_version().contents
        self.version = f"oneDNN {v.major}.{v.minor}.{v.patch} ({v.hash.decode()[:10]}, cpu runtime {v.cpu_runtime:#x})"
        f = self.lib.dnnl_sgemm
        f.restype = ctypes.c_int
        i64 = ctypes.c_int64
        # row-major: dnnl_sgemm(transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)
        f.argtypes = [ctypes.c_char, ctypes.c_char, i64, i64, i64, ctypes.c_float, fp, i64, fp, i64, ctypes.c_float,
                      fp, i64]
        self.sgemm = f

    def gemm(self, A, B, C, nt):
        M, K = A.shape
        N = C.shape[1]
        fn, pa, pb, pc = self.sgemm, ptr(A), ptr(B), ptr(C)
        tb, ldb = (b"T", K) if nt else (b"N", N)
        return lambda: fn(b"N", tb, M, N, K, 1.0, pa, K, pb, ldb, 0.0, pc, N)


# ---------------------------------------------------------------------------------------------- cases

def dyngraph_matmul(dg, eng, stream, W):
    K, N = W.shape
    b = dg.GraphBuilder()
    m = dg.Dim("m", min=1, max=4096)
    x = b.input("x", dg.f32, [m, K])
    b.output(b.matmul(x, b.constant("w", W)))
    cp = b.compile(eng)

    def at(A, C):
        xd = cp.get_inputs()[0].with_shape(list(A.shape))
        (yd,) = cp.infer_outputs([xd])
        ins, outs = [dg.Tensor(xd, eng, A)], [dg.Tensor(yd, eng, C)]
        return lambda: cp.execute(stream, ins, outs)
    return at


def dyngraph_conv(dg, eng, stream, X, Wt, bias):
    b = dg.GraphBuilder()
    x = b.input("x", dg.f32, list(X.shape))
    k = Wt.shape[2]
    y = b.op(dg.OpKind.Convolution, [x, b.constant("w", Wt), b.constant("b", bias)],
             dict(strides=[1, 1], dilations=[1, 1], pads_begin=[k // 2] * 2, pads_end=[k // 2] * 2, groups=1,
                  data_format="NCX", weights_format="OIX"))
    b.output(y)
    cp = b.compile(eng)
    (yd,) = cp.infer_outputs(cp.get_inputs())
    import numpy as np
    out = np.empty(yd.shape, np.float32)
    ins, outs = [dg.Tensor(cp.get_inputs()[0], eng, X)], [dg.Tensor(yd, eng, out)]
    return (lambda: cp.execute(stream, ins, outs)), out


def rel_err(got, ref) -> float:
    import numpy as np
    return float(np.abs(got.astype(np.float64) - ref).max() / max(np.abs(ref).max(), 1e-30))


def batched(fn, reps):
    def run():
        for _ in range(reps):
            fn()
    return run


def time_cases(cases, rounds, target_s):
    """cases: name -> fn. Each sample runs fn `reps` times (about target_s); ns per call: (medians, minima).
    On a shared machine the minimum is the sample least disturbed by other processes."""
    import time
    from timing import interleaved, median
    for fn in cases.values():
        fn()
    one = {}
    for name, fn in cases.items():
        t0 = time.perf_counter_ns()
        fn()
        fn()
        one[name] = max((time.perf_counter_ns() - t0) / 2, 1.0)
    reps = {n: max(1, int(target_s * 1e9 / one[n])) for n in cases}
    samples = interleaved({n: batched(f, reps[n]) for n, f in cases.items()}, rounds, warmup=1, max_seconds=120)
    return ({n: median(s) / reps[n] for n, s in samples.items()}, {n: min(s) / reps[n] for n, s in samples.items()})


def print_tables(rows, cols, stat):
    gf = lambda r, c: 2 * r[0] * r[1] * r[2] / r[3][c]
    calls = sorted(r[3]["dyngraph call"] for r in rows)
    floor = calls[len(calls) // 2]
    print(f"## f32 products C[M,N] = A[M,K] . B[K,N], GFLOP/s from the {stat} time "
          "(nn: B [K,N]; nt: B stored [N,K])\n")
    print("| M | K | N | " + " | ".join(cols) + " | best | dyngraph / best (time) | dyngraph / torch (time) "
          "| dyngraph less call floor / best |")
    print("|" + "---:|" * 3 + "---:|" * len(cols) + "---|---:|---:|---:|")
    for r in rows:
        best = max(cols, key=lambda c: gf(r, c))
        print(f"| {r[0]} | {r[1]} | {r[2]} | " + " | ".join(f"{gf(r, c):.1f}" for c in cols)
              + f" | {best} | {r[3]['dyngraph'] / r[3][best]:.2f} | {r[3]['dyngraph'] / r[3]['torch']:.2f} "
              f"| {(r[3]['dyngraph'] - floor) / r[3][best]:.2f} |")
    print(f"\ndyngraph call floor (1x8 . 8x8 through execute), {stat} over the runs above: "
          f"{floor / 1e3:.1f} us; largest max |error| / max |ref| vs numpy float64: "
          f"{max(r[4] for r in rows):.1e}\n")
    # per M: the geometric mean over the (K, N) of each column's time / the fastest time at that shape
    print("Geometric mean over the five (K, N) of time / best time, per M:\n")
    print("| M | " + " | ".join(cols) + " |")
    print("|---:|" + "---:|" * len(cols))
    for M in SHAPES_M:
        rs = [r for r in rows if r[0] == M]
        g = {}
        for c in cols:
            prod = 1.0
            for r in rs:
                prod *= r[3][c] / min(r[3][x] for x in cols)
            g[c] = prod ** (1 / len(rs))
        print(f"| {M} | " + " | ".join(f"{g[c]:.2f}" for c in cols) + " |")
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fetch", action="store_true", help="pip download + unpack the wheels into --wheels first")
    ap.add_argument("--wheels", default=WHEEL_DIR)
    ap.add_argument("--rounds", type=int, default=51)
    ap.add_argument("--sample-ms", type=float, default=2.0, help="time per sample (calls repeated to fill it)")
    ap.add_argument("--cpu", type=int, default=None, help="CPU to pin to (default: the last one allowed)")
    ap.add_argument("--no-convs", action="store_true")
    args = ap.parse_args()
    if args.fetch and not os.environ.get("GEMM_CHOICES_CHILD"):
        fetch(args.wheels)
    reexec_with_libs(args.wheels)

    allowed = sorted(os.sched_getaffinity(0))
    cpu = allowed[-1] if args.cpu is None else args.cpu
    os.sched_setaffinity(0, {cpu})  # before any library starts a thread pool (TBB sizes itself from this)

    import numpy as np
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    ob = OpenBLAS()
    mkl = MKL(args.wheels)
    dnnl = OneDNN(args.wheels)
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(1)
    import dyngraph as dg
    eng = dg.Engine(dg.Engine.CPU, num_threads=1)
    stream = dg.Stream(eng)

    model, have, lack = cpu_features()
    print(f"# f32 GEMM / convolution choices, 1 thread (pinned to CPU {cpu})\n")
    print(f"- CPU: {model}; has {', '.join(have)}; lacks {', '.join(lack)}")
    try:
        print(f"- load average: {open('/proc/loadavg').read().split()[:3]} on {os.cpu_count()} CPUs")
    except OSError:
        pass
    print(f"- dyngraph {getattr(dg, '__version__', '?')} (MatMul: backend/kernels/f32_matmul.h)")
    print(f"- OpenBLAS: {ob.version}")
    print(f"- MKL: {mkl.version}")
    print(f"- oneDNN: {dnnl.version}")
    print(f"- torch {torch.__version__} (capability {torch.backends.cpu.get_cpu_capability()}, "
          f"mkldnn {torch.backends.mkldnn.is_available()}, threads {torch.get_num_threads()})")
    print(f"- numpy {np.__version__}; {args.rounds} interleaved rounds, ~{args.sample_ms} ms per sample, medians\n")

    rng = np.random.default_rng(0)
    libs = {"OpenBLAS": ob, "MKL": mkl, "oneDNN": dnnl}
    cols = ["dyngraph"] + [f"{l} {t}" for l in libs for t in ("nn", "nt")] + ["torch"]
    rows = []
    tiny = dyngraph_matmul(dg, eng, stream, rng.standard_normal((8, 8), dtype=np.float32))
    tiny_fn = tiny(np.ones((1, 8), np.float32), np.empty((1, 8), np.float32))
    for K, N in SHAPES_KN:
        W = rng.standard_normal((K, N), dtype=np.float32) / np.float32(np.sqrt(K))
        Wt = np.ascontiguousarray(W.T)
        at = dyngraph_matmul(dg, eng, stream, W)
        Wtorch = torch.from_numpy(W)
        for M in SHAPES_M:
            A = rng.standard_normal((M, K), dtype=np.float32)
            ref = A.astype(np.float64) @ W.astype(np.float64)
            outs = {c: np.zeros((M, N), np.float32) for c in cols}
            cases = {"dyngraph": at(A, outs["dyngraph"])}
            for lname, lib in libs.items():
                cases[f"{lname} nn"] = lib.gemm(A, W, outs[f"{lname} nn"], False)
                cases[f"{lname} nt"] = lib.gemm(A, Wt, outs[f"{lname} nt"], True)
            At, Ct = torch.from_numpy(A), torch.from_numpy(outs["torch"])
            cases["torch"] = lambda At=At, Ct=Ct: torch.matmul(At, Wtorch, out=Ct)
            for fn in cases.values():
                fn()
            errs = {c: rel_err(outs[c], ref) for c in cols}
            bad = {c: e for c, e in errs.items() if not e < 1e-5}
            if bad:
                raise SystemExit(f"M={M} K={K} N={N}: wrong results {bad}")
            cases["dyngraph call"] = tiny_fn
            ns, ns_min = time_cases(cases, args.rounds, args.sample_ms / 1e3)
            rows.append((M, K, N, ns, max(errs.values()), ns_min))
            print(f"  M={M:4d} K={K:5d} N={N:5d}: " + ", ".join(f"{c} {2 * M * K * N / ns[c]:.1f}" for c in cols)
                  + f" GFLOP/s (max rel err {max(errs.values()):.1e})", file=sys.stderr, flush=True)

    for stat in ("median", "min"):
        print_tables([(r[0], r[1], r[2], r[3] if stat == "median" else r[5], r[4]) for r in rows], cols, stat)

    if args.no_convs:
        return
    print("\n## Convolutions, batch 1, NCHW f32, stride 1, 'same' padding, bias\n")
    print("| conv | H=W | GFLOP | dyngraph ms | torch ms | dyngraph GFLOP/s | torch GFLOP/s | dyngraph / torch (time) "
          "| same from the min times |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    with torch.no_grad():
        for name, C, O, k, H in CONVS:
            X = rng.standard_normal((1, C, H, H), dtype=np.float32)
            Wc = rng.standard_normal((O, C, k, k), dtype=np.float32) / np.float32(np.sqrt(C * k * k))
            bias = rng.standard_normal(O, dtype=np.float32)
            run_dg, out_dg = dyngraph_conv(dg, eng, stream, X, Wc, bias)
            Xt, Wtc, bt = torch.from_numpy(X), torch.from_numpy(Wc), torch.from_numpy(bias)
            ref = F.conv2d(Xt.double(), Wtc.double(), bt.double(), padding=k // 2).numpy()
            holder = {}

            def run_torch():
                holder["y"] = F.conv2d(Xt, Wtc, bt, padding=k // 2)
            run_dg()
            run_torch()
            e1, e2 = rel_err(out_dg, ref), rel_err(holder["y"].numpy(), ref)
            if not (e1 < 1e-5 and e2 < 1e-5):
                raise SystemExit(f"conv {name}: wrong results dyngraph {e1:.1e} torch {e2:.1e}")
            ns, ns_min = time_cases({"dyngraph": run_dg, "torch": run_torch}, args.rounds, 4 * args.sample_ms / 1e3)
            flop = 2 * O * C * k * k * H * H
            print(f"| {name} | {H} | {flop / 1e9:.3f} | {ns['dyngraph'] / 1e6:.3f} | {ns['torch'] / 1e6:.3f} | "
                  f"{flop / ns['dyngraph']:.1f} | {flop / ns['torch']:.1f} | {ns['dyngraph'] / ns['torch']:.2f} "
                  f"| {ns_min['dyngraph'] / ns_min['torch']:.2f} |")


if __name__ == "__main__":
    main()
