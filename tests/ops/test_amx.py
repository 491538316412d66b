"""The AMX int8 products (backend/kernels/quant_amx.h, amx.h): prefill (16 rows and more) with
q8_0 / q4_0 weights on the AMX tiles, where the CPU has them and the OS enabled them.

The machine these tests were written on has no AMX, so they test what can be tested anywhere:
- the rule deciding whether the tiles are used, a pure function of what the probe reads
  (CPUID bits, XCR0, Linux's permission, the kernel level, DYNGRAPH_AMX), on every combination
  of its inputs, and this process's answer against the rule on what the probe read;
- the products' algorithm (rounding, weight packing into the tiles' layout, the padded edges,
  the per-block scaling) run on emulated tiles (plain C++ with the instructions' documented
  semantics) against numpy on the same rounded activations, and against the products that
  run here through the public API where those are integer ones too (VNNI on a VNNI machine; on
  an AMX machine the real tiles; elsewhere prefill multiplies dequantized weights in f32).
The mapping of the tile operations to the AMX instructions is compiled but runs only on AMX
hardware; there these tests compare the emulation with it.
"""

import itertools
import platform
import subprocess
import textwrap

import numpy as np
import pytest

import dyngraph as dg
from oputil import compile_weight_product
from quant_rounding import rounded_rows
from subproc import IMPORT_TESTS, run_python

quants = pytest.importorskip("gguf.quants")
Q = pytest.importorskip("gguf").GGMLQuantizationType

B = dg._backend
LEVELS = ["generic", "avx2", "avx512", "avx512vnni"]
TILE, INT8 = 1 << 24, 1 << 25  # CPUID.(7,0):EDX
OSXSAVE = 1 << 27  # CPUID.1:ECX
XTILECFG, XTILEDATA = 1 << 17, 1 << 18  # XCR0
U = 2.0**-24  # f32 unit roundoff


def cpu_flags() -> set:
    try:
        with open("/proc/cpuinfo") as f:
            return next((set(line.split(":", 1)[1].split()) for line in f if line.startswith("flags")), set())
    except OSError:
        return set()


# -- the rule ---------------------------------------------------------------------------------------


def test_the_rule_on_every_combination_of_its_inputs():
    # each input's bits with every other bit of the same register clear and set (they must not matter)
    edx = [bits | other for bits in (0, TILE, INT8, TILE | INT8) for other in (0, 0xFFFFFFFF & ~(TILE | INT8))]
    ecx = [bits | other for bits in (0, OSXSAVE) for other in (0, 0xFFFFFFFF & ~OSXSAVE)]
    xcr0 = [bits | other for bits in (0, XTILECFG, XTILEDATA, XTILECFG | XTILEDATA)
            for other in (0, 0x7, 0xFFFFFFFFFFFFFFFF & ~(XTILECFG | XTILEDATA))]
    envs = [None, "0", "1", "", "01", "yes"]  # only "1" switches it on (opt-in, amx.h)
    yes = 0
    for e, c, x, permitted, isa, env in itertools.product(edx, ecx, xcr0, (False, True), LEVELS, envs):
        expected = ((e & TILE) and (e & INT8) and (c & OSXSAVE) and (x & XTILECFG) and (x & XTILEDATA)
                    and permitted and isa == "avx512vnni" and env == "1")
        got = B.amx_rule(leaf7_edx=e, leaf1_ecx=c, xcr0=x, permitted=permitted, isa=isa, env=env)
        assert got is bool(expected), (hex(e), hex(c), hex(x), permitted, isa, env)
        yes += got
    # the yes cases: the noise combinations of the three registers, with DYNGRAPH_AMX=1
    assert yes == 2 * 2 * 3


def test_the_rule_needs_a_known_level():
    with pytest.raises(ValueError):
        B.amx_rule(TILE | INT8, OSXSAVE, XTILECFG | XTILEDATA, True, "amx")


