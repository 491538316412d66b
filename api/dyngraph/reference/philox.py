"""Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as
easy as 1, 2, 3", SC'11) and the counter/key layouts oneDNN's Dropout draws
with, found by experiment against oneDNN 2026.1.0 itself
(tests/onednn/test_dropout_oracle.py) and written from the paper, in numpy.

For the dst element of linear index i (row-major), with seed and offset read
as unsigned 64-bit values:

- offset != 0: key = (seed lo, seed hi); counter = (offset lo, offset hi,
  b lo, b hi) with b = i & ~3; the draw is word i & 3 of the block.
- offset == 0 (oneDNN's older, 32-bit path): s = seed lo, j = i lo (both
  truncated to 32 bits), b = j & ~3; key = (s, s); counter = (b, b + 1, b,
  b + 3) (32-bit words); the draw is word 2 of the block, so the four
  elements of a block share one draw.

mask = draw > probability * (2^32 - 1) (in double precision: a draw equal to
probability * 2^32 is kept), dst = mask ? src * (1 / (1 - probability)) : 0
with the scale computed in f32 (0 where probability is 1).
"""

from __future__ import annotations

import numpy as np

_MUL = (0xD2511F53, 0xCD9E8D57)
_WEYL = (0x9E3779B9, 0xBB67AE85)
_U32 = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)
U32_MAX = 4294967295.0


def philox4x32_10(counter, key):
    """The four 32-bit words of Philox4x32-10's block: counter is 4 arrays of
    u32 values, key 2 (held in uint64 arrays)."""
    c = [np.asarray(w, np.uint64) & _U32 for w in counter]
    k = [np.asarray(w, np.uint64) & _U32 for w in key]
    for r in range(10):
        p0 = c[0] * np.uint64(_MUL[0])
        p1 = c[2] * np.uint64(_MUL[1])
        c = [(p1 >> _S32) ^ c[1] ^ k[0], p1 & _U32, (p0 >> _S32) ^ c[3] ^ k[1], p0 & _U32]
        if r < 9:
            k = [(k[0] + np.uint64(_WEYL[0])) & _U32, (k[1] + np.uint64(_WEYL[1])) & _U32]
    return c


def dropout_draws(n: int, seed: int, offset: int, start: int = 0) -> np.ndarray:
    """oneDNN's u32 draws (uint32 array) for the elements start .. start+n-1."""
    seed &= (1 << 64) - 1
    offset &= (1 << 64) - 1
    i = np.arange(start, start + n, dtype=np.uint64)
    full = lambda v: np.full(n, v, np.uint64)  # noqa: E731
    if offset != 0:
        b = i & ~np.uint64(3)
        words = philox4x32_10([full(offset & 0xFFFFFFFF), full(offset >> 32), b & _U32, b >> _S32],
                              [full(seed & 0xFFFFFFFF), full(seed >> 32)])
        return np.choose((i & np.uint64(3)).astype(np.int64), words).astype(np.uint32)
    s = seed & 0xFFFFFFFF
    b = i & _U32 & ~np.uint64(3)
    one, three = np.uint64(1), np.uint64(3)
    words = philox4x32_10([b, (b + one) & _U32, b, (b + three) & _U32], [full(s), full(s)])
    return words[2].astype(np.uint32)


def dropout_mask(n: int, seed: int, offset: int, probability: float) -> np.ndarray:
    """oneDNN's Dropout mask (uint8, 0 or 1) of n elements."""
    threshold = float(np.float32(probability)) * U32_MAX
    return (dropout_draws(n, seed, offset).astype(np.float64) > threshold).astype(np.uint8)


def dropout_scale(probability: float) -> np.float32:
    """The factor kept values are multiplied by: 1 / (1 - p) in f32, 0 where p is 1."""
    p = np.float32(probability)
    return np.float32(0) if p == np.float32(1) else np.float32(1) / (np.float32(1) - p)
