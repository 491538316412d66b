"""The MLP from the README: compile once, run at several batch sizes."""

import numpy as np

import dyngraph as dg


def test_mlp_dynamic_batch_matches_numpy(engine, rng):
    batch = dg.Dim("batch", min=1, max=1024)
    x = dg.LogicalTensor(0, dg.f32, [batch, 64], name="x")
    w = dg.LogicalTensor(1, dg.f32, [64, 128], property=dg.CONSTANT, name="w")
    h = dg.LogicalTensor(2, dg.f32, [dg.UNKNOWN_DIM, dg.UNKNOWN_DIM])
    y = dg.LogicalTensor(3, dg.f32, [dg.UNKNOWN_DIM, dg.UNKNOWN_DIM], name="y")
    g = dg.Graph(dg.Engine.CPU)
    g.add_op(dg.Op(0, dg.OpKind.MatMul, [x, w], [h]))
    g.add_op(dg.Op(1, dg.OpKind.ReLU, [h], [y]))
    g.finalize()
    (part,) = g.get_partitions()
    W = rng.standard_normal((64, 128), dtype=np.float32)
    cp = part.compile([x, w], [y], engine, constants={1: W})
    for n in (1, 7, 64):
        X = rng.standard_normal((n, 64), dtype=np.float32)
        (out,) = cp(X)
        np.testing.assert_allclose(out, np.maximum(X @ W, 0), rtol=1e-5, atol=1e-5)
