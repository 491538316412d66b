"""Our hand-vectorized kernels are compiled for several instruction sets and
picked at run time for the CPU: f32 products of 2-7 rows (AVX-512VL, AVX2 +
FMA, baseline) and of 8-63 rows with AVX-512F, 8-255 with AVX2 + FMA (else
OpenBLAS), products with q8_0/q4_0/q4_1 weights (AVX-512 VNNI integer kernels;
AVX2 integer kernels for 1-7 rows and dequantized chunks + the tiled f32 kernel
from 8; else ggml's product for 1-7 rows and dequantization + sgemm from 8). Each variant is asked for with DYNGRAPH_KERNEL_ISA in a fresh
process, which reports the variant it runs (the one asked for, or the best
below it this CPU has) and checks it against numpy."""

import os
import platform
import subprocess
import sys
import textwrap

import pytest

from subproc import IMPORT_TESTS, run_python

CHECK = textwrap.dedent("""
    import numpy as np
    import dyngraph as dg
    from oputil import compile_weight_product

    rng = np.random.default_rng(0)
    e = dg.Engine(dg.Engine.CPU, num_threads=2)
    for k, n in ((64, 40), (37, 19), (256, 1030)):
        W = rng.standard_normal((k, n)).astype(np.float32)
        cp = compile_weight_product(n, k, W, e, transpose_b=False)
        for m in range(1, 14):  # 12 and 13: past the blocks of 4 (AVX2), to sgemm
            a = rng.standard_normal((m, k)).astype(np.float32)
            (out,) = cp(a)
            ref = a.astype(np.float64) @ W.astype(np.float64)
            err = np.abs(out - ref).max() / np.abs(ref).max()
            assert err < 1e-5, (k, n, m, err)
    # quantized weights: our integer kernels round the activations to 8 bits (AVX2);
    # without them ggml's product (1-7 rows, 8-bit rounding too) or dequantized + sgemm in f32 (8 rows on)
    from gguf import GGMLQuantizationType as Q
    from gguf.quants import dequantize, quantize
    k, n = 96, 50
    for storage in ("q8_0", "q4_0", "q4_1"):
        W = rng.standard_normal((n, k)).astype(np.float32)
        raw = quantize(W, getattr(Q, storage.upper()))
        deq = dequantize(raw, getattr(Q, storage.upper())).reshape(n, k).astype(np.float64)
        cp = compile_weight_product(n, k, dg.StoredWeight((n, k), storage, raw), e, repack_weights=False)
        for m in (3, 8, 13):
            a = rng.standard_normal((m, k)).astype(np.float32)
            (out,) = cp(a)
            ref = a.astype(np.float64) @ deq.T
            err = np.abs(out - ref).max() / np.abs(ref).max()
            assert err < (2e-2 if m < 8 or dg._backend.kernel_isa() != "generic" else 1e-5), (storage, m, err)
    print(dg._backend.kernel_isa())
""")

ORDER = ["generic", "avx2", "avx512", "avx512vnni"]


def cpu_flags() -> set:
    try:
        with open("/proc/cpuinfo") as f:
            return next((set(line.split(":", 1)[1].split()) for line in f if line.startswith("flags")), set())
    except OSError:
        return set()


def best_isa() -> str:
    flags = cpu_flags()
    if platform.machine() not in ("x86_64", "AMD64") or not {"avx2", "fma", "f16c"} <= flags:
        return "generic"
    if not {"avx512f", "avx512vl"} <= flags:
        return "avx2"
    return "avx512vnni" if {"avx512bw", "avx512_vnni", "avx512vbmi"} <= flags else "avx512"


def variant(isa: str, check: str, clamped: str) -> str:
    """A variant's program: its check; above this CPU's level, where the check would run the best
    level's kernels again, only what it prints (the level it was clamped to)."""
    if ORDER.index(isa) <= ORDER.index(best_isa()):
        return IMPORT_TESTS + check
    return IMPORT_TESTS + "import dyngraph as dg\n" + clamped


