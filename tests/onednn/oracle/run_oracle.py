"""Build and run dropout_oracle.cpp against the oneDNN wheel (onednn,
onednn-devel 2026.1.0).  The wheel's libdnnl is built with the SYCL CPU
runtime: it loads only beside Intel's runtime libraries (tbb, intel-sycl-rt,
intel-cmplr-lib-rt/-ur incl. libur_adapter_opencl, intel-opencl-rt), found
through DYNGRAPH_ONEDNN_ORACLE_LIBS (one folder holding them all) and
DYNGRAPH_ONEDNN_ORACLE_INCLUDE (the wheel's include folder)."""

import os
import shutil
import subprocess
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def why_unavailable():
    libs, inc = os.environ.get("DYNGRAPH_ONEDNN_ORACLE_LIBS"), os.environ.get("DYNGRAPH_ONEDNN_ORACLE_INCLUDE")
    if not libs or not inc:
        return "set DYNGRAPH_ONEDNN_ORACLE_LIBS and DYNGRAPH_ONEDNN_ORACLE_INCLUDE (see tests/onednn/oracle/run_oracle.py)"
    if not os.path.exists(os.path.join(libs, "libdnnl.so")):
        return f"no libdnnl.so in {libs}"
    if shutil.which("c++") is None:
        return "no c++ compiler"
    return None


_BIN = []


def _binary():
    if not _BIN:
        libs, inc = os.environ["DYNGRAPH_ONEDNN_ORACLE_LIBS"], os.environ["DYNGRAPH_ONEDNN_ORACLE_INCLUDE"]
        out = os.path.join(tempfile.mkdtemp(prefix="dropout_oracle"), "dropout_oracle")
        subprocess.run(["c++", "-O1", "-std=c++17", "-I", inc, os.path.join(HERE, "dropout_oracle.cpp"), "-L", libs,
                        "-ldnnl", "-Wl,--allow-shlib-undefined", "-o", out], check=True)
        _BIN.append(out)
    return _BIN[0]


def oracle(x, seed, offset, p):
    """(dst, mask) from oneDNN for f32 x (flattened), s64 seed/offset, f32 p."""
    libs = os.environ["DYNGRAPH_ONEDNN_ORACLE_LIBS"]
    env = dict(os.environ, LD_LIBRARY_PATH=libs, OCL_ICD_FILENAMES=os.path.join(libs, "libintelocl.so"))
    x = np.ascontiguousarray(x, np.float32).ravel()
    n = x.size
    r = subprocess.run([_binary(), str(n), str(seed), str(offset), repr(float(np.float32(p)))], input=x.tobytes(),
                       capture_output=True, check=True, env=env)
    return np.frombuffer(r.stdout[:4 * n], np.float32), np.frombuffer(r.stdout[4 * n:], np.uint8)
