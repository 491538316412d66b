"""The C API (include/dyngraph/dyngraph.h, libdyngraph.so): C and C++ programs built with
the system compiler against the installed header and library, run without Python in their
process, compute what Python computes (issue 23)."""

import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import dyngraph as dg
from capi_util import EXAMPLES, ROOT, build, load_check, run, save_kv_partition

sys.path.insert(0, EXAMPLES)
import save_mlp  # noqa: E402

TESTS_C = os.path.join(ROOT, "tests", "c")
BATCHES = [1, 7, 64, 256, 7, 1]


@pytest.fixture(scope="module")
def mlp_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("mlp") / "mlp.dg"
    save_mlp.main(str(path))
    return path


@pytest.fixture(scope="module")
def kv_file(tmp_path_factory):
    """out = (cache after cache[pos] = new) @ ones(4, 2); cache: an [8, 4] state."""
    path = tmp_path_factory.mktemp("kv") / "kv.dg"
    save_kv_partition(path)
    return path


@pytest.fixture(scope="module")
def mlp_exe(tmp_path_factory):
    return build(os.path.join(EXAMPLES, "mlp.c"), str(tmp_path_factory.mktemp("c") / "mlp"))


def test_the_library_exports_only_the_c_api():
    lib = os.path.join(dg.get_library_dir(), "libdyngraph.so")
    nm = shutil.which("nm")
    assert nm, "nm (binutils) is needed to read the library's exports"
    r = subprocess.run([nm, "-D", "--defined-only", lib], capture_output=True, text=True, check=True)
    names = [line.split()[-1] for line in r.stdout.splitlines() if line.strip()]
    assert "dg_partition_execute" in names and "dg_partition_load_bytes" in names
    assert [n for n in names if not n.startswith("dg_")] == []


def test_the_mlp_example_computes_what_python_computes(mlp_file, mlp_exe, tmp_path):
    ldd = subprocess.run(["ldd", mlp_exe], capture_output=True, text=True, check=True).stdout
    assert "libdyngraph.so" in ldd and "libpython" not in ldd, ldd
    r = run(mlp_exe, mlp_file, tmp_path, *BATCHES)
    assert "input 'x': batch in [1, 4096] (symbol) 256 in [256, 256]" in r.stdout, r.stdout
    assert "graphs built: 4, cache hits: 8" in r.stdout, r.stdout  # 4 shapes; infer + execute hit after each build
    cp = dg.load(mlp_file, dg.Engine(num_threads=1))
    for n in BATCHES:
        got = np.fromfile(tmp_path / f"y_{n}.f32", np.float32).reshape(n, save_mlp.OUT)
        (want,) = cp(save_mlp.example_input(n))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        assert f"batch {n}: output [{n}, {save_mlp.OUT}]" in r.stdout


def test_the_contract_from_c(kv_file, mlp_file, tmp_path):
    exe = build(os.path.join(TESTS_C, "test_api.c"), str(tmp_path / "test_api"))
    r = run(exe, kv_file, mlp_file, check=False)
    assert r.returncode == 0 and "0 failures" in r.stdout, r.stdout + r.stderr


def test_the_cpp_wrapper(mlp_file, tmp_path):
    exe = build(os.path.join(TESTS_C, "test_wrapper.cpp"), str(tmp_path / "test_wrapper"), cxx=True)
    r = run(exe, mlp_file)
    cp = dg.load(mlp_file)
    for n in (3, 5):
        (y,) = cp(save_mlp.example_input(n))
        got = float(re.search(rf"batch {n}: sum (\S+)", r.stdout).group(1))
        assert got == pytest.approx(float(y.astype(np.float64).sum()), rel=1e-5, abs=1e-4)
    assert "DG_ERR_SHAPE" in r.stdout and "cache: 2 graphs" in r.stdout, r.stdout


