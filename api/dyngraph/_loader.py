"""Load OpenBLAS of the scipy-openblas32 wheel before the extension.

The extension links it (and carries an rpath to the wheel's folder); loading
it first by path also covers layouts where that rpath does not apply. ggml's
libraries need nothing of the sort: they are part of the package, next to the
extension (third_party/ggml/README.md), or in an in-tree build where the
extension's build rpath names them.

On an Arm CPU with SME, OpenBLAS (0.3.34, DYNAMIC_ARCH) picks its armv9sme
kernels, and that build's sgemm gives wrong products there (seen under QEMU's
`max` CPU, with OpenBLAS printing "empty sgemm_alpha_beta2x2 should never get
called"; docs/guide/cpu-numerics.md, "aarch64"). Such a CPU gets the SVE
kernels, or NEON's where it has no SVE outside streaming mode, unless the
user set OPENBLAS_CORETYPE.
"""

from __future__ import annotations

import ctypes
import os
import warnings
from typing import Mapping, Optional

# the OPENBLAS_CORETYPE this process's OpenBLAS was loaded with by load_ggml(), or None
openblas_coretype: Optional[str] = None


# Linux's auxiliary vector on aarch64 (asm/hwcap.h): AT_HWCAP bit 22 is SVE, AT_HWCAP2 bit 23 SME
AT_HWCAP, AT_HWCAP2 = 16, 26
HWCAP_SVE, HWCAP2_SME = 1 << 22, 1 << 23


def arm_features_from_hwcaps(hwcap: int, hwcap2: int) -> frozenset:
    """The features the rule below asks about, from an aarch64 process's AT_HWCAP and AT_HWCAP2."""
    return frozenset(name for name, on in (("sve", hwcap & HWCAP_SVE), ("sme", hwcap2 & HWCAP2_SME)) if on)


def arm_cpu_features() -> frozenset:
    """SVE and SME where this is an aarch64 Linux process that has them, as the kernel (or an emulator)
    tells the process, and OpenBLAS reads them (getauxval; /proc/cpuinfo under QEMU is the host's)."""
    if os.uname().machine != "aarch64":
        return frozenset()
    try:
        getauxval = ctypes.CDLL(None).getauxval
    except (OSError, AttributeError):
        return frozenset()
    getauxval.restype, getauxval.argtypes = ctypes.c_ulong, [ctypes.c_ulong]
    return arm_features_from_hwcaps(getauxval(AT_HWCAP), getauxval(AT_HWCAP2))


def openblas_core_override(features: frozenset, environ: Mapping[str, str]) -> Optional[str]:
    """The OPENBLAS_CORETYPE to load OpenBLAS with: a core without SME kernels on a CPU with SME (SVE's
    where the CPU has SVE, else NEON's), nothing elsewhere or where the user chose one."""
    if "OPENBLAS_CORETYPE" in environ or "sme" not in features:
        return None
    return "ARMV8SVE" if "sve" in features else "NEOVERSEN1"


def load_ggml() -> None:
    global openblas_coretype
    core = openblas_core_override(arm_cpu_features(), os.environ)
    if core is not None:  # OpenBLAS reads it once, when it loads; the process's environment is left as it was
        os.environ["OPENBLAS_CORETYPE"] = core
    try:
        import scipy_openblas32  # (its import loads the library)

        # local: its symbols serve the extension that links it, not other copies of OpenBLAS in the process
        lib = ctypes.CDLL(os.path.join(scipy_openblas32.get_lib_dir(), scipy_openblas32.get_library(fullname=True)),
                          mode=ctypes.RTLD_LOCAL)
    finally:
        if core is not None:
            del os.environ["OPENBLAS_CORETYPE"]
    openblas_coretype = core
    if core is not None:
        name = lib.scipy_openblas_get_corename
        name.restype = ctypes.c_char_p
        if name().decode().lower() == "armv9sme":  # loaded before dyngraph was imported
            warnings.warn("OpenBLAS was loaded with its armv9sme kernels, whose f32 products are wrong: set "
                          f"OPENBLAS_CORETYPE={core} before starting Python, or import dyngraph before scipy_openblas32",
                          RuntimeWarning, stacklevel=3)
