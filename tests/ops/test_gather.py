"""Gather (embedding lookup, numpy take) vs numpy."""

import numpy as np
import pytest

import dyngraph as dg
from oputil import compile_op, run

DYN = dg.DYNAMIC_DIM


@pytest.mark.parametrize("idx_dtype", [dg.i32, dg.i64])
def test_embedding_lookup_with_a_dynamic_token_count(engine, rng, idx_dtype):
    table = rng.standard_normal((50, 16), dtype=np.float32)
    cp = compile_op(dg.OpKind.Gather, [[50, 16], [DYN]], [dg.f32, idx_dtype], constants={0: table}, engine=engine)
    for n in (1, 7, 33):
        ids = rng.integers(0, 50, n).astype(idx_dtype.numpy)
        (out,) = run(cp, ids)
        np.testing.assert_array_equal(out, table[ids])


def test_batched_token_ids(engine, rng):
    table = rng.standard_normal((20, 8), dtype=np.float32)
    cp = compile_op(dg.OpKind.Gather, [[20, 8], [DYN, DYN]], [dg.f32, dg.i64], constants={0: table}, engine=engine)
    for b, s in ((1, 1), (2, 5), (3, 9)):
        ids = rng.integers(0, 20, (b, s))
        (out,) = run(cp, ids)
        np.testing.assert_array_equal(out, table[ids])


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_take_along_any_axis(engine, rng, axis):
    cp = compile_op(dg.OpKind.Gather, [[DYN, 5, 6], [DYN]], [dg.f32, dg.i32], attrs={"axis": axis}, engine=engine)
    for n, k in ((4, 1), (3, 3), (7, 2)):
        x = rng.standard_normal((n, 5, 6), dtype=np.float32)
        size = x.shape[axis]
        idx = rng.integers(0, size, k).astype(np.int32)
        (out,) = run(cp, x, idx)
        np.testing.assert_array_equal(out, np.take(x, idx, axis=axis))


def test_f16_table(engine, rng):
    table = rng.standard_normal((10, 4)).astype(np.float16)
    cp = compile_op(dg.OpKind.Gather, [[10, 4], [DYN]], [dg.f16, dg.i32], constants={0: table}, engine=engine)
    ids = np.array([3, 3, 9, 0], np.int32)
    (out,) = run(cp, ids)
    assert out.dtype == np.float16
    np.testing.assert_array_equal(out, table[ids])


def test_an_out_of_range_id_is_a_clear_error(engine):
    table = np.zeros((10, 4), np.float32)
    cp = compile_op(dg.OpKind.Gather, [[10, 4], [DYN]], [dg.f32, dg.i64], constants={0: table}, engine=engine)
    with pytest.raises(dg.ShapeError, match=r"index 10 at element 2 .* outside \[0, 10\)"):
        run(cp, np.array([1, 2, 10], np.int64))


def test_a_computed_out_of_range_index_is_reported(engine):
    """Indices produced inside the partition (here: ids + 5) are checked by a kernel."""
    ids, five = dg.LogicalTensor(0, dg.i32, [DYN]), dg.LogicalTensor(1, dg.i32, [1], property=dg.CONSTANT)
    table = dg.LogicalTensor(2, dg.f32, [10, 2], property=dg.CONSTANT)
    shifted, out = dg.LogicalTensor(3, dg.i32), dg.LogicalTensor(4, dg.f32)
    g = dg.Graph()
    g.add_op(dg.Op(0, dg.OpKind.Add, [ids, five], [shifted]))
    g.add_op(dg.Op(1, dg.OpKind.Gather, [table, shifted], [out]))
    g.finalize()
    (p,) = g.get_partitions()
    cp = p.compile([ids, five, table], [out], engine,
                   constants={1: np.array([5], np.int32), 2: np.arange(20, dtype=np.float32).reshape(10, 2)})
    (o,) = run(cp, np.array([0, 4], np.int32))
    np.testing.assert_array_equal(o, [[10, 11], [18, 19]])
    with pytest.raises(dg.ExecutionError, match="computed index 12 is outside \\[0, 10\\)"):
        run(cp, np.array([7], np.int32))


def test_indices_must_be_integers():
    g = dg.Graph()
    g.add_op(dg.Op(0, dg.OpKind.Gather, [dg.LogicalTensor(0, dg.f32, [4, 2]), dg.LogicalTensor(1, dg.f32, [3])],
                   [dg.LogicalTensor(2, dg.f32)]))
    with pytest.raises(dg.DTypeError, match="i32 or i64"):
        g.finalize()
