"""STATE tensors: owned by the compiled partition, updated in place by the ops
that write them, persistent across executions, rebuilds and cache switches."""

import numpy as np
import pytest

import dyngraph as dg
from oputil import run

B, H, SMAX, D = 1, 2, 8, 4


def lt(i, shape=None, dtype=dg.f32, **kw):
    return dg.LogicalTensor(i, dtype, shape, **kw)


def kv_partition(engine, initial=None, pos_dtype=dg.i64):
    """cache[:, :, pos, :] = new ; out = cache.sum(axis=2)  (a KV-cache write, then a read)"""
    s = dg.Dim("s", max=SMAX)
    cache = lt(0, [B, H, SMAX, D], property=dg.STATE, name="cache")
    new = lt(1, [B, H, s, D], name="new")
    pos = lt(2, [s], dtype=pos_dtype, name="pos")
    written, out = lt(3, name="written"), lt(4, name="out")
    g = dg.Graph()
    g.add_op(dg.Op(0, dg.OpKind.ScatterRows, [cache, pos, new], [written]))
    g.add_op(dg.Op(1, dg.OpKind.ReduceSum, [written], [out], {"axes": [2]}))
    g.finalize()
    (p,) = g.get_partitions()
    assert [t.id for t in p.get_output_ports()] == [4]  # the write itself is not an output
    consts = {} if initial is None else {0: initial}
    return p.compile([new, pos, cache], [out], engine, constants=consts)


