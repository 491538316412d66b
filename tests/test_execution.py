"""infer_outputs, execute, the graph cache, and the errors they raise."""

import numpy as np
import pytest

import dyngraph as dg
from oputil import run


def lt(i, shape=None, dtype=dg.f32, **kw):
    return dg.LogicalTensor(i, dtype, shape, **kw)


@pytest.fixture
def concat_partition(engine):
    """y = concat([a, b], axis 0) + 1 with a: [seq, 4], b: [seq + 1, 4] -> y: [2*seq + 1, 4]."""
    seq = dg.Dim("seq", min=1, max=64)
    a, b = lt(0, [seq, 4], name="a"), lt(1, [seq + 1, 4], name="b")
    one = lt(2, [1], property=dg.CONSTANT, name="one")
    c, y = lt(3, name="c"), lt(4, name="y")
    g = dg.Graph()
    g.add_op(dg.Op(0, dg.OpKind.Concat, [a, b], [c], {"axis": 0}))
    g.add_op(dg.Op(1, dg.OpKind.Add, [c, one], [y]))
    g.finalize()
    (p,) = g.get_partitions()
    return p.compile([a, b, one], [y], engine, constants={2: np.ones(1, np.float32)})


def test_infer_outputs_evaluates_derived_shapes(concat_partition):
    (y,) = concat_partition.infer_outputs([lt(0, [5, 4]), lt(1, [6, 4])])
    assert y.shape == (11, 4) and y.id == 4 and y.dtype is dg.f32


def test_outputs_keep_their_symbolic_shape_in_the_compiled_partition(concat_partition):
    assert str(concat_partition.get_outputs()[0].shape[0]) == "2*seq + 1"


def test_results_match_numpy_at_several_shapes(concat_partition, rng):
    for n in (1, 3, 17, 64):
        a = rng.standard_normal((n, 4), dtype=np.float32)
        b = rng.standard_normal((n + 1, 4), dtype=np.float32)
        (y,) = run(concat_partition, a, b)
        np.testing.assert_array_equal(y, np.concatenate([a, b]) + 1)


def test_a_new_shape_builds_a_graph_and_a_seen_shape_does_not(concat_partition):
    cp = concat_partition
    for n in (2, 3, 2, 3, 3):
        run(cp, np.zeros((n, 4), np.float32), np.zeros((n + 1, 4), np.float32))
    info = cp.cache_info()
    assert info.builds == 2 and info.entries == 2 and info.executions == 5


def test_infer_outputs_builds_so_execute_is_a_hit(concat_partition):
    cp = concat_partition
    cp.infer_outputs([lt(0, [4, 4]), lt(1, [5, 4])])
    assert cp.cache_info().builds == 1
    run(cp, np.zeros((4, 4), np.float32), np.zeros((5, 4), np.float32))
    info = cp.cache_info()
    assert info.builds == 1 and info.hits >= 1


def test_shape_only_query_builds_nothing(concat_partition):
    (y,) = concat_partition.infer_outputs([lt(0, [9, 4]), lt(1, [10, 4])], build=False)
    assert y.shape == (19, 4)
    assert concat_partition.cache_info().builds == 0


def test_lru_cache_evicts_the_least_recently_used_graph(concat_partition):
    cp = concat_partition
    cp.set_cache_capacity(2)
    for n in (1, 2, 1, 3):  # 2 is the least recently used when 3 arrives
        cp.infer_outputs([lt(0, [n, 4]), lt(1, [n + 1, 4])])
    info = cp.cache_info()
    assert (info.builds, info.evictions, info.entries) == (3, 1, 2)
    cp.infer_outputs([lt(0, [1, 4]), lt(1, [2, 4])])  # still cached
    assert cp.cache_info().builds == 3
    cp.infer_outputs([lt(0, [2, 4]), lt(1, [3, 4])])  # evicted: built again
    assert cp.cache_info().builds == 4


@pytest.mark.parametrize(
    "shapes, error, match",
    [
        (([5, 4], [7, 4]), dg.ShapeError, r"input 1 'b' \(id 1\): dimension 0 is seq \+ 1 = 6 \(seq=5\), got 7"),
        (([5, 3], [6, 4]), dg.ShapeError, r"input 0 'a' \(id 0\): dimension 1 is static, expected 4, got 3"),
        (([65, 4], [66, 4]), dg.ShapeError, r"seq = 65, outside its range \[1, 64\]"),
        (([5, 4, 1], [6, 4]), dg.ShapeError, r"input 0 'a' \(id 0\): expected rank 2, got rank 3"),
        (([5, 4],), dg.ShapeError, r"expected 2 inputs"),
    ],
)
def test_infer_outputs_names_what_is_wrong(concat_partition, shapes, error, match):
    with pytest.raises(error, match=match):
        concat_partition.infer_outputs([lt(i, s) for i, s in enumerate(shapes)])


