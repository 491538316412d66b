"""oneDNN's Dropout mask and output, bit for bit, against the oneDNN wheel
(onednn 2026.1.0) as the oracle: the generator of dyngraph's reference
(dyngraph/reference/philox.py, through oracle/philox.py) and dyngraph's own
Dropout op at the shapes of one compiled partition (dynamic dimensions).
Skipped where the oracle cannot run (not x86-64 Linux, or the wheel and
Intel's runtime libraries not pointed at; see oracle/run_oracle.py)."""

import platform

import numpy as np
import pytest

import dyngraph as dg
from dyngraph.op import OpKind as K

from .oracle.philox import dropout_draws, dropout_mask, dropout_scale, onednn_draws, philox4x32_10
from .oracle.run_oracle import oracle, why_unavailable


def test_philox_known_answer():
    # Random123's published known-answer vector for philox4x32_10 (kat_vectors):
    # counter 0, key 0.
    z = [np.zeros(1, np.uint64)] * 4
    got = [int(w[0]) for w in philox4x32_10(z, z[:2])]
    assert got == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]


def _expected(x, seed, offset, p):
    mask = dropout_mask(x.size, seed, offset, p)
    return np.where(mask == 1, x * dropout_scale(p), np.float32(0)).astype(np.float32), mask


_why = "oneDNN oracle is x86-64 Linux only" if platform.machine() != "x86_64" else why_unavailable()
needs_oracle = pytest.mark.skipif(_why is not None, reason=_why or "")


@needs_oracle
@pytest.mark.parametrize("seed,offset", [(1, 5), (123456789, 3), (2**40 + 7, 2**35 + 9), (-1, -3),
                                         (1, 0), (2**40 + 7, 0), (-1, 0), (0, 0)])
@pytest.mark.parametrize("p", [0.0, 0.1, 0.3333, 0.5, 0.9, 1.0])
def test_mask_and_dst_bit_for_bit(seed, offset, p):
    x = np.random.default_rng(seed & 0xFFFF).standard_normal(4099).astype(np.float32)
    y, m = oracle(x, seed, offset, p)
    ey, em = _expected(x, seed, offset, p)
    assert np.array_equal(m, em)
    assert np.array_equal(y.view(np.uint32), ey.view(np.uint32))


@needs_oracle
@pytest.mark.parametrize("offset", [0, 11])
def test_a_draw_equal_to_p_times_2_32_is_kept(offset):
    # oneDNN keeps a draw r when r > p * (2^32 - 1): r = p * 2^32 exactly is kept
    n = 1 << 14
    d = onednn_draws(n, 7, offset).astype(np.int64)
    i = int(np.nonzero((d >= 2**30) & (d < 2**31) & (d % 128 == 0))[0][0])
    p = float(np.float32(d[i] / 2**32))
    _, m = oracle(np.ones(n, np.float32), 7, offset, p)
    assert m[i] == 1 and np.array_equal(m, dropout_mask(n, 7, offset, p))


@needs_oracle
def test_offset_zero_shares_one_draw_per_block_of_4():
    _, m = oracle(np.ones(4096, np.float32), 1, 0, 0.5)
    assert (m.reshape(-1, 4) == m.reshape(-1, 4)[:, :1]).all()
    assert np.array_equal(dropout_draws(8, 1, 0)[:4], np.repeat(dropout_draws(8, 1, 0)[0], 4))


@needs_oracle
@pytest.mark.parametrize("seed,offset", [(1, 0), (-9, 0), (2**31 - 1, 17), (-(2**31), -5)])
def test_dyngraph_dropout_is_onednns_at_dynamic_shapes(seed, offset):
    D, E = dg.Dim("D"), dg.Dim("E")
    b = dg.GraphBuilder()
    x = b.input("x", dg.f32, [D, E])
    s, o, p = b.input("s", dg.i64, []), b.input("o", dg.i64, []), b.input("p", dg.f32, [])
    y, m = b.op(K.Dropout, [x, s, o, p], {}, n_outputs=2)
    b.output(y, m)
    eng = dg.Engine(dg.Engine.CPU, num_threads=2)
    cp = b.compile(eng)
    rng = np.random.default_rng(abs(seed) % 1000)
    for shape in [(1, 1), (3, 7), (33, 65), (128, 257)]:
        xs = rng.standard_normal(shape).astype(np.float32)
        feeds = [xs, np.int64(seed), np.int64(offset), np.float32(0.375)]
        ins = [dg.Tensor(lt, eng, np.asarray(a)) for lt, a in zip(cp.get_inputs(), feeds)]
        outs = [dg.Tensor(lt, eng, np.empty(lt.shape, lt.dtype.numpy)) for lt in cp.infer_outputs(ins)]
        cp.execute(dg.Stream(eng), ins, outs)
        oy, om = oracle(xs, seed, offset, 0.375)
        assert np.array_equal(outs[1].get_data_handle().ravel(), om), shape
        assert np.array_equal(outs[0].get_data_handle().ravel().view(np.uint32), oy.view(np.uint32)), shape