# (DYNGRAPH_F32_PANELS=0: the f32 kernels over weights kept as rows, which products with weights that
# are not laid out in panels run; the panels' product: test_f32_panels.py, and F32_CHECK below)
@pytest.mark.parametrize("isa", ORDER)
def test_small_row_kernel_variant_matches_numpy(isa):
    r = run_python(variant(isa, CHECK, "print(dg._backend.kernel_isa())"),
                   env_vars={"DYNGRAPH_KERNEL_ISA": isa, "DYNGRAPH_F32_PANELS": "0"})
    assert r.returncode == 0, r.stderr
    expected = min(isa, best_isa(), key=ORDER.index)
    assert r.stdout.strip() == expected


# The integer kernels of every variant against numpy on the same rounding of
# the activations (per 32-value block: q = rint(x * 127 / amax) in f32, value
# q * amax / 127): exact integer dot products, so only f32 accumulation error
# is allowed; from 8 rows without VNNI, the weights dequantized in chunks and
# multiplied in f32, against numpy in float64. Row counts 1-40 (the 1-7 row
# kernels, the 8+ row tiles and every remainder of them), 1 and 2 threads, K of 1 to 18 blocks (groups of 4
# blocks and every partial last group), an odd number of weight rows, an
# all-zero block, rows of very different scales; then NaN and inf activations. The 1-7 row kernels come
# in 128-bit and 256-bit forms (quant_rows.cpp; the CPU's units pick one, DYNGRAPH_VECTOR_UNITS
# either): both run at every level.
QUANT_CHECK = textwrap.dedent("""
    import numpy as np
    import dyngraph as dg
    from gguf import GGMLQuantizationType as Q
    from gguf.quants import dequantize, quantize
    from oputil import compile_weight_product
    from quant_rounding import rounded_rows

    isa = dg._backend.kernel_isa()
    rng = np.random.default_rng(7)
    rows = list(range(1, 18)) + [23, 24, 31, 32, 33, 40, 1]
    for threads in (1, 2):
        e = dg.Engine(dg.Engine.CPU, num_threads=threads)
        for storage in ("q8_0", "q4_0", "q4_1"):
            for k, n in ((32, 37), (96, 50), (352, 45), (576, 19)):
                W = rng.standard_normal((n, k)).astype(np.float32)
                raw = quantize(W, getattr(Q, storage.upper()))
                deq = dequantize(raw, getattr(Q, storage.upper())).reshape(n, k).astype(np.float64)
                cp = compile_weight_product(n, k, dg.StoredWeight((n, k), storage, raw), e, repack_weights=False)
                for m in rows:
                    a = rng.standard_normal((m, k)).astype(np.float32) * rng.uniform(0.01, 100, (m, 1)).astype(np.float32)
                    a[m // 2, :32] = 0  # an all-zero block
                    (out,) = cp(a)
                    if isa == "generic":
                        continue  # ggml's product, or dequantized + sgemm: test_quant_matmul.py
                    # from 8 rows without VNNI: the weights dequantized and multiplied in f32
                    ref = rounded_rows(a) @ deq.T if m < 8 or isa == "avx512vnni" else a.astype(np.float64) @ deq.T
                    err = (np.abs(out - ref).max(axis=1) / np.maximum(np.abs(ref).max(axis=1), 1e-30)).max()
                    assert err < 1e-5, (isa, threads, storage, k, n, m, err)
                if isa == "generic":
                    continue
                for m in (1, 3, 8, 13):  # a NaN or an infinity makes its row's outputs NaN, and no other row's
                    a = rng.standard_normal((m, k)).astype(np.float32)
                    a[0, k // 2] = np.nan
                    a[m - 1, k - 1] = np.inf if m > 1 else np.nan
                    (out,) = cp(a)
                    # rounded rows: a NaN block; f32 products: inf times weights of either sign, or zero
                    assert np.isnan(out[0]).all() and not np.isfinite(out[m - 1]).any(), (isa, storage, m)
                    assert np.isfinite(out[1:m - 1]).all(), (isa, storage, m)
    print(isa, dg._backend.vector_units())
""")


