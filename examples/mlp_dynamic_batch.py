"""Compile an MLP once with a dynamic batch dimension, run it at several batch
sizes, and check every result against numpy.

    python examples/mlp_dynamic_batch.py
"""

import numpy as np

import dyngraph as dg

HIDDEN, FFN, OUT = 256, 1024, 64


def build_graph(W1, B1, W2) -> dg.GraphBuilder:
    b = dg.GraphBuilder()
    batch = dg.Dim("batch", min=1, max=4096)  # a named dynamic dimension
    x = b.input("x", dg.f32, [batch, HIDDEN])
    h = b.matmul(x, b.constant("w1", W1), b.constant("b1", B1), name="fc1")  # x @ W1 + B1
    y = b.matmul(b.gelu(h, name="gelu"), b.constant("w2", W2), name="fc2")
    b.output(y)  # y's shape was inferred as the op was added: [batch, OUT]
    return b


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

    b = build_graph(W1, B1, W2)
    (part,) = b.partitions()
    print(f"graph: {len(b.graph.get_ops())} ops -> {part}")
    print(f"partition inputs: {part.get_input_ports()}")
    print(f"output: {b.outputs[0]}")

    eng = dg.Engine(dg.Engine.CPU)
    stream = dg.Stream(eng)
    cp = b.compile(eng)  # compile once (the weights are the builder's constants)
    print(f"compiled: {cp}")

    for n in (1, 7, 64, 256, 7, 1):
        x_n = cp.get_inputs()[0].with_shape([n, HIDDEN])
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
