"""The checked ggml layer (backend/gg.h) refuses every broken precondition of
the ggml calls the lowerings make with a typed error, never ggml's abort:
tests/cpp/test_gg_preconditions.cpp, compiled here against the ggml the
package runs on. And no lowering or kernel calls ggml around it."""

import os
import re
import shutil
import subprocess

import pytest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

# ggml functions that only read a tensor's metadata or convert scalars: they cannot fail
QUERIES = {
    "ggml_type_size", "ggml_row_size", "ggml_blck_size", "ggml_nelements", "ggml_nbytes", "ggml_is_contiguous",
    "ggml_can_repeat", "ggml_get_type_traits", "ggml_fp32_to_fp16", "ggml_fp32_to_bf16", "ggml_fp16_to_fp32",
    "ggml_bf16_to_fp32", "ggml_type_name", "ggml_is_quantized", "ggml_element_size", "ggml_nrows",
    "ggml_fp32_to_fp16_row", "ggml_fp32_to_bf16_row", "ggml_fp16_to_fp32_row", "ggml_bf16_to_fp32_row",
    "ggml_cpu_has_llamafile", "ggml_cpu_has_avx2", "ggml_cpu_has_avx512",
}
# our own helpers named ggml_* (dtype.h, lowering.h)
OURS = {"ggml_type_of", "ggml_dim"}


def in_tree_ggml_include(build_dir):
    """The ggml include dir of an in-tree build (the extension's own build tree, as
    tools/dev-build.sh makes it), from that tree's CMakeCache.txt: the ggml source tree
    it built (ggml_SOURCE_DIR: the sdist it fetched, or DYNGRAPH_GGML_SOURCE) or the
    prebuilt wheel's package (ggml_DIR). None where the extension has no build tree
    beside it (an installed package)."""
    cache = os.path.join(build_dir, "CMakeCache.txt")
    if not os.path.isfile(cache):
        return None
    entries = {}
    with open(cache) as f:
        for line in f:
            m = re.match(r"(ggml_SOURCE_DIR|ggml_DIR):\w+=(.*)$", line.strip())
            if m:
                entries[m.group(1)] = m.group(2)
    candidates = []
    if "ggml_SOURCE_DIR" in entries:
        candidates.append(os.path.join(entries["ggml_SOURCE_DIR"], "include"))
    if "ggml_DIR" in entries:  # <wheel>/libggml/lib64/cmake/ggml
        candidates.append(os.path.join(entries["ggml_DIR"], "..", "..", "..", "include"))
    found = [os.path.normpath(c) for c in candidates if os.path.isfile(os.path.join(c, "ggml.h"))]
    assert found, f"{cache} names no ggml tree with include/ggml.h ({entries})"
    return found[0]


def ggml_dirs():
    """(include dir, lib dir) of the ggml the package runs on. Its libraries sit
    next to the extension (or, for an in-tree build, in the build tree its rpath
    names). Its headers: for an in-tree build, those of the ggml that build tree
    compiled (its CMakeCache.txt says where, a shared source tree included); for
    an installed package, those of the ggml tree of the package's build in this
    checkout (build/*/ggml-sdist-* or ggml-wheel-*, else the tree a build's
    CMakeCache.txt names)."""
    import glob

    from dyngraph import _backend

    ext_dir = os.path.dirname(os.path.realpath(_backend.__file__))
    libs = [d for d in (ext_dir, os.path.dirname(os.path.abspath(_backend.__file__)))
            if glob.glob(os.path.join(d, "libggml-base.so*"))]
    assert libs, f"no ggml libraries next to the extension ({ext_dir})"
    inc = in_tree_ggml_include(ext_dir)
    if inc is not None:
        return inc, libs[0]
    headers = sorted(glob.glob(os.path.join(ROOT, "build", "*", "ggml-sdist-*", "*", "ggml", "include", "ggml.h")) +
                     glob.glob(os.path.join(ROOT, "build", "*", "ggml-wheel-*", "libggml", "include", "ggml.h")),
                     key=os.path.getmtime)
    if headers:
        return os.path.dirname(headers[-1]), libs[0]
    # a package built from a ggml tree given by DYNGRAPH_GGML_SOURCE (as tools/gpu_check.sh builds): the
    # headers of the tree the last build under build/ names
    caches = sorted(glob.glob(os.path.join(ROOT, "build", "*", "CMakeCache.txt")), key=os.path.getmtime)
    for cache in reversed(caches):
        try:
            return in_tree_ggml_include(os.path.dirname(cache)), libs[0]
        except AssertionError:
            continue
    raise AssertionError("no ggml headers in a build tree under build/ (install or build the project from this checkout)")


def test_every_precondition_is_a_violation_not_an_abort(tmp_path):
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    assert cxx, "a C++ compiler is needed to build the precondition test"
    inc, lib = ggml_dirs()
    exe = tmp_path / "test_gg"
    cmd = [cxx, "-std=c++17", "-O1", "-I", os.path.join(ROOT, "backend"), "-I", inc,
           os.path.join(ROOT, "backend", "gg.cpp"), os.path.join(ROOT, "backend", "kernel_guard.cpp"),
           os.path.join(ROOT, "tests", "cpp", "test_gg_preconditions.cpp"),
           os.path.join(lib, "libggml-base.so.0"), f"-Wl,-rpath,{lib}", "-o", str(exe)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    checks = int(re.search(r"(\d+) checks, 0 failures", r.stdout).group(1))
    assert checks > 100


@pytest.mark.parametrize("folder", ["lower", "kernels"])
def test_lowerings_call_ggml_only_through_the_checked_layer(folder):
    d = os.path.join(ROOT, "backend", folder)
    raw = {}
    for name in sorted(os.listdir(d)):
        if not name.endswith((".cpp", ".h", ".inc")):
            continue
        with open(os.path.join(d, name)) as f:
            code = re.sub(r"//[^\n]*", "", f.read())  # comments may name ggml functions
        for fn in re.findall(r"(?<![\w:])(ggml_[a-z0-9_]+)\s*\(", code):
            if fn not in QUERIES and fn not in OURS:
                raw.setdefault(name, set()).add(fn)
    assert not raw, f"ggml called around backend/gg.h: {raw}"
