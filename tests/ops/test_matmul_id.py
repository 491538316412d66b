"""MatMulId (ops/moe.py, ggml's mul_mat_id): each row times the expert matrix
its id selects, against numpy at several token counts; weights in both
layouts, one row shared by a token's experts; out-of-range ids; errors."""

import numpy as np
import pytest
from oputil import compile_op, run

import dyngraph as dg

K = dg.OpKind
E, KD, N = 6, 16, 8


def reference(x, w, ids, transpose_b):
    w = np.swapaxes(w, -1, -2) if transpose_b else w
    w64, x64 = w.astype(np.float64), x.astype(np.float64)
    if ids.ndim == 1:
        return np.einsum("tk,tkn->tn", x64, w64[ids])
    return np.einsum("tuk,tukn->tun", np.broadcast_to(x64, ids.shape + x.shape[-1:]), w64[ids])


@pytest.mark.parametrize("transpose_b", [False, True])
def test_one_expert_per_row_at_every_length(engine, rng, transpose_b):
    t = dg.Dim("t", min=1, max=256)
    wshape = (E, N, KD) if transpose_b else (E, KD, N)
    w = rng.standard_normal(wshape).astype(np.float32)
    cp = compile_op(K.MatMulId, [[t, KD], wshape, [t]], [dg.f32, dg.f32, dg.i64], {"transpose_b": transpose_b},
                    constants={1: w}, engine=engine)
    for n in (1, 5, 70):
        x = rng.standard_normal((n, KD)).astype(np.float32)
        ids = rng.integers(0, E, n)
        (got,) = run(cp, x, ids)
        np.testing.assert_allclose(got, reference(x, w, ids, transpose_b), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shared_row", [True, False])
def test_top_k_experts_per_token(engine, rng, shared_row):
    """ids [T, 2]: src [T, 1, K] (one row for both experts) or [T, 2, K]."""
    t = dg.Dim("t", min=1, max=64)
    u = 1 if shared_row else 2
    cp = compile_op(K.MatMulId, [[t, u, KD], [E, N, KD], [t, 2]], [dg.f32, dg.f32, dg.i32], {"transpose_b": True},
                    engine=engine)
    for n in (1, 3, 33):
        x = rng.standard_normal((n, u, KD)).astype(np.float32)
        w = rng.standard_normal((E, N, KD)).astype(np.float32)
        ids = rng.integers(0, E, (n, 2)).astype(np.int32)
        (got,) = run(cp, x, w, ids)
        assert got.shape == (n, 2, N)
        np.testing.assert_allclose(got, reference(x, w, ids, True), rtol=1e-5, atol=1e-5)


def test_f16_experts(engine, rng):
    w = rng.standard_normal((E, N, KD)).astype(np.float16)
    cp = compile_op(K.MatMulId, [[dg.DYNAMIC_DIM, KD], [E, N, KD], [dg.DYNAMIC_DIM]], [dg.f16, dg.f16, dg.i64],
                    {"transpose_b": True}, constants={1: w}, engine=engine)
    x = rng.standard_normal((9, KD)).astype(np.float16)
    ids = rng.integers(0, E, 9)
    (got,) = run(cp, x, ids)
    assert got.dtype == np.float16
    # ggml rounds the rows to f16 for the f16 dot product, the sum is f32: one f16 rounding of the result
    np.testing.assert_allclose(got.astype(np.float32), reference(x, w, ids, True), rtol=2e-3, atol=2e-3)


def test_an_expert_id_outside_the_experts_is_refused(engine, rng):
    cp = compile_op(K.MatMulId, [[dg.DYNAMIC_DIM, KD], [E, KD, N], [dg.DYNAMIC_DIM]], [dg.f32, dg.f32, dg.i64],
                    engine=engine)
    x, w = np.ones((3, KD), np.float32), np.ones((E, KD, N), np.float32)
    for bad in (E, -1):
        with pytest.raises((dg.ExecutionError, dg.ShapeError), match=f"expert id.*{bad}|{bad}.*expert id"):
            run(cp, x, w, np.array([0, bad, 1]))
    (got,) = run(cp, x, w, np.array([0, E - 1, 1]))
    np.testing.assert_array_equal(got, KD)


def _graph(dtypes, shapes, attrs=None):
    ins = [dg.LogicalTensor(k, dt, list(s)) for k, (dt, s) in enumerate(zip(dtypes, shapes))]
    g = dg.Graph(dg.Engine.CPU)
    g.add_op(dg.Op(0, K.MatMulId, ins, [dg.LogicalTensor(9, dtypes[0])], attrs or {}))
    g.finalize()


def test_bad_attributes_shapes_and_dtypes():
    f = [dg.f32, dg.f32, dg.i64]
    _graph(f, [(3, KD), (E, KD, N), (3,)])
    with pytest.raises(dg.GraphError, match="bool"):
        _graph(f, [(3, KD), (E, KD, N), (3,)], {"transpose_b": 1.5})
    with pytest.raises(dg.GraphError, match="unknown attribute"):
        _graph(f, [(3, KD), (E, KD, N), (3,)], {"transpose_a": True})
    with pytest.raises(dg.ShapeError, match="rank 3"):
        _graph(f, [(3, KD), (KD, N), (3,)])
    with pytest.raises(dg.ShapeError, match="contraction"):
        _graph(f, [(3, KD), (E, KD, N), (3,)], {"transpose_b": True})
    with pytest.raises(dg.ShapeError):
        _graph(f, [(3, KD), (E, KD, N), (4,)])
    with pytest.raises(dg.ShapeError):
        _graph(f, [(3, 3, KD), (E, KD, N), (3, 2)])
    with pytest.raises(dg.DTypeError, match="must match"):
        _graph([dg.f32, dg.f16, dg.i64], [(3, KD), (E, KD, N), (3,)])
    with pytest.raises(dg.DTypeError):
        _graph([dg.f32, dg.f32, dg.f32], [(3, KD), (E, KD, N), (3,)])
    with pytest.raises(dg.DTypeError):
        _graph([dg.i32, dg.i32, dg.i64], [(3, KD), (E, KD, N), (3,)])


def test_an_ir_with_weights_of_another_dtype_is_refused_by_the_reader(engine):
    import copy

    from dyngraph import _backend
    from dyngraph.ir_writer import write_program

    cp = compile_op(K.MatMulId, [[dg.DYNAMIC_DIM, KD], [E, KD, N], [dg.DYNAMIC_DIM]], [dg.f32, dg.f32, dg.i64],
                    engine=engine)
    _backend.check_ir(write_program(cp.program))
    p = copy.deepcopy(cp.program)
    p.tensors[p.ops[0].inputs[1]].dtype = dg.f16
    with pytest.raises(dg.IRError, match=r"MatMulId\).*input 1 .* is f16, input 0 is f32; they must match"):
        _backend.check_ir(write_program(p))
