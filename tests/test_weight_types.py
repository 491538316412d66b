"""Weights stored as f16, bf16, q8_0, q4_0: the compile option weight_type, for
MatMul weights and Gather tables. Compared with numpy in f64, with the error
bounded by the storage's precision times sum |a|*|w| (what rounding scales with)."""

import os

import numpy as np
import pytest

import dyngraph as dg
from oputil import compile_op, ggml_has_q4_0_layout, ggml_repacks_q4_0, run
from subproc import run_python

# One value's rounding, relative to the largest magnitude of its 32-value block:
# q8_0 steps of max/127 (error max/254), q4_0 steps of max/8 where the value of
# opposite sign to the max clamps to 7 steps (error up to max/8); block scales are
# f16 (another 2^-11). f16 / bf16 round each value.
ROUND = {"f16": 2.0**-11, "bf16": 2.0**-8, "q8_0": 1 / 254 + 2.0**-11, "q4_0": 1 / 8 + 2.0**-11}
# A product's worst case: the weight's rounding plus the activation's (ggml rounds
# activations to the weight's dot-product type: f16, bf16, or q8_0 for both quants)
BOUND = {"f16": 2 * ROUND["f16"], "bf16": 2 * ROUND["bf16"], "q8_0": 2 * ROUND["q8_0"], "q4_0": ROUND["q4_0"] + ROUND["q8_0"]}


def rel_error(got, a, w, ref):
    scale = np.abs(a) @ np.abs(w)
    return np.max(np.abs(got - ref) / scale)


@pytest.mark.parametrize("weight_type", ["f16", "bf16", "q8_0", "q4_0"])
def test_matmul_weights_in_a_smaller_type(engine, rng, weight_type):
    w = rng.standard_normal((64, 96), dtype=np.float32)
    cp = compile_op(dg.OpKind.MatMul, [[dg.DYNAMIC_DIM, 64], [64, 96]], constants={1: w}, engine=engine,
                    weight_type=weight_type)
    assert cp.program.tensors[1].storage == weight_type
    worst = 0.0
    for n in (1, 5, 33):
        a = rng.standard_normal((n, 64), dtype=np.float32)
        (y,) = run(cp, a)
        ref = a.astype(np.float64) @ w.astype(np.float64)
        worst = max(worst, rel_error(y, a, w, ref))
        assert worst < BOUND[weight_type], worst
    assert worst > 0  # the weights really are stored in the smaller type


def test_quantized_constants_take_less_memory(engine, rng):
    w = rng.standard_normal((256, 256), dtype=np.float32)
    sizes = {}
    for wt in ("f32", "q8_0", "q4_0"):
        cp = compile_op(dg.OpKind.MatMul, [[dg.DYNAMIC_DIM, 256], [256, 256]], constants={1: w}, engine=engine, weight_type=wt)
        sizes[wt] = cp.cache_info().constant_bytes
    assert sizes["q8_0"] < sizes["f32"] * 0.3 and sizes["q4_0"] < sizes["f32"] * 0.16


