"""Constants handed over already quantized (dg.StoredWeight): used as they
are. References dequantize the same bytes with the gguf package (ggml's
layouts); ggml rounds a quantized product's activations to q8_0 (f16 for f16
weights), which bounds the difference."""

import numpy as np
import pytest

import dyngraph as dg
from oputil import weight_product

quants = pytest.importorskip("gguf.quants")
Q = pytest.importorskip("gguf").GGMLQuantizationType

# activation rounding of the product, relative to sum |a| |w|: q8_0 steps (max/254) and f16 block
# scales; q4_1 multiplies q8_1 activations, whose block sums are f16 too (a few 2^-11 more)
ACT_ROUND = {"q8_0": 1 / 254 + 2.0**-11, "q4_0": 1 / 254 + 2.0**-11, "q4_1": 1 / 254 + 2.0**-9, "f16": 2.0**-11,
             "bf16": 2.0**-8}


def stored(w: np.ndarray, storage: str):
    raw = quants.quantize(w, getattr(Q, storage.upper()))
    deq = quants.dequantize(raw, getattr(Q, storage.upper())).reshape(w.shape)
    return dg.StoredWeight(w.shape, storage, raw), deq



@pytest.mark.parametrize("storage", ["q4_1", "q8_0", "q4_0", "f16"])
def test_stored_matmul_weight_is_used_as_is(storage, rng, tmp_path):
    w = rng.standard_normal((96, 64), dtype=np.float32)
    sw, deq = stored(w, storage)
    part, ins, outs = weight_product(96, 64)
    eng = dg.Engine(dg.Engine.CPU, num_threads=1)
    cp = part.compile(ins, outs, eng, constants={1: sw}, weight_type="q4_0")  # a stored weight keeps its type
    assert cp.program.tensors[1].storage == storage
    assert cp.cache_info().constant_bytes == sw.nbytes
    cp.save(tmp_path / "w.dg")
    loaded = dg.load(tmp_path / "w.dg", eng)
    for m in (1, 7, 40):
        a = rng.standard_normal((m, 64), dtype=np.float32)
        ref = a.astype(np.float64) @ deq.T.astype(np.float64)
        scale = np.abs(a) @ np.abs(deq.T)
        for c in (cp, loaded):
            (y,) = c(a)
            assert (np.abs(y - ref) / scale).max() < ACT_ROUND[storage] + 1e-6


def test_stored_gather_table_gives_the_stored_rows(rng):
    table = rng.standard_normal((50, 64), dtype=np.float32)
    sw, deq = stored(table, "q4_1")
    t = dg.LogicalTensor(0, dg.f32, [50, 64], property=dg.CONSTANT)
    idx = dg.LogicalTensor(1, dg.i64, [dg.Dim("n")])
    out = dg.LogicalTensor(2, dg.f32, [dg.UNKNOWN_DIM, 64])
    g = dg.Graph(dg.Engine.CPU)
    g.add_op(dg.Op(0, dg.OpKind.Gather, [t, idx], [out], {"axis": 0}))
    g.finalize()
    cp = g.get_partitions()[0].compile([t, idx], [g.get_partitions()[0].get_output_ports()[0]],
                                       dg.Engine(dg.Engine.CPU, num_threads=1), constants={0: sw})
    rows = np.array([3, 0, 49, 3])
    np.testing.assert_array_equal(cp(rows)[0], deq[rows])


def test_bad_stored_weights_are_compile_errors(rng):
    w = rng.standard_normal((96, 64), dtype=np.float32)
    sw, _ = stored(w, "q8_0")
    with pytest.raises(dg.CompileError, match="takes 6528 bytes, got 6527"):
        dg.StoredWeight((96, 64), "q8_0", sw.data[:-1])
    with pytest.raises(dg.CompileError, match="storage must be one of"):
        dg.StoredWeight((96, 64), "q3_k", sw.data)
    with pytest.raises(dg.CompileError, match="rows of 60 values do not split into q8_0 blocks"):
        dg.StoredWeight((96, 60), "q8_0", sw.data)
    part, ins, outs = weight_product(96, 64, transpose_b=False)  # [K, N]: a quantized weight cannot be transposed
    with pytest.raises(dg.CompileError, match="read untransposed"):
        part.compile(ins, outs, dg.Engine(dg.Engine.CPU), constants={1: dg.StoredWeight((64, 96), "q8_0",
                                                                                         quants.quantize(w.T.copy(), Q.Q8_0))})
    part, ins, outs = weight_product(96, 64)
    with pytest.raises(dg.ShapeError, match="data has shape"):
        part.compile(ins, outs, dg.Engine(dg.Engine.CPU), constants={1: stored(w[:64], "q8_0")[0]})


def test_a_stored_weight_only_feeds_weights(rng):
    a = dg.LogicalTensor(0, dg.f32, [4, 64])
    c = dg.LogicalTensor(1, dg.f32, [4, 64], property=dg.CONSTANT, name="bias")
    y = dg.LogicalTensor(2, dg.f32, [4, 64])
    g = dg.Graph(dg.Engine.CPU)
    g.add_op(dg.Op(0, dg.OpKind.Add, [a, c], [y]))
    g.finalize()
    sw, _ = stored(rng.standard_normal((4, 64), dtype=np.float32), "q8_0")
    with pytest.raises(dg.CompileError, match="read by an op that takes no stored weights"):
        g.get_partitions()[0].compile([a, c], [y], dg.Engine(dg.Engine.CPU), constants={1: sw})
