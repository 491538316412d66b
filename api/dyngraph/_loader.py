"""Load the ggml shared libraries of the libggml-python wheel (and OpenBLAS of
the scipy-openblas32 wheel) before the extension.

The extension is linked against them (and carries an rpath to the wheel's
folder); loading them first by path also covers layouts where that rpath does
not apply, such as an in-tree build.
"""

from __future__ import annotations

import ctypes
import os


def load_ggml() -> None:
    import scipy_openblas32

    # local: its symbols serve the extension that links it, not other copies of OpenBLAS in the process
    ctypes.CDLL(os.path.join(scipy_openblas32.get_lib_dir(), scipy_openblas32.get_library(fullname=True)),
                mode=ctypes.RTLD_LOCAL)
    try:
        import libggml
    except ImportError:  # ggml built from source: the libraries sit next to the extension
        return
    libdir = os.path.join(os.path.dirname(libggml.__file__), "lib64")
    for name in ("libggml-base.so", "libggml-cpu.so", "libggml.so"):
        path = os.path.join(libdir, name)
        if os.path.exists(path):
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
