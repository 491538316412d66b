"""Dropout (oneDNN's generator) on the backend against the numpy reference
(dyngraph/reference/philox.py, itself matched bit for bit against oneDNN in
tests/onednn/test_dropout_oracle.py): the mask and dst bit for bit, at
several shapes of one compiled partition (dynamic dimensions), both of
oneDNN's generator paths (offset 0 and not), every float dtype, and the
refusals of bad parameters as typed errors."""

import numpy as np
import pytest

import dyngraph as dg
from dyngraph.op import OpKind as K
from dyngraph.reference.philox import dropout_draws, dropout_mask, dropout_scale, philox4x32_10
from dyngraph.reference.values import f32_to_bf16_bits

from oputil import compile_op, run

D, E = dg.Dim("D"), dg.Dim("E")
SHAPES = [(1, 1), (3, 5), (7, 129), (64, 33)]  # sizes 1 .. 2112, several not a multiple of 4


def _params(seed, offset, p):
    return np.asarray(seed, np.int64), np.asarray(offset, np.int64), np.asarray(p, np.float32)


def _expected(x, seed, offset, p):
    m = dropout_mask(x.size, seed, offset, p).reshape(x.shape)
    return np.where(m == 1, x.astype(np.float32) * dropout_scale(p), np.float32(0)).astype(np.float32), m


def test_philox_known_answers():
    # Random123's published known-answer vectors for philox4x32_10 (kat_vectors)
    z = [np.zeros(1, np.uint64)] * 4
    assert [int(w[0]) for w in philox4x32_10(z, z[:2])] == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
    f = [np.full(1, 0xFFFFFFFF, np.uint64)] * 4
    assert [int(w[0]) for w in philox4x32_10(f, f[:2])] == [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]


def test_offset_zero_shares_a_draw_per_block():
    d = dropout_draws(64, 5, 0)
    assert (d.reshape(16, 4) == d.reshape(16, 4)[:, :1]).all()
    assert len(set(d.tolist())) == 16


@pytest.mark.parametrize("seed,offset", [(1, 5), (123456789, 0), (-7, 3), (2**31 - 1, -(2**31)), (0, 0)])
@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 0.9, 1.0])
def test_dst_and_mask_bit_for_bit_at_dynamic_shapes(seed, offset, p):
    cp = compile_op(K.Dropout, [[D, E], [], [], []], in_dtypes=[dg.f32, dg.i64, dg.i64, dg.f32], n_outputs=2)
    rng = np.random.default_rng(seed & 0xFFFF)
    for shape in SHAPES:
        x = rng.standard_normal(shape).astype(np.float32)
        y, m = run(cp, x, *_params(seed, offset, p))
        ey, em = _expected(x, seed, offset, p)
        assert m.dtype == np.uint8 and np.array_equal(m, em), shape
        assert np.array_equal(y.view(np.uint32), ey.view(np.uint32)), shape


def test_dst_alone_and_i32_parameters_rank_1():
    cp = compile_op(K.Dropout, [[D, 3, 4], [1], [1], [1]], in_dtypes=[dg.f32, dg.i32, dg.i32, dg.f32])
    for n in (1, 5, 100):
        x = np.arange(n * 12, dtype=np.float32).reshape(n, 3, 4) - 7
        (y,) = run(cp, x, np.array([99], np.int32), np.array([4], np.int32), np.array([0.25], np.float32))
        assert np.array_equal(y, _expected(x, 99, 4, 0.25)[0])


@pytest.mark.parametrize("dt", [dg.f16, dg.bf16])
def test_half_types_round_the_f32_result_once(dt):
    cp = compile_op(K.Dropout, [[D, 17], [], [], []], in_dtypes=[dt, dg.i64, dg.i64, dg.f32], n_outputs=2)
    x32 = np.random.default_rng(3).standard_normal((9, 17)).astype(np.float32)
    if dt is dg.f16:
        x = x32.astype(np.float16)
        want = lambda v: v.astype(np.float16)  # noqa: E731
    else:
        x = f32_to_bf16_bits(x32)
        x32 = (x.astype(np.uint32) << 16).view(np.float32)
        want = f32_to_bf16_bits
    y, m = run(cp, x, *_params(11, 13, 0.3))
    ey, em = _expected(x.astype(np.float32) if dt is dg.f16 else x32, 11, 13, 0.3)
    assert np.array_equal(m, em)
    assert np.array_equal(np.asarray(y).view(np.uint16), np.asarray(want(ey)).view(np.uint16))


