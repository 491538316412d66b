"""The storage types of GGUF files beyond q8_0 / q4_x, handed over as
dg.StoredWeight and used as they are: q5_0 and q5_1 (blocks of 32 values),
the k-quants q2_K to q6_K (blocks of 256, llama.cpp's Q*_K_S/M files) and
iq4_nl / iq4_xs (4-bit indices into a table, blocks of 32 / 256: IQ4_NL and
IQ4_XS files), and the types only ggml multiplies: the i-quants of 1 to 3
bits, the ternary tq1_0 / tq2_0 and mxfp4 (IQ1_S to IQ3_M, TQ and gpt-oss
files). ggml computes their products of 1-7 rows (q5_0: 1-19, q6_K: 1-11,
the others as dequant_min_rows says; rounding the activations to 8 bits per
block, as for q8_0) and gathers
their rows; from there our kernels multiply the same bytes dequantized, in
f32. Where the quantized panels are on (x86-64 with AVX2), q5_0, q5_1, q4_K
and q5_K MatMul weights are laid out in them instead
(tests/ops/test_quant_panels.py checks those products): the tests of the
dequantized products keep the rows (repack_weights=False) or expect rounded
activations. References dequantize the same bytes with the gguf package. The
k-quant, iq and tq blocks are random bytes with finite scales (gguf-py cannot
quantize to them): every such block is a valid one."""

import numpy as np
import pytest

import dyngraph as dg
from oputil import compile_gather, weight_product

gguf = pytest.importorskip("gguf")
quants = gguf.quants
Q = gguf.GGMLQuantizationType

SMALL = ["q5_0", "q5_1"]
KQUANTS = ["q2_K", "q3_K", "q4_K", "q5_K", "q6_K"]
IQ4 = ["iq4_nl", "iq4_xs"]  # 4-bit indices into a non-linear table of 16 values (blocks of 32 and 256)
# the types only ggml multiplies (no quant panels; dequantized from dequant_min_rows): the i-quants of
# 1-3 bits (indices into grids of 8 or 4 values), the ternary tq types, mxfp4 (blocks of 32, an e8m0 scale)
LOWBIT = ["iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq1_s", "iq1_m", "tq1_0", "tq2_0", "mxfp4"]
# byte offsets of each block's f16 scales (d, and dmin where it has one): ggml's block layouts
F16_FIELDS = {"q2_K": (80, 82), "q3_K": (108,), "q4_K": (0, 2), "q5_K": (0, 2), "q6_K": (208,), "iq4_nl": (0,),
              "iq4_xs": (0,), "iq2_xxs": (0,), "iq2_xs": (0,), "iq2_s": (0,), "iq3_xxs": (0,), "iq3_s": (0,),
              "iq1_s": (0,), "iq1_m": (), "tq1_0": (52,), "tq2_0": (64,), "mxfp4": ()}
# the product's error relative to sum |a| |w|: the activations rounded to 8 bits per block (steps of
# max / 254), with f16 block sums for the types with a minimum (as q4_1)
ACT_ROUND = 1 / 254 + 2.0**-9


def qtype(storage: str):
    return getattr(Q, storage.upper())