# f32 products of 1 to 256 rows over weights kept as rows (on AVX-512: 1 row f32_matvec, 2-7 small_gemm, then our
# tiled kernel up to 63 rows, then OpenBLAS; with AVX2 f32_matvec at 1 row, small_gemm, the tiled kernel up
# to 255; generic: ggml at 1 row, small_gemm, OpenBLAS): row counts with every remainder of the 8- and 4-row
# tiles, K with and without a partial last vector and in 1-3 blocks (of up to 512 values
# with AVX-512, 1024 with AVX2), weight rows over several 256 KiB chunks and every
# remainder of the 3-row tiles, 1-2 threads; NaN and infinities reach their rows' outputs and no
# other's. The same over weights in panels (last panels of 4 to 40 weights, tiles' remainders).
F32_CHECK = textwrap.dedent("""
    import os
    import numpy as np
    import dyngraph as dg
    from oputil import compile_weight_product

    rng = np.random.default_rng(3)
    for threads in (1, 2):
        e = dg.Engine(dg.Engine.CPU, num_threads=threads)
        # (n: every remainder of the 3- and 6-weight tiles, at one thread and in the two threads' shares)
        for k, n in ((37, 19), (37, 20), (64, 21), (512, 100), (600, 701), (1100, 65), (2100, 40)):
            W = rng.standard_normal((n, k)).astype(np.float32)
            cp = compile_weight_product(n, k, W, e)
            assert cp.cache_info().panel_bytes == (4 * n * k if os.environ["DYNGRAPH_F32_PANELS"] == "1" else 0)
            for m in (1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 23, 31, 32, 33, 40, 63, 64, 70, 8, 1, 7, 130, 255, 256):
                a = rng.standard_normal((m, k)).astype(np.float32)
                (out,) = cp(a)
                ref = a.astype(np.float64) @ W.T.astype(np.float64)
                err = np.abs(out - ref).max() / np.abs(ref).max()
                assert err < 1e-5, (threads, k, n, m, err)
            a = rng.standard_normal((9, k)).astype(np.float32)
            a[2, k // 3] = np.nan
            a[5, k - 1] = np.inf
            (out,) = cp(a)
            assert np.isnan(out[2]).all() and not np.isfinite(out[5]).any(), (threads, k, n)
            assert np.isfinite(np.delete(out, [2, 5], axis=0)).all(), (threads, k, n)
            for at in (k // 3, k - 1):  # one row (f32_matvec with AVX2 and up), in its main loop and in its tail
                a = rng.standard_normal((1, k)).astype(np.float32)
                a[0, at] = np.inf
                (out,) = cp(a)
                assert not np.isfinite(out).any(), (threads, k, n, at)
    print(dg._backend.kernel_isa())
""")


# (units: the AVX-512 kernel's two tile shapes, 8 x 3 at full width and 4 x 6 where 512-bit
# operations are split, f32_gemm.cpp; the other levels have one. panels: the weights kept as rows
# (the kernels above) or laid out in panels (f32_panels.cpp, one tile shape per level))
@pytest.mark.parametrize("isa,units,panels", [(i, "512", p) for i in ORDER for p in "01"] +
                         [("avx512", "256", "0"), ("avx512vnni", "256", "0")])
def test_f32_product_variant_of_many_rows_matches_numpy(isa, units, panels):
    r = run_python(variant(isa, F32_CHECK, "print(dg._backend.kernel_isa())"),
                   env_vars={"DYNGRAPH_KERNEL_ISA": isa, "DYNGRAPH_VECTOR_UNITS": units, "DYNGRAPH_F32_PANELS": panels},
                   timeout=600)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == min(isa, best_isa(), key=ORDER.index)


# (512: the AVX-512 f32 kernel's full-width tiles, which the avx512 level's dequantized products run)
@pytest.mark.parametrize("isa,units", [(i, u) for i in ORDER for u in ("128", "256")] + [("avx512", "512")])
def test_quantized_weight_kernel_variant_is_exact_up_to_its_rounding(isa, units):
    pytest.importorskip("gguf")
    r = run_python(variant(isa, QUANT_CHECK, "print(dg._backend.kernel_isa(), dg._backend.vector_units())"),
                   env_vars={"DYNGRAPH_KERNEL_ISA": isa, "DYNGRAPH_VECTOR_UNITS": units}, timeout=600)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [min(isa, best_isa(), key=ORDER.index), units]


def cpu_identity() -> tuple:
    """(vendor_id, cpu family, model) from /proc/cpuinfo, or ("", 0, 0)."""
    try:
        with open("/proc/cpuinfo") as f:
            fields = dict(line.split(":", 1) for line in f.read().split("\n\n")[0].splitlines() if ":" in line)
    except OSError:
        return "", 0, 0
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    return fields.get("vendor_id", ""), int(fields.get("cpu family", 0)), int(fields.get("model", 0))