def test_the_process_answer_is_the_rule_on_what_the_probe_read():
    p = B.amx_probe()
    inputs = {k: p[k] for k in ("leaf7_edx", "leaf1_ecx", "xcr0", "permitted", "isa", "env")}
    assert B.amx_int8() is (B.amx_compiled() and B.amx_rule(**inputs))
    assert p["isa"] == B.kernel_isa()
    # the permission is requested only where it decides the answer, and refused means off
    assert p["requested"] is (B.amx_compiled() and B.amx_rule(**dict(inputs, permitted=True)))
    if not p["requested"]:
        assert p["permitted"] is False
    if B.amx_compiled():
        # the probe read the CPU as Linux does (cpuinfo has no osxsave: Linux clears it)
        flags = cpu_flags()
        if flags:
            assert bool(p["leaf7_edx"] & TILE) == ("amx_tile" in flags)
            assert bool(p["leaf7_edx"] & INT8) == ("amx_int8" in flags)
        if not p["leaf1_ecx"] & OSXSAVE:
            assert p["xcr0"] == 0
    if "amx_int8" not in cpu_flags():
        assert B.amx_int8() is False


PROBE = textwrap.dedent("""
    import dyngraph as dg
    p = dg._backend.amx_probe()
    print(p["env"], p["isa"], p["requested"], dg._backend.amx_int8())
""")


@pytest.mark.parametrize("env,expected_env,expected_isa", [
    ({"DYNGRAPH_AMX": None}, "None", None),  # off by default: not asked for
    ({"DYNGRAPH_AMX": "0"}, "0", None),
    ({"DYNGRAPH_AMX": "1", "DYNGRAPH_KERNEL_ISA": "avx2"}, "1", "avx2"),
    ({"DYNGRAPH_AMX": None, "DYNGRAPH_KERNEL_ISA": "avx2"}, "None", "avx2"),
    ({"DYNGRAPH_AMX": None, "DYNGRAPH_KERNEL_ISA": "avx512"}, "None", "avx512"),
])
def test_the_switches_turn_it_off_before_the_permission_is_asked(env, expected_env, expected_isa):
    r = run_python(PROBE, env_vars=env)
    assert r.returncode == 0, r.stderr
    got_env, isa, requested, answer = r.stdout.split()
    assert got_env == expected_env
    if expected_isa:
        assert LEVELS.index(isa) <= LEVELS.index(expected_isa)
    assert (requested, answer) == ("False", "False")


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64") or platform.system() != "Linux",
                    reason="the tile code is built for x86-64 Linux only")
