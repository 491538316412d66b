"""The rounding of activation rows that dyngraph's integer products with q8_0 / q4_0 / q4_1
weights apply (backend/kernels/quant_act.h), as a numpy reference: imported by the tests and by
the scripts they run in fresh processes (subproc.IMPORT_TESTS)."""

import numpy as np


def rounded_rows(x: np.ndarray) -> np.ndarray:
    """x's rows (a multiple of 32 values each) as the kernels round them: per 32-value block,
    q = rint(x * 127 / amax) in float32 (ties to even), value q * amax / 127, in float64."""
    b = x.reshape(x.shape[0], -1, 32).astype(np.float32)
    amax = np.abs(b).max(axis=-1, keepdims=True)
    inv = np.where(amax > 0, np.float32(127) / np.where(amax > 0, amax, 1), 0).astype(np.float32)
    q = np.rint(b * inv)
    return (q.astype(np.float64) * (amax / np.float32(127)).astype(np.float64)).reshape(x.shape)
