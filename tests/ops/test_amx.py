"""Whether this process may use the AMX int8 tiles (backend/kernels/amx.h).

The machine these tests were written on has no AMX, so they test what can be tested anywhere:
- the rule deciding whether the tiles are used, a pure function of what the probe reads
  (CPUID bits, XCR0, Linux's permission, the kernel level, DYNGRAPH_AMX), on every combination
  of its inputs, and this process's answer against the rule on what the probe read.
"""

import itertools
import platform
import subprocess
import textwrap

import pytest

import dyngraph as dg
from subproc import run_python

B = dg._backend
LEVELS = ["generic", "avx2", "avx512", "avx512vnni"]
TILE, INT8 = 1 << 24, 1 << 25  # CPUID.(7,0):EDX
OSXSAVE = 1 << 27  # CPUID.1:ECX
XTILECFG, XTILEDATA = 1 << 17, 1 << 18  # XCR0


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
    envs = [None, "0", "1", "", "00", "no"]  # only "0" switches it off
    yes = 0
    for e, c, x, permitted, isa, env in itertools.product(edx, ecx, xcr0, (False, True), LEVELS, envs):
        expected = ((e & TILE) and (e & INT8) and (c & OSXSAVE) and (x & XTILECFG) and (x & XTILEDATA)
                    and permitted and isa == "avx512vnni" and env != "0")
        got = B.amx_rule(leaf7_edx=e, leaf1_ecx=c, xcr0=x, permitted=permitted, isa=isa, env=env)
        assert got is bool(expected), (hex(e), hex(c), hex(x), permitted, isa, env)
        yes += got
    # the yes cases: the noise combinations of the three registers x the 5 environments that leave it on
    assert yes == 2 * 2 * 3 * 5


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
    ({"DYNGRAPH_AMX": "0"}, "0", None),
    ({"DYNGRAPH_KERNEL_ISA": "avx2"}, "None", "avx2"),
    ({"DYNGRAPH_KERNEL_ISA": "avx512"}, "None", "avx512"),
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
