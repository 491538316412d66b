"""Building C programs against the C API as a user would: the header and library the
installed package points at (dyngraph.get_include(), get_library_dir()), the system C
compiler, and nothing of Python."""

from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np

import dyngraph as dg

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
EXAMPLES = os.path.join(ROOT, "examples", "c")


def compiler(cxx: bool = False) -> str:
    names = (os.environ.get("CXX"), "c++", "g++", "clang++") if cxx else (os.environ.get("CC"), "cc", "gcc", "clang")
    for n in names:
        if n and shutil.which(n):
            return shutil.which(n)
    raise AssertionError(f"no {'C++' if cxx else 'C'} compiler on PATH (the C API tests need one)")


def build(src: str, out: str, extra=(), cxx: bool = False) -> str:
    """Compile `src` (a path) to the executable `out` against the installed C API; returns `out`."""
    lib = dg.get_library_dir()
    std = "-std=c++17" if cxx else "-std=c99"
    # (tools/sanitize.sh: DG_C_API_CFLAGS builds them with ASan and UBSan, as the library it links)
    san = os.environ.get("DG_C_API_CFLAGS", "").split()
    cmd = [compiler(cxx), std, "-O1", "-g", "-Wall", "-Wextra", "-Werror", *san, f"-I{dg.get_include()}", src, *extra,
           f"-L{lib}", f"-Wl,-rpath,{lib}", "-ldyngraph", "-lm", "-o", out]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, f"{' '.join(cmd)}\n{r.stderr}"
    return out


def run(exe, *args, timeout=120, check=True) -> subprocess.CompletedProcess:
    """Run a C program in an environment without Python's paths (none of its libraries can come from there)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    if not os.environ.get("DG_C_API_CFLAGS"):  # (a sanitized library needs the runtime preloaded)
        env.pop("LD_PRELOAD", None)
    r = subprocess.run([exe, *map(str, args)], capture_output=True, text=True, timeout=timeout, env=env)
    if check:
        assert r.returncode == 0, f"{exe} {args} exited {r.returncode}:\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    return r


def load_check(exe, paths, *opts, timeout=600):
    """examples/c/load_check.c on files: {path: (status, message)}. The process must not die."""
    r = run(exe, *opts, *paths, timeout=timeout)
    out = {}
    for line in r.stdout.splitlines():
        path, status, msg = line.split("\t", 2)
        out[path] = (status, msg)
    return out


# dyngraph's Python error classes and the C API's status codes
STATUS_OF = {
    dg.IRError: "DG_ERR_IR",
    dg.ShapeError: "DG_ERR_SHAPE",
    dg.DTypeError: "DG_ERR_DTYPE",
    dg.ExecutionError: "DG_ERR_EXECUTION",
    dg.DeviceError: "DG_ERR_DEVICE",
    dg.CompileError: "DG_ERR_COMPILE",
}


def save_kv_partition(path) -> None:
    """The partition tests/c/test_api.c takes first: out = (cache after cache[pos] = new) @ ones(4, 2),
    cache an [8, 4] state."""
    s = dg.Dim("s", max=8)
    cache = dg.LogicalTensor(0, dg.f32, [8, 4], property=dg.STATE, name="cache")
    new = dg.LogicalTensor(1, dg.f32, [s, 4], name="new")
    pos = dg.LogicalTensor(2, dg.i64, [s], name="pos")
    w = dg.LogicalTensor(3, dg.f32, [4, 2], property=dg.CONSTANT, name="w")
    written, out = dg.LogicalTensor(4, dg.f32, name="written"), dg.LogicalTensor(5, dg.f32, name="out")
    g = dg.Graph()
    g.add_op(dg.Op(0, dg.OpKind.ScatterRows, [cache, pos, new], [written]))
    g.add_op(dg.Op(1, dg.OpKind.MatMul, [written, w], [out]))
    g.finalize()
    (p,) = g.get_partitions()
    cp = p.compile([new, pos, cache, w], [out], dg.Engine(num_threads=1), constants={3: np.ones((4, 2), np.float32)})
    cp.save(path)