def test_the_tile_code_is_built_in_where_the_compiler_has_amx():
    # kernels/amx.h: GCC >= 11 or Clang >= 12 (asked of the compiler that built ggml, the same here)
    cc = B.build_info()["c_compiler"]
    r = subprocess.run([cc, "-dM", "-E", "-x", "c", "/dev/null"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    defs = dict(line.split()[1:3] for line in r.stdout.splitlines() if len(line.split()) == 3)
    clang = "__clang__" in r.stdout
    major = int(defs["__clang_major__"] if clang else defs["__GNUC__"])
    assert B.amx_compiled() is (major >= (12 if clang else 11))


# -- the products on the real tiles, where the machine has them ---------------------------------------


def amx_hardware() -> bool:
    """The CPU lists AMX-TILE and AMX-INT8 and the OS enabled the tile state (what the rule reads
    but the opt-in and Linux's permission)."""
    p = B.amx_probe()
    return bool(B.amx_compiled() and p["leaf7_edx"] & TILE and p["leaf7_edx"] & INT8
                and p["leaf1_ecx"] & OSXSAVE and (p["xcr0"] & (XTILECFG | XTILEDATA)) == (XTILECFG | XTILEDATA))


REAL = IMPORT_TESTS + textwrap.dedent("""
    import numpy as np
    import dyngraph as dg
    from gguf import GGMLQuantizationType as Q
    from gguf.quants import quantize
    from oputil import compile_weight_product

    assert dg._backend.amx_int8(), dg._backend.amx_probe()
    rng = np.random.default_rng(3)
    cases = 0
    for storage in ("q8_0", "q4_0"):
        for k in (32, 96, 1024):
            for n in (1, 17, 64, 130):
                raw = quantize(rng.standard_normal((n, k)).astype(np.float32), getattr(Q, storage.upper()))
                for threads in (1, 2):
                    cp = compile_weight_product(n, k, dg.StoredWeight((n, k), storage, raw),
                                                dg.Engine(dg.Engine.CPU, num_threads=threads))
                    for m in (16, 33, 100):
                        a = rng.standard_normal((m, k)).astype(np.float32) * rng.uniform(0.01, 100, (m, 1)).astype(np.float32)
                        a[m // 2, :32] = 0
                        (real,) = cp(a)
                        emulated = np.zeros((m, n), dtype=np.float32)
                        dg._backend.quant_gemm_emulated_amx(storage, a, raw, n, emulated)
                        assert np.array_equal(real, emulated), (storage, k, n, threads, m, np.abs(real - emulated).max())
                        cases += 1
    print(cases)
""")


@pytest.mark.skipif(not amx_hardware(), reason="needs a CPU with AMX-TILE and AMX-INT8 enabled by the OS")
def test_the_real_tiles_give_the_emulated_tiles_bits():
    # The same algorithm on the instructions (DYNGRAPH_AMX=1 asks for them) and on their emulation:
    # the same int32 sums and the same f32 steps in the same order, so the same bits, at every thread
    # count (the threads split the columns). This is what found GCC 12's _tile_loadconfig dropping the
    # configuration's stores (quant_amx.cpp): SIGILL at the first tile load.
    r = run_python(REAL, env_vars={"DYNGRAPH_AMX": "1", "DYNGRAPH_KERNEL_ISA": None}, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == str(2 * 3 * 4 * 2 * 3)


# -- the products on emulated tiles -------------------------------------------------------------------


def stored(w: np.ndarray, storage: str):
    raw = quants.quantize(w, getattr(Q, storage.upper()))
    deq = quants.dequantize(raw, getattr(Q, storage.upper())).reshape(w.shape)
    return raw, deq.astype(np.float64)


def emulated(storage, a, raw, n, pad=3):
    """The emulated products into a wider output (ldc = n + pad), whose padding must stay as it was."""
    out = np.full((a.shape[0], n + pad), 7.5, dtype=np.float32)
    B.quant_gemm_emulated_amx(storage, a, raw, n, out)
    assert (out[:, n:] == 7.5).all(), "written past its N columns"
    return out[:, :n]


def compiled(k, n, storage, raw):
    return compile_weight_product(n, k, dg.StoredWeight((n, k), storage, raw), dg.Engine(dg.Engine.CPU, num_threads=2),
                                  repack_weights=False)


def test_the_emulated_dot_product_is_the_documented_one():
    # TDPBSSD: C[m][n] += sum over k4, i < 4 of A[m][4 k4 + i] * B[k4][4 n + i] (signed bytes), for
    # tiles of any legal shape; the emulation refuses shapes the hardware would (#UD)
    rng = np.random.default_rng(2)
    for rows, k4, n in ((16, 8, 16), (16, 16, 16), (3, 5, 7), (1, 1, 1)):
        a = rng.integers(-128, 128, (rows, 4 * k4), dtype=np.int8)
        b = rng.integers(-128, 128, (k4, 4 * n), dtype=np.int8)
        c = rng.integers(-2**20, 2**20, (rows, n), dtype=np.int32)
        ref = c + np.einsum("mki,kni->mn", a.reshape(rows, k4, 4).astype(np.int64),
                            b.reshape(k4, n, 4).astype(np.int64))
        assert np.array_equal(B.amx_emulated_dpbssd(c, a, b), ref), (rows, k4, n)
    extremes = B.amx_emulated_dpbssd(np.zeros((16, 16), np.int32), np.full((16, 64), -128, np.int8),
                                     np.full((16, 64), -128, np.int8))
    assert (extremes == 64 * 128 * 128).all()
    for c, a, b in (((16, 16), (16, 32), (16, 64)),  # A's colsb / 4 != B's rows
                    ((8, 16), (16, 32), (8, 64)),  # C's rows != A's
                    ((16, 8), (16, 32), (8, 64)),  # C's colsb != B's
                    ((17, 16), (17, 32), (8, 64)),  # past 16 rows
                    ((16, 17), (16, 32), (8, 68))):  # past 64 bytes
        with pytest.raises(RuntimeError, match="emulated AMX"):
            B.amx_emulated_dpbssd(np.zeros(c, np.int32), np.zeros(a, np.int8), np.zeros(b, np.int8))


ROWS = (16, 17, 31, 64, 100)  # one tile of rows, a padded one, two, four, and 7 with the last padded
COLUMNS = (1, 15, 16, 33, 130)  # padded columns, one tile, three, and 130 in three chunks of 64
TIES = np.array([127, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 126.5] + [3.25] * 24, dtype=np.float32)  # amax 127: x exactly


def weight_scales(raw, storage, n, nb):
    """Each weight's block scale |d| (the f16 at the start of each block), as an (n, 32 nb) array."""
    d = raw.reshape(n, nb, -1)[:, :, :2].copy().view(np.float16)[:, :, 0].astype(np.float64)
    return np.repeat(np.abs(d), 32, axis=1)


@pytest.mark.parametrize("storage", ["q8_0", "q4_0"])
@pytest.mark.parametrize("k", [32, 64, 96, 4096])
def test_emulated_tiles_match_numpy_and_the_products_running_here(storage, k):
    # Every block's dot products are exact int32 sums; the f32 work is one product of the two
    # scales, one of that with the sum and nb additions, each rounding once: against float64,
    # |error| <= (nb + 2) u S with S = sum_k |a_k| |w_k| (of the rounded values). The products
    # running here through the public API (VNNI, or on an AMX machine the real tiles) get
    # the same bound with their own S (the integer q4_0 kernels add -8 d sum(a) apart: S grows by
    # 8 |d| |a|), doubled for their lane sums and sgemm; the two differ by at most both bounds.
    # The activations' rows are strided (lda > K).
    rng = np.random.default_rng(k)
    nb = k // 32
    ours_here = B.kernel_isa() == "avx512vnni"  # integer products for 8+ rows (else dequantized, f32)
    for n in COLUMNS:
        raw, deq = stored(rng.standard_normal((n, k), dtype=np.float32), storage)
        cp = compiled(k, n, storage, raw) if ours_here else None
        w_here = np.abs(deq) + (8 * weight_scales(raw, storage, n, nb) if storage == "q4_0" else 0)
        for m in ROWS:
            wide = rng.standard_normal((m, k + 32), dtype=np.float32)
            wide *= rng.uniform(0.01, 100, (m, 1)).astype(np.float32)  # rows of very different scales
            a = wide[:, :k]
            a[m // 2, :32] = 0  # an all-zero block
            a[m - 1, :32] = TIES  # halves: ties to even
            got = emulated(storage, a, raw, n)
            r = rounded_rows(np.ascontiguousarray(a))
            ref = r @ deq.T
            bound = (nb + 2) * U * (np.abs(r) @ np.abs(deq).T) + 1e-30
            assert (np.abs(got - ref) <= bound).all(), (storage, k, n, m, (np.abs(got - ref) / bound).max())
            if cp is not None:
                (here,) = cp(np.ascontiguousarray(a))
                bound_here = 2 * (nb + 4) * U * (np.abs(r) @ w_here.T)
                assert (np.abs(got - here) <= bound + bound_here).all(), (storage, k, n, m, B.kernel_isa())


@pytest.mark.parametrize("storage", ["q8_0", "q4_0"])
def test_nan_and_inf_activations_give_nan_where_the_other_variants_do(storage):
    # a block holding a NaN or an infinity gets scale NaN: every output of its row is NaN, no other row's
    rng = np.random.default_rng(5)
    k, n = 128, 37
    raw, _ = stored(rng.standard_normal((n, k), dtype=np.float32), storage)
    a = rng.standard_normal((20, k), dtype=np.float32)
    a[0, 3] = np.nan
    a[7, 100] = np.inf
    a[19, 64:96] = -np.inf
    a[12, 32:64] = 0
    got = emulated(storage, a, raw, n)
    bad = [0, 7, 19]
    assert np.isnan(got[bad]).all()
    assert np.isfinite(np.delete(got, bad, axis=0)).all()
    (here,) = compiled(k, n, storage, raw)(a)
    if B.kernel_isa() == "avx512vnni":  # the integer products: the same NaNs
        assert np.array_equal(np.isnan(got), np.isnan(here))
    else:  # dequantized weights in f32: inf times weights of either sign, or zero
        assert not np.isfinite(here[bad]).any() and np.isfinite(np.delete(here, bad, axis=0)).all()


# The same without AVX2 (DYNGRAPH_KERNEL_ISA=generic): the activations are rounded by the plain C++
# code the emulation falls back to, checked against numpy, NaN and inf included.
GENERIC = textwrap.dedent("""
    import numpy as np
    import dyngraph as dg
    from gguf import GGMLQuantizationType as Q
    from gguf.quants import dequantize, quantize

    assert dg._backend.kernel_isa() == "generic"
    rng = np.random.default_rng(11)
    for storage in ("q8_0", "q4_0"):
        for m, n, k in ((16, 15, 96), (33, 40, 64), (17, 1, 32)):
            raw = quantize(rng.standard_normal((n, k)).astype(np.float32), getattr(Q, storage.upper()))
            deq = dequantize(raw, getattr(Q, storage.upper())).reshape(n, k).astype(np.float64)
            a = rng.standard_normal((m, k)).astype(np.float32) * rng.uniform(0.01, 100, (m, 1)).astype(np.float32)
            a[1, :32] = 0
            a[2, :8] = (127, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 126.5)  # amax 127: x * 127 / amax = x, ties to even
            a[2, 8:32] = 3.25
            b = a.reshape(m, -1, 32)
            amax = np.abs(b).max(axis=-1, keepdims=True)
            q = np.rint(b * (np.float32(127) / np.where(amax > 0, amax, 1)).astype(np.float32))
            r = (q.astype(np.float64) * (amax / np.float32(127)).astype(np.float64)).reshape(m, k)
            out = np.zeros((m, n), dtype=np.float32)
            dg._backend.quant_gemm_emulated_amx(storage, a, raw, n, out)
            bound = (k // 32 + 2) * 2.0**-24 * (np.abs(r) @ np.abs(deq).T) + 1e-30
            assert (np.abs(out - r @ deq.T) <= bound).all(), (storage, m, n, k)
            a[0, 5], a[m - 1, k - 1] = np.nan, np.inf
            dg._backend.quant_gemm_emulated_amx(storage, a, raw, n, out)
            assert np.isnan(out[[0, m - 1]]).all() and np.isfinite(out[1:m - 1]).all(), (storage, m, n, k)
    print("ok")
""")


def test_emulated_tiles_with_the_plain_rounding():
    r = run_python(GENERIC, env_vars={"DYNGRAPH_KERNEL_ISA": "generic"}, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_the_hook_checks_its_arguments():
    a = np.zeros((16, 64), dtype=np.float32)
    raw, _ = stored(np.ones((4, 64), dtype=np.float32), "q8_0")
    out = np.zeros((16, 4), dtype=np.float32)
    with pytest.raises(ValueError):
        B.quant_gemm_emulated_amx("q4_1", a, raw, 4, out)
    with pytest.raises(ValueError):
        B.quant_gemm_emulated_amx("q8_0", a[:, :48], raw, 4, out)  # K not a multiple of 32
    with pytest.raises(ValueError):
        B.quant_gemm_emulated_amx("q8_0", a, raw, 5, out)  # not 5 rows of weights
    B.quant_gemm_emulated_amx("q8_0", a, raw, 4, out)
    assert (out == 0).all()