def test_infer_outputs_checks_dtype_and_id(concat_partition):
    with pytest.raises(dg.DTypeError, match="expected dtype f32, got f16"):
        concat_partition.infer_outputs([lt(0, [2, 4], dg.f16), lt(1, [3, 4])])
    with pytest.raises(dg.ShapeError, match="input 1 should be tensor 'b' \\(id 1\\), got tensor id 7"):
        concat_partition.infer_outputs([lt(0, [2, 4]), lt(7, [3, 4])])


def test_infer_outputs_needs_concrete_shapes(concat_partition):
    with pytest.raises(dg.ShapeError, match="not concrete"):
        concat_partition.infer_outputs([lt(0, [dg.DYNAMIC_DIM, 4]), lt(1, [3, 4])])


def test_execute_refuses_an_output_of_the_wrong_shape(concat_partition, engine):
    cp = concat_partition
    a, b = np.zeros((2, 4), np.float32), np.zeros((3, 4), np.float32)
    out = np.zeros((6, 4), np.float32)
    with pytest.raises(dg.ShapeError, match=r"expected shape \[5, 4\].*got \[6, 4\]"):
        cp.execute(dg.Stream(engine), [dg.Tensor(lt(0, [2, 4]), engine, a), dg.Tensor(lt(1, [3, 4]), engine, b)],
                   [dg.Tensor(lt(4, [6, 4]), engine, out)])


def test_execute_refuses_a_read_only_output(concat_partition, engine):
    out = np.zeros((5, 4), np.float32)
    out.setflags(write=False)
    with pytest.raises(dg.ExecutionError, match="not a writable buffer"):
        concat_partition.execute(
            dg.Stream(engine),
            [dg.Tensor(lt(0, [2, 4]), engine, np.zeros((2, 4), np.float32)), dg.Tensor(lt(1, [3, 4]), engine, np.zeros((3, 4), np.float32))],
            [dg.Tensor(lt(4, [5, 4]), engine, out)],
        )


def test_execute_refuses_things_that_are_not_tensors(concat_partition, engine):
    with pytest.raises(dg.ExecutionError, match="input 0 is not a dyngraph.Tensor"):
        concat_partition.execute(dg.Stream(engine), [np.zeros((2, 4), np.float32)], [])


def test_execute_needs_a_stream_of_the_partitions_engine(concat_partition, engine):
    ins = [dg.Tensor(lt(0, [2, 4]), engine, np.zeros((2, 4), np.float32)),
           dg.Tensor(lt(1, [3, 4]), engine, np.zeros((3, 4), np.float32))]
    outs = [dg.Tensor(lt(4, [5, 4]), engine, np.zeros((5, 4), np.float32))]
    # (an engine of other threads is another engine; an equal one serves: tests/test_engine_equality.py)
    for stream in (None, "stream", dg.Stream(dg.Engine(num_threads=2))):
        with pytest.raises(dg.ExecutionError, match="needs a Stream of the partition's engine"):
            concat_partition.execute(stream, ins, outs)


@pytest.mark.parametrize("which", ["input", "output"])
def test_execute_refuses_tensors_of_another_engine(concat_partition, engine, which):
    other = dg.Engine(num_threads=2)  # not equal to the partition's (1 thread)
    ins = [dg.Tensor(lt(0, [2, 4]), other if which == "input" else engine, np.zeros((2, 4), np.float32)),
           dg.Tensor(lt(1, [3, 4]), engine, np.zeros((3, 4), np.float32))]
    out = np.full((5, 4), 3.0, np.float32)
    outs = [dg.Tensor(lt(4, [5, 4]), other if which == "output" else engine, out)]
    with pytest.raises(dg.ExecutionError, match="made for another engine"):
        concat_partition.execute(dg.Stream(engine), ins, outs)
    assert (out == 3.0).all()
    ins[0] = dg.Tensor(lt(0, [2, 4]), None, np.zeros((2, 4), np.float32))
    with pytest.raises(dg.ExecutionError, match="without an engine"):
        concat_partition.execute(dg.Stream(engine), ins, [dg.Tensor(lt(4, [5, 4]), engine, out)])