# Which CPUs issue 256-bit operations as two halves (isa.h, half_width_units: CPUID's FP128 bit, or
# by family and model where a hypervisor hides that leaf): AMD's Zen and Zen+ (family 17h below model
# 30h) and Hygon's Dhyana; not Zen 2 on, not Intel's. Which issue 512-bit ones as two (split_512_units):
# those and AMD's family 19h (Zen 4; its Zen 3 models have no AVX-512). Checked against this CPU's
# /proc/cpuinfo, and DYNGRAPH_VECTOR_UNITS overrides it either way.
def test_vector_units_follow_the_cpu_model_and_the_override():
    vendor, family, model = cpu_identity()
    # (the rules read x86's CPUID; elsewhere neither applies, whatever /proc/cpuinfo says: QEMU's user
    # mode passes the host's through, found by tools/cross_aarch64.sh on an x86 Zen 4)
    x86 = os.uname().machine in ("x86_64", "AMD64")
    half = x86 and ((vendor == "AuthenticAMD" and family == 0x17 and model < 0x30) or
                    (vendor == "HygonGenuine" and family == 0x18))
    split = x86 and vendor == "AuthenticAMD" and family == 0x19
    own = "128" if half else "256" if split else "512"
    code = "import dyngraph as dg; print(dg._backend.vector_units())"
    assert run_python(code).stdout.strip() == own, (vendor, family, model)
    for units in ("128", "256", "512"):
        assert run_python(code, env_vars={"DYNGRAPH_VECTOR_UNITS": units}).stdout.strip() == units
    # a value that is none of them: the CPU's
    assert run_python(code, env_vars={"DYNGRAPH_VECTOR_UNITS": "64"}).stdout.strip() == own


# The loops compiled for several levels (kernels/vector_clones.h: Winograd's transforms, attention's
# lanes, softmax and few-row products, GELU's erf and tanh forms, MatMul's bias) at every level this CPU has below
# its best (the best is what the rest of the suite runs): their own tests, in a fresh process with
# DYNGRAPH_KERNEL_ISA set, which runs the variant asked for (vector_level() says which).
VECTOR_LEVELS = {"generic": 0, "avx2": 1, "avx512": 2}
VECTOR_TESTS = ["test_winograd.py", "test_attention.py", "test_attention_blocks.py", "test_attention_lanes.py",
                "test_matmul_bias.py", "test_matmul_activation.py",
                "test_conv_epilogue.py",
                "test_norm.py", "test_pool.py",
                "test_elementwise.py::test_unary_f32_matches_numpy",
                "test_elementwise.py::test_unary_special_values_follow_numpy", "test_elementwise.py::test_gelu_limits",
                "test_elementwise.py::test_gelu_erf_relative_error_over_the_whole_range",
                "test_elementwise.py::test_gelu_erf_of_minus_infinity_is_its_limit",
                "test_elementwise.py::test_gelu_tanh_relative_error_over_the_whole_range",
                "test_elementwise.py::test_gelu_tanh_of_the_infinities_and_overflow_are_its_limits"]


@pytest.mark.parametrize("isa", [i for i in VECTOR_LEVELS if ORDER.index(i) < ORDER.index(best_isa())] or ["generic"])
def test_vectorized_loops_pass_their_tests_at_each_level(isa):
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, DYNGRAPH_KERNEL_ISA=isa)
    if env.get("DYNGRAPH_DEV") == "1":
        env["PYTHONPATH"] = os.path.join(here, "..", "..", "api") + os.pathsep + env.get("PYTHONPATH", "")
    level = subprocess.run([sys.executable, "-c", "import dyngraph as dg; print(dg._backend.vector_level())"],
                           env=env, capture_output=True, text=True, timeout=120)
    assert level.stdout.strip() == str(VECTOR_LEVELS[isa]), level.stderr
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                        *[os.path.join(here, t) for t in VECTOR_TESTS]],
                       env=env, capture_output=True, text=True, timeout=600, cwd=os.path.join(here, "..", ".."))
    assert r.returncode == 0 and " passed" in r.stdout and "failed" not in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]