def blocks(rng, storage: str, rows: int, k: int) -> np.ndarray:
    """[rows, bytes of a row] of `storage`: quantized normal values (q5), or random k-quant or iq4 blocks."""
    if storage in SMALL:
        return quants.quantize(rng.standard_normal((rows, k), dtype=np.float32), qtype(storage))
    per, size = gguf.GGML_QUANT_SIZES[qtype(storage)]
    raw = rng.integers(0, 256, (rows, k // per, size), dtype=np.uint8)
    for at in F16_FIELDS[storage]:
        scale = rng.uniform(0.002, 0.02, (rows, k // per)).astype(np.float16)
        raw[:, :, at:at + 2] = scale.view(np.uint8).reshape(rows, k // per, 2)
    if storage == "iq1_m":  # its f16 scale: the top 4 bits of its 4 16-bit scale words (bytes 48-55), low first
        bits = rng.uniform(0.002, 0.02, (rows, k // per)).astype(np.float16).view(np.uint16)
        for i in range(4):
            hi = raw[:, :, 49 + 2 * i]
            raw[:, :, 49 + 2 * i] = (hi & 0x0F) | (((bits >> (4 * i)) & 0xF) << 4).astype(np.uint8)
    if storage == "mxfp4":  # the e8m0 scale byte: 2^(e - 127), here 2^-8 to 2^-2 (255 is NaN)
        raw[:, :, 0] = rng.integers(119, 126, (rows, k // per), dtype=np.uint8)
    return raw.reshape(rows, -1)


def dequantized(raw: np.ndarray, storage: str, shape) -> np.ndarray:
    return quants.dequantize(raw, qtype(storage)).reshape(shape).astype(np.float64)


@pytest.mark.parametrize("n_out,threads", [(70, 1), (70, 2), (64, 2)])
@pytest.mark.parametrize("storage", SMALL + KQUANTS + IQ4 + LOWBIT)
def test_products_with_the_stored_blocks_match_their_values(storage, n_out, threads, rng, tmp_path):
    # (64 outputs: ggml repacks q2_K and q4_K weights of a multiple of 8 rows for its own product)
    k = 512
    raw = blocks(rng, storage, n_out, k)
    deq = dequantized(raw, storage, (n_out, k))
    sw = dg.StoredWeight((n_out, k), storage, raw)
    part, ins, outs = weight_product(n_out, k)
    eng = dg.Engine(dg.Engine.CPU, num_threads=threads)
    cp = part.compile(ins, outs, eng, constants={1: sw}, weight_type="q4_0")  # a stored weight keeps its type
    assert cp.program.tensors[1].storage == storage
    info = cp.cache_info()
    assert info.constant_bytes + info.repacked_bytes >= sw.nbytes  # the blocks as given (or ggml's repacking)
    cp.save(tmp_path / "w.dg")
    loaded = dg.load(tmp_path / "w.dg", eng)
    for m in (1, 3, 8, 13, 40, 1):  # decode and prefill sizes, back to one row: one partition, rebuilt per shape
        a = rng.standard_normal((m, k), dtype=np.float32)
        ref = a.astype(np.float64) @ deq.T
        scale = np.abs(a) @ np.abs(deq.T)
        (y,) = cp(a)
        # from dequant_min_rows (8; q5_0 20, q6_K 12, the LOWBIT types 4-40 or never) our kernels multiply
        # the dequantized blocks in f32,
        # unless ggml repacked the weights for its own product or they are in panels (q5: rounded activations)
        exact = m >= dg._backend.dequant_min_rows(storage) and info.repacked_bytes == 0 and info.panel_bytes == 0
        assert (np.abs(y - ref) / scale).max() < (1e-6 if exact else ACT_ROUND), (storage, m)
        np.testing.assert_array_equal(loaded(a)[0], y)  # the file holds the same blocks


@pytest.mark.parametrize("storage", SMALL + KQUANTS + IQ4 + LOWBIT)
def test_a_stored_table_gathers_its_rows(storage, rng):
    rows, k = 20, 256
    raw = blocks(rng, storage, rows, k)
    deq = dequantized(raw, storage, (rows, k))
    cp = compile_gather(rows, k, dg.StoredWeight((rows, k), storage, raw))
    pick = np.array([3, 0, 19, 3])
    np.testing.assert_allclose(cp(pick)[0], deq[pick], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("storage", KQUANTS + ["iq4_xs"] + [t for t in LOWBIT if t != "mxfp4"])
def test_k_quant_rows_must_split_into_blocks_of_256(storage, rng):
    raw = blocks(rng, storage, 4, 256)
    with pytest.raises(dg.CompileError, match=f"rows of 128 values do not split into {storage} blocks of 256"):
        dg.StoredWeight((8, 128), storage, raw)
    with pytest.raises(dg.CompileError, match="takes"):
        dg.StoredWeight((4, 256), storage, raw.reshape(-1)[:-1])


# (tq2_0: ggml's product at every row count, its activations rounded: the first test checks it)
@pytest.mark.parametrize("storage", SMALL + KQUANTS + IQ4 + [t for t in LOWBIT if t != "tq2_0"])
def test_products_from_8_rows_read_the_values_ggml_reads(storage, rng):
    """One-hot activation rows pick the weights' values out exactly; from dequant_min_rows (4-40 rows by
    type) our kernels dequantize the blocks of weights kept as rows themselves (AVX2 for q5_0, q5_1, q6_K
    and the i-quants of 1-3 bits), and must get the very values of ggml's conversion, which a Gather of
    the same blocks returns."""
    n_out, k = 70, 256  # (not a multiple of 8 rows: ggml repacks none of them for its own product)
    raw = blocks(rng, storage, n_out, k)
    sw = dg.StoredWeight((n_out, k), storage, raw)
    part, ins, outs = weight_product(n_out, k)
    cp = part.compile(ins, outs, dg.Engine(dg.Engine.CPU, num_threads=1), constants={1: sw}, repack_weights=False)
    assert cp.cache_info().repacked_bytes == 0 and cp.cache_info().panel_bytes == 0
    (picked,) = cp(np.eye(k, dtype=np.float32))  # [k, n_out]: the weights, transposed
    np.testing.assert_array_equal(picked.T, compile_gather(n_out, k, sw)(np.arange(n_out))[0])


@pytest.mark.parametrize("storage", ["iq2_xxs", "iq2_xs", "iq1_s"])
def test_f32_values_are_not_quantized_to_a_type_that_needs_an_importance_matrix(storage, rng):
    """ggml quantizes to these only with an importance matrix (it asserts, ending the process, without
    one): a program whose constant says such a storage and comes as f32 values (an IR file's tensor, the C
    API's constants) is a CompileError, not a crash."""
    from dyngraph.compiled_partition import CompiledPartition
    from dyngraph.compiler import build_program, finish_program, run_passes

    part, ins, outs = weight_product(8, 256)
    prog, data, sources = build_program(part, ins, outs, {1: rng.standard_normal((8, 256), dtype=np.float32)})
    run_passes(prog, data)
    finish_program(prog, sources, ())
    prog.tensors[1].storage = storage
    with pytest.raises(dg.CompileError, match=f"cannot be quantized to {storage}.*importance matrix"):
        CompiledPartition.create(prog, data, [dg.Engine(dg.Engine.CPU, num_threads=1)], 4)
    prog.tensors[1].storage = "iq3_s"  # (one that ggml quantizes without: the same program compiles)
    cp = CompiledPartition.create(prog, data, [dg.Engine(dg.Engine.CPU, num_threads=1)], 4)
    a = rng.standard_normal((3, 256), dtype=np.float32)
    ref = a @ data[1].T
    # (iq3_s's own error on normal values, 3.4 bits a value: 0.2 here; values out of place: 1 and more)
    assert np.linalg.norm(cp(a)[0] - ref) / np.linalg.norm(ref) < 0.3