def test_an_output_made_read_only_after_its_tensor_is_refused(concat_partition, engine):
    out = np.full((5, 4), 3.0, np.float32)
    y = dg.Tensor(lt(4, [5, 4]), engine, out)
    out.setflags(write=False)
    with pytest.raises(dg.ExecutionError, match="not a writable buffer"):
        concat_partition.execute(
            dg.Stream(engine),
            [dg.Tensor(lt(0, [2, 4]), engine, np.zeros((2, 4), np.float32)), dg.Tensor(lt(1, [3, 4]), engine, np.zeros((3, 4), np.float32))],
            [y],
        )
    assert (out == 3.0).all()


def test_a_shape_whose_size_overflows_is_refused(engine):
    """3074457345618258603 * 6 wraps to 2 in 64 bits: it must not pass for 2 elements."""
    with pytest.raises(dg.ShapeError, match="dimension 0 is 3074457345618258603"):
        dg.Tensor(lt(0, [3074457345618258603, 6]), engine, np.zeros(2, np.float32))
    with pytest.raises(dg.ShapeError, match="above the limit"):  # each dimension allowed, the product not
        dg.Tensor(lt(0, [2**39, 2**39]), engine, np.zeros(2, np.float32))


def test_tensor_refuses_non_contiguous_data(engine):
    data = np.zeros((4, 8), np.float32)[:, ::2]
    with pytest.raises(dg.ExecutionError, match="C-contiguous"):
        dg.Tensor(lt(0, [4, 4]), engine, data)


def test_tensor_refuses_the_wrong_dtype(engine):
    with pytest.raises(dg.DTypeError, match="float64"):
        dg.Tensor(lt(0, [2]), engine, np.zeros(2))


def test_inputs_and_outputs_are_used_in_place(concat_partition, engine):
    cp = concat_partition
    a, b = np.ones((2, 4), np.float32), np.ones((3, 4), np.float32)
    out = np.zeros((5, 4), np.float32)
    y = dg.Tensor(lt(4, [5, 4]), engine, out)
    assert y.data_ptr == out.ctypes.data  # the Tensor wraps the caller's memory
    cp.execute(dg.Stream(engine), [dg.Tensor(lt(0, [2, 4]), engine, a), dg.Tensor(lt(1, [3, 4]), engine, b)], [y])
    np.testing.assert_array_equal(out, 2.0)
    info = cp.cache_info()
    assert info.staged_inputs == 0 and info.staged_outputs == 0


def test_an_output_that_aliases_an_input_is_computed_aside(engine):
    """A matmul written over its own input: correct, at the cost of one copy."""
    from oputil import compile_op

    cp = compile_op(dg.OpKind.MatMul, [[dg.DYNAMIC_DIM, 3], [3, 3]], engine=engine)
    x = np.arange(9, dtype=np.float32).reshape(3, 3)
    w = np.eye(3, dtype=np.float32)[::-1].copy()
    expected = x @ w
    tx = dg.Tensor(lt(0, [3, 3]), engine, x)
    out = cp.get_outputs()[0].with_shape([3, 3])
    cp.execute(dg.Stream(engine), [tx, dg.Tensor(lt(1, [3, 3]), engine, w)], [dg.Tensor(out, engine, x)])
    np.testing.assert_array_equal(x, expected)
    assert cp.cache_info().staged_outputs == 1


def test_constants_are_copied_at_compile(engine):
    """Changing the caller's weight array after compile changes nothing."""
    from oputil import compile_op

    w = np.eye(2, dtype=np.float32)
    cp = compile_op(dg.OpKind.MatMul, [[dg.DYNAMIC_DIM, 2], [2, 2]], constants={1: w}, engine=engine)
    w[:] = 5
    (y,) = cp(np.ones((1, 2), np.float32))
    np.testing.assert_array_equal(y, [[1, 1]])


def test_an_engine_computes_past_2_to_the_15_graphs():
    """ggml's thread pool counts computes in an int shifted left by 16 bits, which leaves int's range after
    2^15 computes (tools/ubsan-ggml.supp): computing goes on right past it, on two threads."""
    eng = dg.Engine(num_threads=2)
    x, y = lt(0, [4]), lt(1, [4])
    g = dg.Graph()
    g.add_op(dg.Op(0, dg.OpKind.Exp, [x], [y]))
    g.finalize()
    (p,) = g.get_partitions()
    cp = p.compile([x], [y], eng)
    data, out = np.arange(4, dtype=np.float32), np.empty(4, np.float32)
    ins, outs, stream = [dg.Tensor(lt(0, [4]), eng, data)], [dg.Tensor(lt(1, [4]), eng, out)], dg.Stream(eng)
    for i in range(40_000):
        data[0] = i % 7
        cp.execute(stream, ins, outs)
        if i % 9_999 == 0 or i == 39_999:
            np.testing.assert_allclose(out, np.exp(data), rtol=1e-6)