def step(cp, ref, positions, rng):
    new = rng.standard_normal((B, H, len(positions), D), dtype=np.float32)
    pos = np.array(positions, dtype=np.int64)
    (out,) = run(cp, new, pos)
    ref[:, :, positions, :] = new
    np.testing.assert_allclose(out, ref.sum(axis=2), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(cp.read_state(0), ref)


def test_state_persists_across_executions_and_shapes(engine, rng):
    cp = kv_partition(engine)
    ref = np.zeros((B, H, SMAX, D), np.float32)
    step(cp, ref, [0, 1, 2], rng)  # "prefill"
    for p in (3, 4, 5):  # "decode"
        step(cp, ref, [p], rng)
    step(cp, ref, [6, 7], rng)
    assert cp.cache_info().builds == 3


def test_state_survives_cache_eviction_and_switches(engine, rng):
    cp = kv_partition(engine)
    cp.set_cache_capacity(1)
    ref = np.zeros((B, H, SMAX, D), np.float32)
    for positions in ([0, 1], [2], [3, 4], [5]):
        step(cp, ref, positions, rng)
    assert cp.cache_info().evictions == 3


def test_initial_state_and_reset(engine, rng):
    init = rng.standard_normal((B, H, SMAX, D), dtype=np.float32)
    cp = kv_partition(engine, initial=init)
    np.testing.assert_array_equal(cp.read_state(0), init)
    ref = init.copy()
    step(cp, ref, [1], rng)
    cp.reset_state()
    np.testing.assert_array_equal(cp.read_state(0), init)


def test_reset_without_initial_value_zeroes(engine, rng):
    cp = kv_partition(engine)
    step(cp, np.zeros((B, H, SMAX, D), np.float32), [0, 1], rng)
    cp.reset_state()
    assert not cp.read_state(0).any()


def test_write_state(engine, rng):
    cp = kv_partition(engine)
    v = rng.standard_normal((B, H, SMAX, D), dtype=np.float32)
    cp.write_state(0, v)
    ref = v.copy()
    step(cp, ref, [2], rng)
    with pytest.raises(dg.ShapeError, match="expected shape"):
        cp.write_state(0, v[:, :, :4])


def test_an_out_of_range_index_fails_and_leaves_state_untouched(engine, rng):
    cp = kv_partition(engine)
    ref = np.zeros((B, H, SMAX, D), np.float32)
    step(cp, ref, [0, 1], rng)
    before = cp.read_state(0)
    new = rng.standard_normal((B, H, 2, D), dtype=np.float32)
    with pytest.raises(dg.ShapeError, match=r"index 8 at element 1 of input 1 'pos' \(id 2\) is outside \[0, 8\)"):
        run(cp, new, np.array([7, 8], np.int64))
    with pytest.raises(dg.ShapeError, match="index -1"):
        run(cp, new, np.array([-1, 0], np.int64))
    np.testing.assert_array_equal(cp.read_state(0), before)


def test_a_bad_shape_leaves_state_untouched(engine, rng):
    cp = kv_partition(engine)
    step(cp, np.zeros((B, H, SMAX, D), np.float32), [0], rng)
    before = cp.read_state(0)
    with pytest.raises(dg.ShapeError):
        run(cp, rng.standard_normal((B, H, 2, D), dtype=np.float32), np.array([1, 2, 3], np.int64))
    np.testing.assert_array_equal(cp.read_state(0), before)


def test_i32_positions(engine, rng):
    cp = kv_partition(engine, pos_dtype=dg.i32)
    new = rng.standard_normal((B, H, 2, D), dtype=np.float32)
    run(cp, new, np.array([5, 1], np.int32))
    ref = np.zeros((B, H, SMAX, D), np.float32)
    ref[:, :, [5, 1]] = new
    np.testing.assert_array_equal(cp.read_state(0), ref)


def test_inplace_ports_report_the_state_versions(engine):
    cp = kv_partition(engine)
    assert cp.get_inplace_ports() == [(0, 3)]


def test_reading_a_state_version_that_is_written_again_is_refused(engine):
    state, x, pos = lt(0, [4, 2], property=dg.STATE), lt(1, [1, 2]), lt(2, [1], dtype=dg.i32)
    g = dg.Graph()
    g.add_op(dg.Op(0, dg.OpKind.ReLU, [state], [lt(3)]))  # reads the old value...
    g.add_op(dg.Op(1, dg.OpKind.ScatterRows, [state, pos, x], [lt(4)]))  # ...which is overwritten in place
    g.add_op(dg.Op(2, dg.OpKind.Add, [lt(3), lt(4)], [lt(5)]))
    g.finalize()
    (p,) = g.get_partitions()
    with pytest.raises(dg.CompileError, match="reads a version"):
        p.compile([state, pos, x], p.get_output_ports(), engine)


def test_copy_to_slice_writes_state_in_place(engine, rng):
    """cache[past:past+s] = new; out = mask @ cache[:past+s] with mask [s, past+s] (attention-like)."""
    past, s = dg.Dim("past", min=1, max=8), dg.Dim("s", max=8)
    cache = lt(0, [12, 3], property=dg.STATE)
    mask = lt(1, [s, past + s])
    new = lt(2, [s, 3])
    written, head, out = lt(3), lt(4), lt(5)
    g = dg.Graph()
    g.add_op(dg.Op(0, dg.OpKind.CopyToSlice, [cache, new], [written], {"starts": [past, 0]}))
    g.add_op(dg.Op(1, dg.OpKind.Slice, [written], [head], {"begin": [0], "end": [past + s], "axes": [0]}))
    g.add_op(dg.Op(2, dg.OpKind.MatMul, [mask, head], [out]))
    g.finalize()
    (p,) = g.get_partitions()
    cp = p.compile([mask, new, cache], [out], engine)
    ref = np.zeros((12, 3), np.float32)
    for pst, n in ((1, 3), (4, 1), (5, 7)):
        x = rng.standard_normal((n, 3), dtype=np.float32)
        m = rng.standard_normal((n, pst + n), dtype=np.float32)
        (o,) = run(cp, m, x)
        ref[pst : pst + n] = x
        np.testing.assert_array_equal(cp.read_state(0), ref)
        np.testing.assert_allclose(o, m @ ref[: pst + n], rtol=1e-5, atol=1e-5)
    with pytest.raises(dg.ShapeError, match="fits in dst"):
        run(cp, np.zeros((8, 16), np.float32), np.zeros((8, 3), np.float32))  # 8 + 8 > 12


def two_writes_partition(engine, state_dtype=dg.f32):
    """k[:, :, pos, :] = a (pos from the input: checked before computing), then
    v[:, :, pos + shift, :] = b with pos + shift computed inside the graph
    (checked while computing); out = k.sum + v.sum."""
    s = dg.Dim("s", max=SMAX)
    k = lt(0, [B, H, SMAX, D], dtype=state_dtype, property=dg.STATE, name="k")
    v = lt(1, [B, H, SMAX, D], dtype=state_dtype, property=dg.STATE, name="v")
    a, b = lt(2, [B, H, s, D], dtype=state_dtype, name="a"), lt(3, [B, H, s, D], dtype=state_dtype, name="b")
    pos, shift = lt(4, [s], dtype=dg.i32, name="pos"), lt(5, [1], dtype=dg.i32, name="shift")
    pos2 = lt(6, dtype=dg.i32)
    k2, v2, sk, sv, out = lt(7, dtype=state_dtype), lt(8, dtype=state_dtype), lt(9, dtype=state_dtype), \
        lt(10, dtype=state_dtype), lt(11, dtype=state_dtype)
    g = dg.Graph()
    g.add_op(dg.Op(0, dg.OpKind.ScatterRows, [k, pos, a], [k2]))
    g.add_op(dg.Op(1, dg.OpKind.Add, [pos, shift], [pos2]))
    g.add_op(dg.Op(2, dg.OpKind.ScatterRows, [v, pos2, b], [v2]))
    g.add_op(dg.Op(3, dg.OpKind.ReduceSum, [k2], [sk], {"axes": [2]}))
    g.add_op(dg.Op(4, dg.OpKind.ReduceSum, [v2], [sv], {"axes": [2]}))
    g.add_op(dg.Op(5, dg.OpKind.Add, [sk, sv], [out]))
    g.finalize()
    (p,) = g.get_partitions()
    return p.compile([a, b, pos, shift, k, v], [out], engine)


@pytest.mark.parametrize("state_dtype", [dg.f32, dg.f16])
def test_a_refused_computed_index_writes_nothing(engine, rng, state_dtype):
    """The second write's index is computed in the graph: found out of range
    only while computing, after the first write ran. Both are undone."""
    cp = two_writes_partition(engine, state_dtype)
    npdt = state_dtype.numpy
    k_ref = np.zeros((B, H, SMAX, D), npdt)
    v_ref = np.zeros((B, H, SMAX, D), npdt)
    for positions, shift in (([0, 1, 2], 1), ([3], 2), ([4, 5], 0)):
        a = rng.standard_normal((B, H, len(positions), D)).astype(npdt)
        b = rng.standard_normal((B, H, len(positions), D)).astype(npdt)
        run(cp, a, b, np.array(positions, np.int32), np.array([shift], np.int32))
        k_ref[:, :, positions] = a
        v_ref[:, :, [p + shift for p in positions]] = b
        np.testing.assert_array_equal(cp.read_state(0), k_ref)
        np.testing.assert_array_equal(cp.read_state(1), v_ref)
    for positions, shift in (([6, 7], 1), ([2], 100), ([0], -1)):
        a = np.full((B, H, len(positions), D), 7, npdt)
        b = np.full((B, H, len(positions), D), 9, npdt)
        with pytest.raises(dg.ExecutionError, match="outside \\[0, 8\\).*state unchanged"):
            run(cp, a, b, np.array(positions, np.int32), np.array([shift], np.int32))
        np.testing.assert_array_equal(cp.read_state(0), k_ref)
        np.testing.assert_array_equal(cp.read_state(1), v_ref)
    # and it goes on working after a refusal
    run(cp, np.ones((B, H, 1, D), npdt), np.ones((B, H, 1, D), npdt), np.array([6], np.int32), np.array([1], np.int32))
    k_ref[:, :, 6] = 1
    v_ref[:, :, 7] = 1
    np.testing.assert_array_equal(cp.read_state(0), k_ref)
    np.testing.assert_array_equal(cp.read_state(1), v_ref)


class _DLPackOnly:
    """An object known only by its __dlpack__ (as a foreign framework's tensor is)."""

    def __init__(self, arr):
        self._arr = arr

    def __dlpack__(self, *args, **kwargs):
        return self._arr.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self._arr.__dlpack_device__()


def test_write_state_checks_before_converting(engine, rng):
    cp = kv_partition(engine)
    v = rng.standard_normal((B, H, SMAX, D), dtype=np.float32)
    cp.write_state(0, v)
    hostile = [
        ("strings", np.full((B, H, SMAX, D), "x"), dg.DTypeError),
        ("a string", "0.5", dg.DTypeError),
        ("bytes", b"\0" * 256, dg.DTypeError),
        ("a ragged list", [[[[1.0]]], [[[1.0, 2.0]]]], dg.ShapeError),
        ("objects", np.full((B, H, SMAX, D), None, dtype=object), dg.DTypeError),
        ("complex", np.zeros((B, H, SMAX, D), np.complex64), dg.DTypeError),
        ("a dict", {"a": 1}, dg.DTypeError),
        ("a stride-0 view of 2^40 rows", np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), (2**40, D), (0, 0)),
         dg.ShapeError),
        ("a wrong-shape DLPack object", _DLPackOnly(np.zeros((3, 3), np.float32)), dg.ShapeError),
        ("an int too large for numpy", [[[[2**70] * D] * SMAX] * H] * B, dg.DTypeError),
    ]
    for what, data, err in hostile:
        with pytest.raises(err, match="state cache"):
            cp.write_state(0, data)
        np.testing.assert_array_equal(cp.read_state(0), v, err_msg=what)
    with pytest.raises(dg.ShapeError, match="integer id"):
        cp.read_state("0")


def test_write_state_takes_dlpack_and_lists(engine, rng):
    cp = kv_partition(engine)
    v = rng.standard_normal((B, H, SMAX, D), dtype=np.float32)
    cp.write_state(0, _DLPackOnly(v))
    np.testing.assert_array_equal(cp.read_state(0), v)
    cp.write_state(0, v.astype(np.float64).tolist())
    np.testing.assert_array_equal(cp.read_state(0), v)