def test_rows_that_do_not_split_into_blocks_stay_f32(engine, rng):
    w = rng.standard_normal((40, 8), dtype=np.float32)  # stored transposed: rows of 40, not a multiple of 32
    cp = compile_op(dg.OpKind.MatMul, [[dg.DYNAMIC_DIM, 40], [40, 8]], constants={1: w}, engine=engine, weight_type="q4_0")
    assert cp.program.tensors[1].storage == "default"
    a = rng.standard_normal((3, 40), dtype=np.float32)
    np.testing.assert_allclose(run(cp, a)[0], a @ w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("weight_type", ["f16", "q8_0", "q4_0"])
def test_quantized_embedding_table(engine, rng, weight_type):
    table = rng.standard_normal((50, 64), dtype=np.float32)
    cp = compile_op(dg.OpKind.Gather, [[50, 64], [dg.DYNAMIC_DIM]], [dg.f32, dg.i32], constants={0: table},
                    engine=engine, weight_type=weight_type)
    ids = np.array([0, 7, 49, 7], np.int32)
    (y,) = run(cp, ids)
    rows = table[ids]
    # one rounding of each value: relative to its block's largest magnitude
    block_max = np.abs(rows.reshape(len(ids), -1, 32)).max(axis=-1, keepdims=True)
    err = np.abs(y - rows).reshape(len(ids), -1, 32) / block_max
    assert err.max() < ROUND[weight_type]
    assert err.max() > 0


def test_a_quantized_partition_saves_and_loads(engine, rng, tmp_path):
    w = rng.standard_normal((64, 32), dtype=np.float32)
    cp = compile_op(dg.OpKind.MatMul, [[dg.DYNAMIC_DIM, 64], [64, 32]], constants={1: w}, engine=engine, weight_type="q4_0")
    cp.save(tmp_path / "q.dgir")
    loaded = dg.load(tmp_path / "q.dgir", engine)
    a = rng.standard_normal((4, 64), dtype=np.float32)
    np.testing.assert_array_equal(run(loaded, a)[0], run(cp, a)[0])
    assert (tmp_path / "q.dgir").stat().st_size < w.nbytes * 0.3


def test_unknown_weight_type_is_refused(engine):
    with pytest.raises(dg.CompileError, match="weight_type"):
        compile_op(dg.OpKind.MatMul, [[2, 64], [64, 32]], constants={1: np.zeros((64, 32), np.float32)},
                   engine=engine, weight_type="q3_k")


def test_quantized_weights_are_repacked_for_the_faster_kernels(engine, rng):
    w = rng.standard_normal((64, 96), dtype=np.float32)
    spec = ([[dg.DYNAMIC_DIM, 64], [64, 96]],)
    packed = compile_op(dg.OpKind.MatMul, *spec, constants={1: w}, engine=engine, weight_type="q4_0")
    plain = compile_op(dg.OpKind.MatMul, *spec, constants={1: w}, engine=engine, weight_type="q4_0", repack_weights=False)
    assert (packed.cache_info().repacked_bytes > 0) == ggml_repacks_q4_0()
    assert plain.cache_info().repacked_bytes == 0
    # the stored values, read back exactly: identity rows through the plain
    # product (64 rows; a row of 0s and one 1 rounds to 8 bits exactly)
    wq = run(plain, np.eye(64, dtype=np.float32))[0].astype(np.float64)
    assert 0 < np.abs(wq - w).max() < ROUND["q4_0"] * np.abs(w).max()
    for n in (1, 4, 13, 40):
        a = rng.standard_normal((n, 64), dtype=np.float32)
        scale = np.abs(a) @ np.abs(w)
        p, q = run(packed, a)[0], run(plain, a)[0]
        exact = a.astype(np.float64) @ wq
        # the repacked product (ggml's) rounds the activations to 8 bits
        assert np.max(np.abs(p - exact) / scale) < BOUND["q8_0"]
        # so does the plain one below 8 rows (our integer kernels where the CPU has AVX2,
        # tests/ops/test_quant_matmul.py checks them exactly) and from 8 with AVX-512 VNNI;
        # else from 8 rows on it multiplies the dequantized weights in f32
        rounded = n < 8 or dg._backend.kernel_isa() == "avx512vnni"
        assert np.max(np.abs(q - exact) / scale) < (BOUND["q8_0"] if rounded else 1e-6)


SAVE_REPACKED = """
import sys
import numpy as np
import dyngraph as dg
sys.path.insert(0, TESTS)
from oputil import compile_op, run

engine = dg.Engine(dg.Engine.CPU, num_threads=1)
rng = np.random.default_rng(0)
w = rng.standard_normal((64, 96), dtype=np.float32)
cp = compile_op(dg.OpKind.MatMul, [[dg.DYNAMIC_DIM, 64], [64, 96]], constants={1: w}, engine=engine, weight_type="q4_0")
cp.save(PATH)
loaded = dg.load(PATH, engine)
assert cp.cache_info().repacked_bytes > 0 and loaded.cache_info().repacked_bytes > 0
a = rng.standard_normal((3, 64), dtype=np.float32)
np.testing.assert_array_equal(run(loaded, a)[0], run(cp, a)[0])
"""


def test_a_repacked_partition_saves_its_quantized_weights(tmp_path):
    # in a process running none of our vectorized kernels, where q4_0 goes to ggml's repacked layout
    if not ggml_has_q4_0_layout():
        pytest.skip("ggml-cpu has no repacked q4_0 layout for this CPU (AVX2, or NEON with i8mm or dot products)")
    here = os.path.dirname(os.path.abspath(__file__))
    code = f"TESTS, PATH = {here!r}, {str(tmp_path / 'p.dgir')!r}\n" + SAVE_REPACKED
    r = run_python(code, env_vars={"DYNGRAPH_KERNEL_ISA": "generic"})
    assert r.returncode == 0, r.stderr
