"""Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
SC'11) and the counter/key layout oneDNN 2026.1's CPU dropout uses, found by
experiment against the oracle (test_dropout_oracle.py), written from the paper.

Layout found (offset != 0): key = (seed lo, seed hi); for element i (linear
index in dst), counter = (offset lo, offset hi, (i & ~3) lo, (i & ~3) hi);
the draw is word i & 3 of the block.  Offset == 0 takes another path, not
yet matched (see docs/guide/onednn-json.md, "Dropout").
"""

import numpy as np

_MUL = (0xD2511F53, 0xCD9E8D57)
_WEYL = (0x9E3779B9, 0xBB67AE85)
_U32 = np.uint64(0xFFFFFFFF)


def philox4x32_10(counter, key):
    """The four 32-bit words of the block: counter is 4 arrays, key 2 (u32 values)."""
    c = [np.asarray(w, np.uint64) & _U32 for w in counter]
    k = [np.asarray(w, np.uint64) & _U32 for w in key]
    s32 = np.uint64(32)
    for _ in range(10):
        p0 = c[0] * np.uint64(_MUL[0])
        p1 = c[2] * np.uint64(_MUL[1])
        c = [(p1 >> s32) ^ c[1] ^ k[0], p1 & _U32, (p0 >> s32) ^ c[3] ^ k[1], p0 & _U32]
        k = [(k[0] + np.uint64(_WEYL[0])) & _U32, (k[1] + np.uint64(_WEYL[1])) & _U32]
    return c


def onednn_draws(n, seed, offset):
    """oneDNN's u32 draw for elements 0..n-1 (offset != 0)."""
    seed &= (1 << 64) - 1
    offset &= (1 << 64) - 1
    i = np.arange(n, dtype=np.uint64)
    block = i & ~np.uint64(3)
    full = lambda v: np.full(n, v, np.uint64)  # noqa: E731
    words = philox4x32_10([full(offset & 0xFFFFFFFF), full(offset >> 32), block & _U32, block >> np.uint64(32)],
                          [full(seed & 0xFFFFFFFF), full(seed >> 32)])
    return np.choose((i & np.uint64(3)).astype(np.int64), words).astype(np.uint32)
