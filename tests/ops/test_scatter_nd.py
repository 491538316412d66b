"""ScatterND (ops/scatter.py) against a sequential numpy loop: slices and
elements, every reduction, repeated and negative indices, a dynamic number
of tuples and a dynamic data dimension; errors."""

import numpy as np
import pytest
from oputil import compile_op, run

import dyngraph as dg

K = dg.OpKind
DYN = dg.DYNAMIC_DIM
COMBINE = {"none": lambda old, new: new, "add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def scatter(data, idx, upd, reduction):
    out = data.copy()
    q = idx.shape[-1]
    tuples = idx.reshape(-1, q)
    slices = upd.reshape((len(tuples),) + data.shape[q:])
    for t, u in zip(tuples, slices):
        at = tuple(int(i) for i in t)
        out[at] = COMBINE[reduction](out[at], u)
    return out


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_rows_at_a_dynamic_number_of_indices(engine, rng, reduction):
    """data [rows, 4], indices [T, 1] (repeats and negatives among them), updates [T, 4]."""
    t = dg.Dim("t", min=1, max=64)
    cp = compile_op(K.ScatterND, [[DYN, 4], [t, 1], [t, 4]], [dg.f32, dg.i64, dg.f32], {"reduction": reduction},
                    engine=engine)
    for rows, n in ((3, 1), (6, 9), (17, 40)):
        data = rng.standard_normal((rows, 4)).astype(np.float32)
        idx = rng.integers(-rows, rows, (n, 1))
        upd = rng.standard_normal((n, 4)).astype(np.float32)
        (got,) = run(cp, data, idx, upd)
        np.testing.assert_array_equal(got, scatter(data, idx, upd, reduction))


@pytest.mark.parametrize("dtype", [dg.f32, dg.i32, dg.i64])
def test_elements_of_a_3d_tensor_by_triples(engine, rng, dtype):
    cp = compile_op(K.ScatterND, [[4, DYN, 3], [DYN, 3], [DYN]], [dtype, dg.i32, dtype], {"reduction": "add"},
                    engine=engine)
    for m, n in ((1, 2), (5, 7), (9, 30)):
        data = rng.integers(-50, 50, (4, m, 3)).astype(dtype.numpy)
        idx = np.stack([rng.integers(0, 4, n), rng.integers(0, m, n), rng.integers(-3, 3, n)], -1).astype(np.int32)
        upd = rng.integers(-50, 50, n).astype(dtype.numpy)
        (got,) = run(cp, data, idx, upd)
        assert got.dtype == dtype.numpy
        np.testing.assert_array_equal(got, scatter(data, idx, upd, "add"))


def test_the_inverse_permutation_of_torch_moe_routing(engine, rng):
    """inv[perm] = arange(n): the write transformers' grouped experts make."""
    cp = compile_op(K.ScatterND, [[DYN], [DYN, 1], [DYN]], [dg.i64, dg.i64, dg.i64], engine=engine)
    for n in (1, 8, 50):
        perm = rng.permutation(n)
        (got,) = run(cp, np.zeros(n, np.int64), perm[:, None], np.arange(n))
        np.testing.assert_array_equal(got, np.argsort(perm))


def test_an_index_outside_the_data_is_an_execution_error(engine):
    cp = compile_op(K.ScatterND, [[5, 2], [DYN, 1], [DYN, 2]], [dg.f32, dg.i64, dg.f32], engine=engine)
    data, upd = np.zeros((5, 2), np.float32), np.ones((2, 2), np.float32)
    for bad in (5, -6):
        with pytest.raises(dg.ExecutionError, match=f"{bad}.*outside"):
            run(cp, data, np.array([[1], [bad]]), upd)
    (got,) = run(cp, data, np.array([[1], [-5]]), upd)  # still fine afterwards
    np.testing.assert_array_equal(got[[0, 1]], 1)


def _graph(dtypes, shapes, attrs):
    ins = [dg.LogicalTensor(k, dt, list(s)) for k, (dt, s) in enumerate(zip(dtypes, shapes))]
    g = dg.Graph(dg.Engine.CPU)
    g.add_op(dg.Op(0, K.ScatterND, ins, [dg.LogicalTensor(9, dtypes[0])], attrs))
    g.finalize()


def test_bad_attributes_shapes_and_dtypes():
    ok = ([dg.f32, dg.i64, dg.f32], [(5, 2), (3, 1), (3, 2)])
    _graph(*ok, {})
    with pytest.raises(dg.GraphError, match="must be one of"):
        _graph(*ok, {"reduction": "sum"})
    with pytest.raises(dg.GraphError, match="unknown attribute"):
        _graph(*ok, {"reduce": "add"})
    with pytest.raises(dg.DTypeError, match=r"\(updates\) has dtype f16.*must match"):
        _graph([dg.f32, dg.i64, dg.f16], ok[1], {})
    with pytest.raises(dg.DTypeError):
        _graph([dg.f32, dg.f32, dg.f32], ok[1], {})  # float indices
    with pytest.raises(dg.DTypeError, match="f32, i32 or i64"):
        _graph([dg.f16, dg.i64, dg.f16], ok[1], {})
    with pytest.raises(dg.ShapeError, match="static number"):
        _graph(ok[0], [(5, 2), (3, 3), (3,)], {})
    with pytest.raises(dg.ShapeError):
        _graph(ok[0], [(5, 2), (3, 1), (3, 3)], {})


def test_an_ir_with_updates_or_output_of_another_dtype_is_refused_by_the_reader(engine):
    """The declared facts (same_dtypes, out_dtype_of) hold for IRs that bypassed the Python rules."""
    import copy

    from dyngraph import _backend
    from dyngraph.ir_writer import write_program

    cp = compile_op(K.ScatterND, [[DYN, 4], [DYN, 1], [DYN, 4]], [dg.f32, dg.i64, dg.f32], engine=engine)
    _backend.check_ir(write_program(cp.program))
    for tensor, what in ((cp.program.ops[0].inputs[2], r"input 2 .* is i32, input 0 is f32; they must match"),
                         (cp.program.ops[0].outputs[0], r"output 0 .* is i32, the op's outputs have the dtype of input 0")):
        p = copy.deepcopy(cp.program)
        p.tensors[tensor].dtype = dg.i32
        with pytest.raises(dg.IRError, match=what):
            _backend.check_ir(write_program(p))