def test_load_bytes_refuses_damaged_files_with_the_messages_python_gives(mlp_file, c_load_check, tmp_path):
    data = mlp_file.read_bytes()
    cases = {
        "short.dg": data[:10],
        "truncated.dg": data[:-1],
        "flipped.dg": data[:-5] + bytes([data[-5] ^ 1]) + data[-4:],
        "magic.dg": b"NOTDYNGR" + data[8:],
        "version.dg": data[:8] + (2).to_bytes(4, "little") + data[12:],
        "reserved.dg": data[:40] + b"\x01" + data[41:],
        "raw_ir.dg": data[64:],
    }
    for name, b in cases.items():
        (tmp_path / name).write_bytes(b)
    got = load_check(c_load_check, [tmp_path / n for n in cases])
    for name in cases:
        status, msg = got[str(tmp_path / name)]
        with pytest.raises(dg.IRError) as e:
            dg.load(tmp_path / name)
        assert status == "DG_ERR_IR"
        assert msg.replace("<bytes>", str(tmp_path / name)) == str(e.value), name


def test_engine_strings(mlp_file, c_load_check):
    ok = load_check(c_load_check, [mlp_file], "--engine", "cpu:3", "--run", "5")
    assert ok[str(mlp_file)][0] == "DG_OK"
    for engine, status, text in [("cpu:", "DG_ERR_INVALID", "unknown engine"), ("rpc:", "DG_ERR_INVALID", "HOST:PORT"),
                                 ("gpu:NoSuch0", "DG_ERR_DEVICE", "NoSuch0"),
                                 ("rpc:127.0.0.1:1", "DG_ERR_DEVICE", "127.0.0.1:1")]:
        s, msg = load_check(c_load_check, [mlp_file], "--engine", engine)[str(mlp_file)]
        assert s == status and text in msg, (engine, s, msg)


def test_find_package_and_pkg_config(mlp_file, tmp_path):
    """A CMake project (find_package(dyngraph) -> dyngraph::dyngraph) and a pkg-config build
    find the C API from what `python -m dyngraph` prints."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(ROOT, "api") + os.pathsep + env.get("PYTHONPATH", "") \
        if os.environ.get("DYNGRAPH_DEV") == "1" else env.get("PYTHONPATH", "")
    cmake_dir = subprocess.run([sys.executable, "-m", "dyngraph", "--cmake-dir"], capture_output=True, text=True,
                               check=True, env=env).stdout.strip()
    assert os.path.isfile(os.path.join(cmake_dir, "dyngraphConfig.cmake"))
    cmake = shutil.which("cmake") or os.path.join(os.path.dirname(sys.executable), "cmake")
    assert os.path.exists(cmake), "cmake is needed (pip install cmake: the test extra)"
    src = tmp_path / "proj"
    src.mkdir()
    (src / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.18)\nproject(use_dyngraph C)\n"
        "find_package(dyngraph 0.1 REQUIRED)\n"
        f"add_executable(mlp {os.path.join(EXAMPLES, 'mlp.c')})\n"
        "target_link_libraries(mlp PRIVATE dyngraph::dyngraph m)\n")
    san = os.environ.get("DG_C_API_CFLAGS", "")
    subprocess.run([cmake, "-S", src, "-B", tmp_path / "b", f"-Ddyngraph_DIR={cmake_dir}", f"-DCMAKE_C_FLAGS={san}"], check=True,
                   capture_output=True)
    subprocess.run([cmake, "--build", tmp_path / "b"], check=True, capture_output=True)
    r = run(tmp_path / "b" / "mlp", mlp_file, "-", 2)
    assert "batch 2: output [2, 64]" in r.stdout

    pkg = shutil.which("pkg-config") or shutil.which("pkgconf") or os.path.join(os.path.dirname(sys.executable), "pkgconf")
    assert os.path.exists(pkg), "pkg-config is needed (pip install pkgconf: the test extra)"
    penv = dict(os.environ, PKG_CONFIG_PATH=dg.get_pkgconfig_dir())
    flags = subprocess.run([pkg, "--cflags", "--libs", "dyngraph"], capture_output=True, text=True, check=True,
                           env=penv).stdout.split()
    exe = str(tmp_path / "mlp_pc")
    subprocess.run(["cc", "-std=c99", *san.split(), os.path.join(EXAMPLES, "mlp.c"), *flags, "-lm", "-o", exe], check=True)
    assert "batch 3: output [3, 64]" in run(exe, mlp_file, "-", 3).stdout
