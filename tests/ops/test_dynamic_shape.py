"""DynamicReshape / DynamicTranspose: shape-tensor values are read on the host
at execution, bound as symbols, and part of the graph cache key."""

import numpy as np
import pytest

import dyngraph as dg
from oputil import compile_op, run

DYN = dg.DYNAMIC_DIM


def reshape_cp(engine, special_zero=True):
    return compile_op(dg.OpKind.DynamicReshape, [[DYN, 6], [3]], [dg.f32, dg.i64],
                      attrs={"special_zero": special_zero}, engine=engine)


@pytest.mark.parametrize(
    "n, target, expected",
    [(4, [0, 2, -1], (4, 2, 3)), (2, [3, -1, 2], (3, 2, 2)), (5, [1, 5, 6], (1, 5, 6)), (1, [0, 0, -1], None)],
)
def test_dynamic_reshape_matches_numpy(engine, rng, n, target, expected):
    cp = reshape_cp(engine)
    x = rng.standard_normal((n, 6), dtype=np.float32)
    if expected is None:  # 0 copies dims 0 and 1 of [1, 6]: [1, 6, 1]
        expected = (1, 6, 1)
    (y,) = run(cp, x, np.array(target, np.int64))
    np.testing.assert_array_equal(y, x.reshape(expected))


def test_shape_values_are_part_of_the_cache_key(engine, rng):
    cp = reshape_cp(engine)
    x = rng.standard_normal((4, 6), dtype=np.float32)
    for target in ([0, 2, -1], [0, 3, -1], [0, 2, -1], [0, 3, 2]):
        run(cp, x, np.array(target, np.int64))
    assert cp.cache_info().builds == 2  # [4, 2, 3] and [4, 3, 2]


@pytest.mark.parametrize(
    "target, match",
    [([-1, -1, 2], "more than one -1"), ([5, 5, 5], "has 125 elements, the input \\[4, 6\\] has 24"),
     ([7, -1, 1], "does not divide"), ([0, -2, 3], "invalid dimension -2"),
     # once: a product that overflows int64 gave a shape like (2^62 + 1, 24, 1) for 24 elements
     ([2**62 + 1, 2**62, -1], "too many elements"), ([2**40 + 1, 0, -1], "too many elements")],
)
def test_bad_reshape_targets_raise_shape_errors(engine, target, match):
    cp = reshape_cp(engine)
    with pytest.raises(dg.ShapeError, match=match):
        run(cp, np.zeros((4, 6), np.float32), np.array(target, np.int64))


@pytest.mark.parametrize("length", [1, 2, 5])
def test_a_shape_input_of_the_wrong_length_is_refused(engine, length):
    cp = reshape_cp(engine)
    with pytest.raises(dg.ShapeError):
        run(cp, np.zeros((4, 6), np.float32), np.array([1] * length, np.int64))


def test_zero_without_special_zero_is_invalid(engine):
    cp = reshape_cp(engine, special_zero=False)
    with pytest.raises(dg.ShapeError, match="invalid dimension 0"):
        run(cp, np.zeros((4, 6), np.float32), np.array([0, 2, -1], np.int64))


def test_infer_outputs_reads_the_shape_values_from_a_tensor(engine):
    cp = reshape_cp(engine)
    x = dg.LogicalTensor(0, dg.f32, [4, 6])
    shape = dg.Tensor(dg.LogicalTensor(1, dg.i64, [3]), engine, np.array([2, -1, 3], np.int64))
    (y,) = cp.infer_outputs([x, shape])
    assert y.shape == (2, 4, 3)
    with pytest.raises(dg.ShapeError, match="its values are needed"):
        cp.infer_outputs([x, dg.LogicalTensor(1, dg.i64, [3])])


def test_a_constant_shape_input_is_folded(engine, rng):
    cp = compile_op(dg.OpKind.DynamicReshape, [[DYN, 6], [2]], [dg.f32, dg.i32],
                    constants={1: np.array([-1, 3], np.int32)}, engine=engine)
    for n in (1, 4):
        x = rng.standard_normal((n, 6), dtype=np.float32)
        (y,) = run(cp, x)
        np.testing.assert_array_equal(y, x.reshape(-1, 3))


def transpose_cp(engine, order_len=3):
    return compile_op(dg.OpKind.DynamicTranspose, [[DYN, 3, 4], [order_len]], [dg.f32, dg.i64], engine=engine)


@pytest.mark.parametrize("order", [[2, 0, 1], [0, 2, 1], [-1, -3, -2], [0, 1, 2]])
def test_dynamic_transpose_matches_numpy(engine, rng, order):
    cp = transpose_cp(engine)
    for n in (1, 2, 5):
        x = rng.standard_normal((n, 3, 4), dtype=np.float32)
        (y,) = run(cp, x, np.array(order, np.int64))
        np.testing.assert_array_equal(y, np.transpose(x, order))


def test_an_empty_order_reverses(engine, rng):
    cp = transpose_cp(engine, order_len=0)
    x = rng.standard_normal((2, 3, 4), dtype=np.float32)
    (y,) = run(cp, x, np.zeros(0, np.int64))
    np.testing.assert_array_equal(y, x.T)


@pytest.mark.parametrize("order, match", [([0, 0, 1], "repeats axis 0"), ([0, 1, 3], "out of range")])
def test_bad_orders_raise_shape_errors(engine, order, match):
    with pytest.raises(dg.ShapeError, match=match):
        run(transpose_cp(engine), np.zeros((2, 3, 4), np.float32), np.array(order, np.int64))


def test_a_shape_input_computed_inside_the_partition_is_refused(engine):
    x, s, s2, y = (dg.LogicalTensor(0, dg.f32, [4, 6]), dg.LogicalTensor(1, dg.i32, [2]),
                   dg.LogicalTensor(2, dg.i32, [2]), dg.LogicalTensor(3, dg.f32))
    g = dg.Graph()
    g.add_op(dg.Op(0, dg.OpKind.Multiply, [s, s], [s2]))
    g.add_op(dg.Op(1, dg.OpKind.DynamicReshape, [x, s2], [y]))
    g.finalize()
    (p,) = g.get_partitions()
    with pytest.raises(dg.CompileError, match="must be a runtime input"):
        p.compile([x, s], [y], engine)


def test_dynamic_reshape_survives_save_and_load(engine, tmp_path, rng):
    cp = reshape_cp(engine)
    cp.save(tmp_path / "r.dgir")
    loaded = dg.load(tmp_path / "r.dgir", engine)
    x = rng.standard_normal((4, 6), dtype=np.float32)
    (y,) = run(loaded, x, np.array([0, 3, -1], np.int64))
    np.testing.assert_array_equal(y, x.reshape(4, 3, 2))