def test_rank_6_is_the_linear_index():
    cp = compile_op(K.Dropout, [[2, D, 3, 2, 2, 3], [], [], []], in_dtypes=[dg.f32, dg.i64, dg.i64, dg.f32],
                    n_outputs=2)
    x = np.ones((2, 5, 3, 2, 2, 3), np.float32)
    y, m = run(cp, x, *_params(3, 1, 0.5))
    assert np.array_equal(m, _expected(x, 3, 1, 0.5)[1])


def test_against_the_reference_interpreter():
    from dyngraph import reference

    b = dg.GraphBuilder()
    x = b.input("x", dg.f32, [D, 8])
    s, o, p = b.input("s", dg.i64, []), b.input("o", dg.i64, []), b.input("p", dg.f32, [])
    y, m = b.op(K.Dropout, [x, s, o, p], {}, n_outputs=2)
    b.output(y, m)
    cp = b.compile(dg.Engine(dg.Engine.CPU, num_threads=3))
    for seed, offset in ((42, 0), (-5, 77)):
        feeds = [np.random.default_rng(0).standard_normal((37, 8)).astype(np.float32), *_params(seed, offset, 0.4)]
        got = run(cp, *feeds)
        ref = reference.run(b.graph, {lt.id: a for lt, a in zip(cp.get_inputs(), feeds)})
        outs = [lt.id for lt in cp.get_outputs()]
        assert np.array_equal(got[0], ref[outs[0]].astype(np.float32))
        assert np.array_equal(got[1], ref[outs[1]].astype(np.uint8))


@pytest.mark.parametrize("p", [-0.25, 1.5, float("nan"), float("inf")])
def test_probability_outside_0_1_is_an_execution_error(p):
    cp = compile_op(K.Dropout, [[D], [], [], []], in_dtypes=[dg.f32, dg.i64, dg.i64, dg.f32])
    with pytest.raises(dg.ExecutionError, match="outside"):
        run(cp, np.ones(8, np.float32), *_params(1, 1, p))
    # the partition still runs with a good one
    assert run(cp, np.ones(8, np.float32), *_params(1, 1, 0.5))[0].shape == (8,)


def test_seed_beyond_32_bits_is_an_execution_error():
    cp = compile_op(K.Dropout, [[D], [], [], []], in_dtypes=[dg.f32, dg.i64, dg.i64, dg.f32])
    with pytest.raises(dg.ExecutionError, match="32-bit"):
        run(cp, np.ones(8, np.float32), *_params(2**40, 1, 0.5))


@pytest.mark.parametrize("shapes,dtypes,err", [
    ([[4], [2], [], []], [dg.f32, dg.i64, dg.i64, dg.f32], dg.ShapeError),  # seed of 2 values
    ([[4], [], [D], []], [dg.f32, dg.i64, dg.i64, dg.f32], dg.ShapeError),  # offset of a dynamic size
    ([[4], [1, 1], [], []], [dg.f32, dg.i64, dg.i64, dg.f32], dg.ShapeError),  # seed of rank 2
    ([[4], [], [], []], [dg.f32, dg.f32, dg.i64, dg.f32], dg.DTypeError),  # f32 seed
    ([[4], [], [], []], [dg.f32, dg.i64, dg.i64, dg.f16], dg.DTypeError),  # f16 probability
    ([[4], [], [], []], [dg.i32, dg.i64, dg.i64, dg.f32], dg.DTypeError),  # integer src
])
def test_bad_declarations_are_typed_errors(shapes, dtypes, err):
    with pytest.raises(err):
        compile_op(K.Dropout, shapes, in_dtypes=dtypes)
