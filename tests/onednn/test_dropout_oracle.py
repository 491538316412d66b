"""oneDNN's Dropout mask and output, bit for bit, against the oneDNN wheel
(onednn 2026.1.0) as the oracle: the Philox layout in oracle/philox.py.
Skipped where the oracle cannot run (not x86-64 Linux, or the wheel and
Intel's runtime libraries not pointed at; see oracle/run_oracle.py)."""

import platform

import numpy as np
import pytest

from .oracle.philox import onednn_draws, philox4x32_10
from .oracle.run_oracle import oracle, why_unavailable


def test_philox_known_answer():
    # Random123's published known-answer vector for philox4x32_10 (kat_vectors):
    # counter 0, key 0.
    z = [np.zeros(1, np.uint64)] * 4
    got = [int(w[0]) for w in philox4x32_10(z, z[:2])]
    assert got == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]


def _expected(x, seed, offset, p):
    pf = np.float32(p)
    mask = (onednn_draws(x.size, seed, offset).astype(np.float64) / 2**32 > pf).astype(np.uint8)
    scale = np.float32(1) / (np.float32(1) - pf) if pf != 1 else np.float32(0)
    return np.where(mask == 1, x * scale, np.float32(0)).astype(np.float32), mask


_why = "oneDNN oracle is x86-64 Linux only" if platform.machine() != "x86_64" else why_unavailable()


@pytest.mark.skipif(_why is not None, reason=_why or "")
@pytest.mark.parametrize("seed,offset", [(1, 5), (123456789, 3), (2**40 + 7, 2**35 + 9), (-1, -3)])
@pytest.mark.parametrize("p", [0.0, 0.1, 0.3333, 0.5, 0.9, 1.0])
def test_mask_and_dst_bit_for_bit(seed, offset, p):
    x = np.random.default_rng(seed & 0xFFFF).standard_normal(4099).astype(np.float32)
    y, m = oracle(x, seed, offset, p)
    ey, em = _expected(x, seed, offset, p)
    assert np.array_equal(m, em)
    assert np.array_equal(y.view(np.uint32), ey.view(np.uint32))


@pytest.mark.skipif(_why is not None, reason=_why or "")
def test_offset_zero_is_another_path():
    # Known gap: with offset 0 oneDNN draws otherwise (four neighbours share a draw).
    x = np.ones(64, np.float32)
    _, m = oracle(x, 1, 0, 0.5)
    assert not np.array_equal(m, _expected(x, 1, 0, 0.5)[1])
