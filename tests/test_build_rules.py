"""The instruction-set rule of ggml's build (third_party/ggml/ggml.cmake, issue 20).

ggml-cpu is never compiled with AVX512-FP16 (its f16 dot products would sum in
f16) nor AMX (tile code that needs the OS to enable the tiles), whatever
-march=native turns on. The CPU running the tests may have neither, so the
rule is tested on the flags the build recorded (dyngraph._backend.build_info()):
the compiler that built ggml is asked which macros those flags define when
-march=native means a Sapphire Rapids Xeon (AVX512-FP16, AVX512-BF16, AMX);
ggml's f16 vectors are __m512h exactly when __AVX512FP16__ is defined
(ggml-cpu/simd-mappings.h) and its AMX kernels exist exactly when __AMX_INT8__
is (ggml-cpu/amx/amx.h). Without the rule these tests fail. On Arm the same
holds for FP16 vector arithmetic (FEAT_FP16, which -mcpu=native turns on from
the Neoverse N1 on): ggml's f16 vectors and llamafile's f16 tiles are
float16x8_t accumulators exactly when __ARM_FEATURE_FP16_VECTOR_ARITHMETIC is
defined, and the build undefines it for ggml-cpu (third_party/ggml/arm_no_fp16_va.h).

Our own kernels' levels (backend/kernels/isa.h) have no AMX either: AMX int8
(backend/kernels/quant_amx.h) is a separate capability, compiled in functions
of their own (target attributes, not flags) and taken only where a runtime
check (backend/kernels/amx.h) says the OS enabled the tiles; it never makes
ggml-cpu's build use AMX.
"""

import platform
import shutil
import subprocess

import pytest

import dyngraph as dg

INFO = dg._backend.build_info()
X86 = platform.machine() in ("x86_64", "AMD64")
FORBIDDEN = ("__AVX512FP16__", "__AMX_TILE__", "__AMX_INT8__", "__AMX_BF16__", "__AMX_FP16__")
AN_AMX_CPU = "-march=sapphirerapids"  # AVX512-FP16, AVX512-BF16, AMX-TILE/INT8/BF16


def macros(flags):
    """The macros ggml's C compiler defines with `flags`."""
    cc = INFO["c_compiler"]
    assert shutil.which(cc), f"the compiler that built ggml ({cc}) is not here"
    r = subprocess.run([cc, *flags, "-dM", "-E", "-x", "c", "/dev/null"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return {line.split()[1] for line in r.stdout.splitlines() if line.startswith("#define ")}


def on_an_amx_cpu(flags):
    """ggml-cpu's flags as a build on a Sapphire Rapids machine gets them: -march=native is that CPU
    (a build without GGML_NATIVE gets it put first, as CFLAGS would)."""
    if any(f.startswith("-march=") for f in flags):
        return [AN_AMX_CPU if f == "-march=native" else f for f in flags]
    return [AN_AMX_CPU, *flags]


def test_the_build_info_describes_ggml():
    assert INFO["ggml"] in ("source", "wheel")
    assert set(INFO["ggml_cpu_has"]) >= {"avx2", "f16c", "avx512", "avx512_bf16", "amx_int8", "llamafile"}
    if INFO["ggml"] == "source" and X86:
        assert INFO["ggml_cpu_isa_flags"], "a source build records ggml-cpu's -m flags"


@pytest.mark.skipif(not X86, reason="the rule is about x86 instruction sets")
def test_the_probe_sees_what_an_amx_cpu_enables():
    # the check below means something only if the compiler turns these on for that CPU
    found = macros([AN_AMX_CPU])
    assert {"__AMX_TILE__", "__AMX_INT8__", "__AVX512BF16__"} <= found
    if "-mno-avx512fp16" in INFO["ggml_cpu_isa_flags"]:
        assert "__AVX512FP16__" in found


@pytest.mark.skipif(not X86, reason="the rule is about x86 instruction sets")
def test_ggml_cpu_is_built_without_avx512fp16_and_amx_on_an_amx_cpu():
    if INFO["ggml"] == "wheel":
        # the prebuilt wheel is an AVX2 build: none of it
        assert not INFO["ggml_cpu_has"]["avx512"] and not INFO["ggml_cpu_has"]["amx_int8"]
        return
    flags = INFO["ggml_cpu_isa_flags"]
    assert "-mno-avx512fp16" in flags or "__AVX512FP16__" not in macros([AN_AMX_CPU]), flags
    found = macros(on_an_amx_cpu(flags))
    assert not found & set(FORBIDDEN), (flags, sorted(found & set(FORBIDDEN)))
    assert "__AVX512BF16__" in found  # the rule takes nothing else away (bf16 dot products sum in f32)


@pytest.mark.skipif(not X86, reason="the rule is about x86 instruction sets")
def test_ggml_cpu_as_built_here_has_neither():
    # the flags of this build on this machine, and what the library was compiled to use
    assert not macros(INFO["ggml_cpu_isa_flags"]) & set(FORBIDDEN)
    assert INFO["ggml_cpu_has"]["amx_int8"] is False


def test_our_kernels_levels_have_no_amx_and_amx_is_guarded_at_run_time():
    # backend/kernels/isa.h: no AMX level to pick; AMX int8 is its own capability (kernels/amx.h),
    # on only where the CPU lists it (and the OS enabled it: tests/ops/test_amx.py tests the rule)
    assert dg._backend.kernel_isa() in ("generic", "avx2", "avx512", "avx512vnni")
    if dg._backend.amx_int8():
        assert dg._backend.kernel_isa() == "avx512vnni"
        with open("/proc/cpuinfo") as f:
            assert "amx_int8" in f.read()
    # and ggml-cpu's build still has none (the tests above); the capability does not change it
    assert INFO["ggml_cpu_has"]["amx_int8"] is False


def test_ggml_cpu_keeps_no_f16_sums_in_f16_vectors():
    # what ggml-cpu was compiled with: x86's AVX512-FP16 (above) or Arm's FP16 vector arithmetic
    assert INFO["ggml_cpu_has"]["fp16_va"] is False


@pytest.mark.skipif(X86, reason="the rule is about Arm's FP16 vector arithmetic")
def test_ggml_cpu_is_built_without_fp16_vector_arithmetic_on_a_cpu_with_it():
    if INFO["ggml"] == "wheel":
        pytest.skip("the prebuilt ggml is an x86-64 build")
    flags = INFO["ggml_cpu_isa_flags"]
    assert any(f.startswith("-include") and f.endswith("arm_no_fp16_va.h") for f in flags), flags
    a_graviton = "-mcpu=neoverse-n1"  # FP16 arithmetic, as -mcpu=native gives there
    assert "__ARM_FEATURE_FP16_VECTOR_ARITHMETIC" in macros([a_graviton])
    assert "__ARM_FEATURE_FP16_VECTOR_ARITHMETIC" not in macros([a_graviton, *flags])
    assert "__ARM_NEON" in macros([a_graviton, *flags])  # the rule takes nothing else away
