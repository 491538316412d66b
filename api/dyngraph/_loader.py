"""Load OpenBLAS of the scipy-openblas32 wheel before the extension.

The extension links it (and carries an rpath to the wheel's folder); loading
it first by path also covers layouts where that rpath does not apply. ggml's
libraries need nothing of the sort: they are part of the package, next to the
extension (third_party/ggml/README.md), or in an in-tree build where the
extension's build rpath names them.
"""

from __future__ import annotations

import ctypes
import os


def load_ggml() -> None:
    import scipy_openblas32

    # local: its symbols serve the extension that links it, not other copies of OpenBLAS in the process
    ctypes.CDLL(os.path.join(scipy_openblas32.get_lib_dir(), scipy_openblas32.get_library(fullname=True)),
                mode=ctypes.RTLD_LOCAL)
