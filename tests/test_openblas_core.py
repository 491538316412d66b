"""OpenBLAS's kernels on Arm CPUs with SME: the scipy-openblas32 wheel (0.3.34) picks its armv9sme
kernels there, and their sgemm gives wrong products (dyngraph/_loader.py). dyngraph loads it with
another core type on such CPUs. The rule is a pure function of the CPU's features and the
environment, tested on every input here; tools/cross_aarch64.sh runs the suite on an emulated CPU
with SME (QEMU_CPU=max), where the products are checked against numpy."""

import ctypes
import os

import numpy as np
import pytest

import dyngraph as dg
from dyngraph import _loader
from subproc import run_python

A64_SME_SVE = "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm sve sve2 sme sme2"
A64_SME_ONLY = "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm sme sme2"
A64_N1 = "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp"


@pytest.mark.parametrize("features,environ,want", [
    (A64_SME_SVE, {}, "ARMV8SVE"),  # SVE kernels, length-agnostic
    (A64_SME_ONLY, {}, "NEOVERSEN1"),  # SME without SVE outside streaming mode: NEON
    (A64_N1, {}, None),  # no SME: OpenBLAS's own choice
    ("", {}, None),  # x86 (no Features line)
    (A64_SME_SVE, {"OPENBLAS_CORETYPE": "NEOVERSEV2"}, None),  # the user's choice stands
    (A64_SME_SVE, {"OPENBLAS_CORETYPE": ""}, None),
    ("sme", {"OTHER": "1"}, "NEOVERSEN1"),
    ("smefoo sveplus", {}, None),  # whole words only
])
def test_core_override_rule(features, environ, want):
    assert _loader.openblas_core_override(frozenset(features.split()), environ) == want


def test_arm_features_from_the_auxiliary_vector():
    hwcap_n1, hwcap_sve = 0x10FFF, 0x10FFF | (1 << 22)  # a Neoverse N1's AT_HWCAP, and with SVE
    assert _loader.arm_features_from_hwcaps(hwcap_n1, 0) == frozenset()
    assert _loader.arm_features_from_hwcaps(hwcap_sve, 0x2) == {"sve"}
    assert _loader.arm_features_from_hwcaps(hwcap_sve, 1 << 23) == {"sve", "sme"}
    assert _loader.arm_features_from_hwcaps(hwcap_n1, (1 << 23) | (1 << 37)) == {"sme"}
    if os.uname().machine != "aarch64":
        assert _loader.arm_cpu_features() == frozenset()


def _openblas():
    import scipy_openblas32

    lib = ctypes.CDLL(os.path.join(scipy_openblas32.get_lib_dir(), scipy_openblas32.get_library(fullname=True)),
                      mode=ctypes.RTLD_LOCAL)  # the copy dyngraph loaded: the same path, so the same handle
    core = lib.scipy_openblas_get_corename
    core.restype = ctypes.c_char_p
    return core().decode().lower()  # (x86's names are capitalized, "Haswell"; aarch64's not)


def test_this_process_loaded_openblas_by_the_rule():
    # the variable is set for the load only, so the environment now is the one the rule saw
    want = _loader.openblas_core_override(_loader.arm_cpu_features(), os.environ)
    assert _loader.openblas_coretype == want
    assert _openblas() != "armv9sme"
    if want is not None:
        assert _openblas() == want.lower() and "OPENBLAS_CORETYPE" not in os.environ


def test_a_users_core_type_reaches_openblas():
    # a core every x86-64 or aarch64 OpenBLAS build has, named as the user would
    core = "Haswell" if os.uname().machine in ("x86_64", "AMD64") else "NEOVERSEN1"
    r = run_python("import dyngraph, dyngraph._loader as l, test_openblas_core as t; "
                   "print(l.openblas_coretype, t._openblas() == '%s', dyngraph._backend.openblas_core())" % core.lower(),
                   env_vars={"OPENBLAS_CORETYPE": core,
                             "PYTHONPATH": os.pathsep.join([os.path.dirname(__file__), os.environ.get("PYTHONPATH", "")])})
    assert r.returncode == 0, r.stderr
    # openblas_core() is the name as OpenBLAS spells it (the report prints it): "Haswell" on x86-64,
    # "neoversen1" on aarch64 (found under QEMU, tools/cross_aarch64.sh)
    loaded, same, spelled = r.stdout.split()
    assert (loaded, same, spelled.lower()) == ("None", "True", core.lower())


def test_the_backend_names_the_core_openblas_runs():
    assert dg._backend.openblas_core().lower() == _openblas()


def test_products_through_openblas_match_numpy(rng):
    # f32 products of 64 rows and more over weights kept as rows go to OpenBLAS's sgemm (the path the
    # armv9sme kernels broke; repack_weights=False: not laid out in panels on x86-64)
    b = dg.GraphBuilder()
    x = b.input("x", dg.f32, [dg.Dim("n"), 54])
    w = rng.standard_normal((54, 40)).astype(np.float32)
    b.output(b.matmul(x, b.constant("w", w)))
    cp = b.compile(dg.Engine(dg.Engine.CPU, num_threads=1), repack_weights=False)
    assert cp.cache_info().panel_bytes == 0
    for n in (64, 100, 257):
        a = rng.standard_normal((n, 54)).astype(np.float32)
        (out,) = cp(a)
        np.testing.assert_allclose(out, a.astype(np.float64) @ w, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("core,coretype,refused", [
    ("armv9sme", None, True),
    ("ARMV9SME", None, True),
    ("armv9sme", "armv9sme", False),  # the user's choice stands, as the loader's rule says
    ("armv9sme", "", False),
    ("armv8sve", None, False),
    ("neoversen1", None, False),
    ("Haswell", None, False),
])
def test_an_engine_refuses_openblas_sme_kernels_by_the_rule(core, coretype, refused):
    # (a C program, or an OpenBLAS loaded before dyngraph, meets this at dg_engine_create / Engine())
    problem = dg._backend.openblas_core_problem(core, coretype)
    assert bool(problem) == refused
    if refused:
        assert "OPENBLAS_CORETYPE=ARMV8SVE" in problem and "armv9sme" in problem


def test_openblas_loaded_first_on_an_sme_cpu_warns_and_engines_refuse():
    if _loader.openblas_core_override(_loader.arm_cpu_features(), os.environ) is None:
        pytest.skip("this CPU has no SME (or OPENBLAS_CORETYPE is set): OpenBLAS picks no armv9sme kernels")
    # (a CPU engine makes its backend on first use: .impl)
    r = run_python("import warnings\nimport scipy_openblas32\n"
                   "with warnings.catch_warnings(record=True) as ws:\n    warnings.simplefilter('always')\n"
                   "    import dyngraph as dg\n"
                   "print('warned', [str(w.message) for w in ws if w.category is RuntimeWarning])\n"
                   "try:\n    dg.Engine().impl\nexcept dg.ExecutionError as e:\n    print('refused', e)\n")
    assert r.returncode == 0, r.stderr
    assert "warned ['OpenBLAS was loaded with its armv9sme kernels" in r.stdout and "refused OpenBLAS runs" in r.stdout
