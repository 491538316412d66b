"""Compile an MLP once with a dynamic batch dimension, run it at several batch
sizes, and check every result against numpy.

    python examples/mlp_dynamic_batch.py
"""

import numpy as np

import dyngraph as dg

HIDDEN, FFN, OUT = 256, 1024, 64


def build_graph():
    batch = dg.Dim("batch", min=1, max=4096)  # a named dynamic dimension
    U = dg.UNKNOWN_DIM  # inferred at finalize
    x = dg.LogicalTensor(0, dg.f32, [batch, HIDDEN], name="x")
    w1 = dg.LogicalTensor(1, dg.f32, [HIDDEN, FFN], property=dg.CONSTANT, name="w1")
    b1 = dg.LogicalTensor(2, dg.f32, [FFN], property=dg.CONSTANT, name="b1")
    w2 = dg.LogicalTensor(3, dg.f32, [FFN, OUT], property=dg.CONSTANT, name="w2")
    h = dg.LogicalTensor(4, dg.f32, [U, U], name="h")
    a = dg.LogicalTensor(5, dg.f32, [U, U], name="a")
    y = dg.LogicalTensor(6, dg.f32, [U, U], name="y")
    g = dg.Graph(dg.Engine.CPU)
    g.add_op(dg.Op(0, dg.OpKind.MatMul, [x, w1, b1], [h], name="fc1"))
    g.add_op(dg.Op(1, dg.OpKind.GELU, [h], [a], name="gelu"))
    g.add_op(dg.Op(2, dg.OpKind.MatMul, [a, w2], [y], name="fc2"))
    g.finalize()
    return g, (x, w1, b1, w2), y


def reference(x, W1, B1, W2):
    from math import erf

    h = x @ W1 + B1
    gelu = 0.5 * h * (1.0 + np.vectorize(erf)(h / np.sqrt(2.0)))
    return gelu.astype(np.float32) @ W2


def main():
    rng = np.random.default_rng(0)
    W1 = rng.standard_normal((HIDDEN, FFN), dtype=np.float32) / np.sqrt(HIDDEN)
    B1 = rng.standard_normal(FFN, dtype=np.float32) * 0.1
    W2 = rng.standard_normal((FFN, OUT), dtype=np.float32) / np.sqrt(FFN)

    g, (x, w1, b1, w2), y = build_graph()
    (part,) = g.get_partitions()
    print(f"graph: {len(g.get_ops())} ops -> {part}")
    print(f"partition inputs: {part.get_input_ports()}")

    eng = dg.Engine(dg.Engine.CPU)
    stream = dg.Stream(eng)
    cp = part.compile([x, w1, b1, w2], [y], eng, constants={1: W1, 2: B1, 3: W2})  # compile once
    print(f"compiled: {cp}")

    for n in (1, 7, 64, 256, 7, 1):
        x_n = dg.LogicalTensor(0, dg.f32, [n, HIDDEN])
        (y_n,) = cp.infer_outputs([x_n])  # concrete output shape; builds the graph on a miss
        out = np.empty(y_n.shape, np.float32)  # the caller allocates the output
        data = rng.standard_normal((n, HIDDEN), dtype=np.float32)
        cp.execute(stream, [dg.Tensor(x_n, eng, data)], [dg.Tensor(y_n, eng, out)])
        err = float(np.abs(out - reference(data, W1, B1, W2)).max())
        print(f"batch {n:4d}: output {list(y_n.shape)}, max |error| vs numpy = {err:.2e}")
        assert err < 1e-3, err

    info = cp.cache_info()
    print(
        f"graph cache: {info.builds} graphs built for 4 distinct batch sizes, {info.hits} hits, "
        f"{info.entries} entries, {info.build_seconds * 1e3:.2f} ms building in all"
    )
    assert info.builds == 4


if __name__ == "__main__":
    main()
