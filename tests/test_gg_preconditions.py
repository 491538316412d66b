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
    "ggml_cpu_has_llamafile",
}
# our own helpers named ggml_* (dtype.h, lowering.h)
OURS = {"ggml_type_of", "ggml_dim"}


def ggml_dirs():
    """(headers, library folder, library files) of the ggml the package runs on: its libraries lie next
    to the extension; its headers in the source it was built from (the build tree's ggml sdist) or,
    for a build on the prebuilt wheel, in that wheel's tree."""
    import glob

    import dyngraph

    lib = os.path.dirname(os.path.realpath(dyngraph._backend.__file__))
    files = [os.path.join(lib, f"libggml{s}.so.0") for s in ("", "-base")]
    assert all(os.path.exists(f) for f in files), f"no libggml.so.0 / libggml-base.so.0 in {lib}"
    for pattern in ("build/*/ggml-sdist/libggml_python-*/ggml/include", "build/*/ggml-wheel/libggml/include"):
        found = sorted(glob.glob(os.path.join(ROOT, pattern, "ggml.h")))
        if found:
            return os.path.dirname(found[0]), lib, files
    raise AssertionError(f"no ggml headers under {ROOT}/build (the tree the package was built in)")


def test_every_precondition_is_a_violation_not_an_abort(tmp_path):
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    assert cxx, "a C++ compiler is needed to build the precondition test"
    inc, lib, files = ggml_dirs()
    exe = tmp_path / "test_gg"
    cmd = [cxx, "-std=c++17", "-O1", "-I", os.path.join(ROOT, "backend"), "-I", inc,
           os.path.join(ROOT, "backend", "gg.cpp"), os.path.join(ROOT, "tests", "cpp", "test_gg_preconditions.cpp"),
           *files, f"-Wl,-rpath,{lib}", "-o", str(exe)]
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
