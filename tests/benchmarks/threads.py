"""One thread for every side of a comparison: numpy's OpenBLAS is told to
use one thread (through its C API, since numpy may already be imported), and
dyngraph engines are made with ``num_threads=1``."""

from __future__ import annotations

import ctypes
import glob
import os

import numpy as np

_NAMES = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads", "openblas_set_num_threads64_",
          "openblas_set_num_threads")


def limit_blas_threads(n: int = 1) -> bool:
    """Ask numpy's OpenBLAS to use ``n`` threads. True when it could be told."""
    libs_dir = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
    for path in glob.glob(os.path.join(libs_dir, "*openblas*.so*")):
        lib = ctypes.CDLL(path)  # already loaded by numpy: the same handle
        for name in _NAMES:
            fn = getattr(lib, name, None)
            if fn is not None:
                fn(ctypes.c_int(n))
                return True
    return False
