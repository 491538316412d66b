"""Quantized MatMul weights in panels (backend/kernels/quant_panels.h): a
compiled partition stores q8_0, q4_0, q4_1, q5_0, q5_1, q2_K, q3_K, q4_K,
q5_K, iq4_xs, and with VNNI q6_K and iq4_nl, weights that only MatMuls read, or MatMuls
and Gathers of their rows (a tied embedding), as panels of 32 weight rows,
and its own product reads them at every row count. Checked against numpy
(the activations rounded to 8 bits per block as the kernel rounds them, the
weights dequantized by gguf-py, in float64) for each type at every kernel
variant, each in a fresh process with DYNGRAPH_QUANT_PANELS=1 (generic: the
portable product; avx2 and avx512: the vpmaddubsw tiles; avx512vnni: the
vpdpbusd tiles), which must all give the same bits; at row counts on both
sides of the tiles' 6, 4 and 2 rows, q8_0 weights of -128 (whose magnitude
vpsignb cannot negate), q5, q5_K, q4_K, q6_K and iq4 values of 31, 31, 15,
63 and -127 times activations of 127 (the largest sums the AVX2 tiles hold
in 16 bits), q2_K and q3_K values of 3 and -4 (q3_K's largest magnitude), weight counts that leave every kind of last panel (1 to 31
rows, more or fewer than 16), several threads (a thread's columns are whole
panels); the rule of which weights are laid out that way, that a tied
table's Gathers give ggml's very rows, and that save() writes the rows
back."""

import hashlib
import textwrap

import numpy as np
import pytest

import dyngraph as dg
from ops.test_kernel_isa import ORDER, best_isa
from oputil import compile_gather, compile_tied
from quant_rounding import rounded_rows
from subproc import IMPORT_TESTS, run_python

pytest.importorskip("gguf")

CHECK = textwrap.dedent("""
    import hashlib, sys
    import numpy as np
    import dyngraph as dg
    from oputil import compile_weight_product
    from quant_rounding import rounded_rows
    from gguf import quants, GGMLQuantizationType as Q

    rng = np.random.default_rng(0)
    digest = hashlib.sha256()
    for threads in (1, 3):
        e = dg.Engine(dg.Engine.CPU, num_threads=threads)
        shapes = ((32, 1), (64, 5), (352, 16), (96, 17), (32, 31), (64, 32), (128, 33), (352, 100), (1536, 70))
        if Q.STORAGE_UPPER in (Q.Q2_K, Q.Q3_K, Q.Q4_K, Q.Q5_K, Q.Q6_K, Q.IQ4_XS):  # super-blocks of 256
            shapes = ((256, 1), (512, 5), (256, 16), (768, 17), (256, 31), (512, 32), (256, 33), (512, 100), (1536, 70))
        for k, n in shapes:
            if Q.STORAGE_UPPER in (Q.Q2_K, Q.Q3_K, Q.Q4_K, Q.Q5_K, Q.Q6_K):  # random blocks with finite scales
                from test_stored_weight_types import blocks  # (gguf cannot quantize to them)
                raw = blocks(rng, "STORAGE", n, k)
                # values of 15 (q4_K), 31 (q5_K) or 63 (q6_K): the AVX2 tiles' largest 16-bit sums; of 3 (q2_K)
                # and -4 (q3_K: its largest magnitude)
                values = {Q.Q6_K: slice(0, 192), Q.Q2_K: slice(16, 80), Q.Q3_K: slice(0, 96)}.get(Q.STORAGE_UPPER, slice(16, None))
                raw.reshape(n, k // 256, -1)[: (n + 1) // 2, :, values] = 0 if Q.STORAGE_UPPER == Q.Q3_K else 0xFF
            elif Q.STORAGE_UPPER in (Q.IQ4_NL, Q.IQ4_XS):  # random blocks (gguf cannot quantize to them)
                from test_stored_weight_types import blocks
                raw = blocks(rng, "STORAGE", n, k)
                # nibbles of 0: the table's -127, its largest magnitude (the AVX2 tile's largest pairs)
                values = slice(2, None) if Q.STORAGE_UPPER == Q.IQ4_NL else slice(8, None)
                raw.reshape(n, k // (32 if Q.STORAGE_UPPER == Q.IQ4_NL else 256), -1)[: (n + 1) // 2, :, values] = 0
            else:
                raw = quants.quantize(rng.standard_normal((n, k), dtype=np.float32), Q.STORAGE_UPPER)
            if Q.STORAGE_UPPER == Q.Q8_0:  # -128, which ggml's rounding never writes but a file may hold
                raw[:, 2:6] = 0x80
            if Q.STORAGE_UPPER in (Q.Q5_0, Q.Q5_1):  # values of 31 (with 127s: the AVX2 tile's largest sums)
                fields = 2 if Q.STORAGE_UPPER == Q.Q5_0 else 4
                raw.reshape(n, k // 32, -1)[: (n + 1) // 2, :, fields:] = 0xFF
            deq = quants.dequantize(raw, Q.STORAGE_UPPER).reshape(n, k).astype(np.float64)
            cp = compile_weight_product(n, k, dg.StoredWeight((n, k), "STORAGE", raw), e)
            assert cp.cache_info().panel_bytes == raw.nbytes, (k, n, cp.cache_info())
            for m in (1, 2, 3, 4, 5, 6, 7, 8, 12, 13, 64, 1):
                a = rng.standard_normal((m, k), dtype=np.float32) * rng.uniform(0.01, 100, (m, 1)).astype(np.float32)
                a[-1] = 0.5  # every value 127 once rounded
                if k >= 64:
                    a[m // 2, 32:64] = 0  # an all-zero block
                (out,) = cp(a)
                ar = rounded_rows(a)
                ref = ar @ deq.T
                # against the terms' magnitudes (q4_K's minimums can cancel most of an output)
                err = (np.abs(out - ref) / (np.abs(ar) @ np.abs(deq.T))).max()
                assert err < 1e-6, (threads, k, n, m, err)
                digest.update(out.tobytes())
            # a NaN or an infinity in a block makes the row's outputs NaN, as the rows' kernels do
            a = rng.standard_normal((3, k), dtype=np.float32)
            a[1, 0] = np.nan
            a[2, k - 1] = np.inf
            (out,) = cp(a)
            assert np.isfinite(out[0]).all() and np.isnan(out[1:]).all(), out
    print(dg._backend.kernel_isa(), digest.hexdigest())
""")


STORAGES = ["q8_0", "q4_0", "q4_1", "q5_0", "q5_1"]  # (weight_type's quantized types)
BLOCK_BYTES = {"q8_0": 34, "q4_0": 18, "q4_1": 20, "q5_0": 22, "q5_1": 24}
STORED = STORAGES + ["q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "iq4_nl", "iq4_xs"]  # (as a file stores them: dg.StoredWeight)
VNNI_ONLY = {"q6_K": 210, "iq4_nl": 8 * 18}  # in panels with VNNI only: the bytes of a row of 256 values


@pytest.mark.parametrize("storage", STORED)
def test_products_over_panels_match_numpy_and_agree_bit_for_bit_at_every_variant(storage):
    code = IMPORT_TESTS + CHECK.replace("STORAGE_UPPER", storage.upper()).replace("STORAGE", storage)
    seen = {}
    for isa in ORDER[: ORDER.index(best_isa()) + 1]:
        if storage in VNNI_ONLY and isa in ("avx2", "avx512"):
            continue  # (rows there: test_q6_k_and_iq4_nl_panels_need_vnni)
        r = run_python(code, timeout=300, env_vars={"DYNGRAPH_KERNEL_ISA": isa, "DYNGRAPH_QUANT_PANELS": "1"})
        assert r.returncode == 0, (isa, r.stderr[-3000:])
        got_isa, digest = r.stdout.split()[-2:]
        assert got_isa == isa
        seen[isa] = digest
    assert len(set(seen.values())) == 1, seen


@pytest.mark.parametrize("storage", sorted(VNNI_ONLY))
def test_q6_k_and_iq4_nl_panels_need_vnni(storage):
    """q6_K and iq4_nl weights go into the panels where the kernels have AVX-512 VNNI (or the portable
    product is asked for); with AVX2 alone they keep their rows (q6_K: ggml's product, then dequantized
    f32; iq4_nl: ggml's repacked product where ggml repacks it)."""
    code = IMPORT_TESTS + textwrap.dedent(f"""
        import numpy as np, dyngraph as dg
        from oputil import compile_weight_product
        from test_stored_weight_types import blocks
        raw = blocks(np.random.default_rng(0), "{storage}", 40, 256)
        cp = compile_weight_product(40, 256, dg.StoredWeight((40, 256), "{storage}", raw), dg.Engine(dg.Engine.CPU))
        cp(np.ones((3, 256), np.float32))
        print(cp.cache_info().panel_bytes)
    """)
    for isa in ORDER[: ORDER.index(best_isa()) + 1]:
        r = run_python(code, env_vars={"DYNGRAPH_KERNEL_ISA": isa, "DYNGRAPH_QUANT_PANELS": "1"})
        assert r.returncode == 0, (isa, r.stderr[-2000:])
        want = 40 * VNNI_ONLY[storage] if isa in ("generic", "avx512vnni") else 0  # (40 rows of 256 values)
        assert int(r.stdout.split()[-1]) == want, isa


def graph(k, n, tied=False):
    """x @ w^T; when tied, x is w's rows gathered (a tied embedding and its output layer)."""
    w = dg.LogicalTensor(1, dg.f32, [n, k], property=dg.CONSTANT)
    y = dg.LogicalTensor(2, dg.f32, [dg.UNKNOWN_DIM, dg.UNKNOWN_DIM])
    g = dg.Graph(dg.Engine.CPU)
    if tied:
        i = dg.LogicalTensor(0, dg.i64, [dg.DYNAMIC_DIM])
        x = dg.LogicalTensor(3, dg.f32, [dg.UNKNOWN_DIM, dg.UNKNOWN_DIM])
        g.add_op(dg.Op(1, dg.OpKind.Gather, [w, i], [x]))
        ins = [i, w]
    else:
        x = dg.LogicalTensor(0, dg.f32, [dg.DYNAMIC_DIM, k])
        ins = [x, w]
    g.add_op(dg.Op(0, dg.OpKind.MatMul, [x, w], [y], {"transpose_b": True}))
    g.finalize()
    (p,) = g.get_partitions()
    return p, ins, [y]


def quantized(rng, n, k, storage="q8_0"):
    from gguf import GGMLQuantizationType as Q
    from gguf import quants
    from test_stored_weight_types import blocks

    t = getattr(Q, storage.upper())
    gguf_quantizes = storage in STORAGES  # (the others: random blocks with finite scales)
    raw = quants.quantize(rng.standard_normal((n, k), dtype=np.float32), t) if gguf_quantizes else blocks(rng, storage, n, k)
    return raw, quants.dequantize(raw, t).reshape(n, k).astype(np.float64)


def super_blocks(storage: str) -> bool:
    """Whether the type's blocks hold 256 values."""
    return storage.endswith("_K") or storage == "iq4_xs"


def panels_on() -> bool:
    return dg._backend.kernel_isa() != "generic" and not dg._backend.amx_int8()


def test_which_weights_are_laid_out_in_panels(rng):
    if not panels_on():
        pytest.skip("quantized panels are the default where our kernels have AVX2 and no AMX products run")
    k, n = 64, 40
    raw, deq = quantized(rng, n, k)
    e = dg.Engine(dg.Engine.CPU)
    p, ins, outs = graph(k, n)
    assert p.compile(ins, outs, e, constants={1: dg.StoredWeight((n, k), "q8_0", raw)}).cache_info().panel_bytes == raw.nbytes
    # given as f32 and stored as a quantized type (weight_type): rounded, then laid out; f16 in the f32
    # panels' layout (test_half_panels.py)
    w32 = deq.astype(np.float32)
    for wt in STORAGES:
        got = p.compile(ins, outs, e, constants={1: w32}, weight_type=wt).cache_info().panel_bytes
        assert got == n * k // 32 * BLOCK_BYTES[wt], wt
    assert p.compile(ins, outs, e, constants={1: w32}, weight_type="f16").cache_info().panel_bytes == 2 * n * k
    # repack_weights=False keeps the rows
    assert p.compile(ins, outs, e, constants={1: dg.StoredWeight((n, k), "q8_0", raw)},
                     repack_weights=False).cache_info().panel_bytes == 0
    # (a table only Gathers read keeps its rows: test_a_tied_table_in_panels_gathers_ggmls_very_rows)


@pytest.mark.parametrize("storage", STORED)
def test_a_tied_table_in_panels_gathers_ggmls_very_rows(storage, rng):
    """A table that a Gather (its rows) and a MatMul (transposed) both read, as a tied embedding and its
    output layer: in panels, the Gather reading its rows back out of them, with the values ggml's
    get_rows gives on the rows (a Gather-only partition keeps them), and the product over the panels."""
    if not panels_on():
        pytest.skip("quantized panels are the default where our kernels have AVX2 and no AMX products run")
    if storage in VNNI_ONLY and dg._backend.kernel_isa() != "avx512vnni":
        pytest.skip("q6_K and iq4_nl panels need AVX-512 VNNI")
    k, n = (512 if super_blocks(storage) else 96), 70  # (a narrow last panel: rows 64..69)
    raw, deq = quantized(rng, n, k, storage)
    e = dg.Engine(dg.Engine.CPU, num_threads=2)
    sw = dg.StoredWeight((n, k), storage, raw)
    # the tied partition, with the gathered rows as an output beside the product
    cp = compile_tied(n, k, sw, e)
    assert cp.cache_info().panel_bytes == raw.nbytes
    # ggml's get_rows on the rows: a Gather-only partition keeps them
    gather = compile_gather(n, k, sw, e)
    assert gather.cache_info().panel_bytes == 0
    for pick in (np.array([0, 69, 7, 33, 64, 31, 32]), np.array([5]), np.arange(n)[::-1].copy()):
        got, prod = cp(pick)
        np.testing.assert_array_equal(got, gather(pick)[0])
        np.testing.assert_allclose(got, deq[pick], rtol=1e-6, atol=1e-7)
        ar = rounded_rows(got)
        assert (np.abs(prod - ar @ deq.T) / (np.abs(ar) @ np.abs(deq.T))).max() < 1e-6


def test_the_default_rule():
    """On where the kernels have AVX2 (their product over panels: AVX2's, or AVX-512 VNNI's),
    unless the process runs the AMX products (their prefill reads the rows; not run on an AMX CPU
    yet); off where only the portable product would read them."""
    rule = dg._backend.quant_panels_rule
    assert all(rule(isa, False) for isa in ("avx2", "avx512", "avx512vnni"))
    assert not any(rule(isa, True) for isa in ("avx2", "avx512", "avx512vnni"))
    assert not rule("generic", False) and not rule("generic", True)
    with pytest.raises(ValueError):
        rule("avx10", False)


def test_the_switch_turns_panels_off_and_on():
    code = IMPORT_TESTS + textwrap.dedent("""
        import numpy as np, dyngraph as dg
        from gguf import quants, GGMLQuantizationType as Q
        from oputil import compile_weight_product
        raw = quants.quantize(np.arange(64 * 3, dtype=np.float32).reshape(3, 64) / 50 - 1, Q.Q8_0)
        deq = quants.dequantize(raw, Q.Q8_0).reshape(3, 64)
        cp = compile_weight_product(3, 64, dg.StoredWeight((3, 64), "q8_0", raw), dg.Engine(dg.Engine.CPU))
        a = np.full((2, 64), 127.0, np.float32)  # 8 bits with scale 1, exact in f16 too (ggml's product off x86)
        np.testing.assert_allclose(cp(a)[0], a @ deq.T, rtol=1e-6)
        print(cp.cache_info().panel_bytes)
    """)
    for value, want in (("0", 0), ("1", 3 * 2 * 34)):
        r = run_python(code, env_vars={"DYNGRAPH_QUANT_PANELS": value})
        assert r.returncode == 0, r.stderr[-2000:]
        assert int(r.stdout.split()[-1]) == want


@pytest.mark.parametrize("storage", STORED)
@pytest.mark.parametrize("mmap_weights", [True, False])
def test_save_writes_the_rows_back(rng, tmp_path, mmap_weights, storage):
    """A partition saved with quantized weights in panels writes ggml's blocks (the file loads where
    panels are off and on, and computes the same product)."""
    k, n = (512 if super_blocks(storage) else 96), 45
    raw, deq = quantized(rng, n, k, storage)
    p, ins, outs = graph(k, n)
    cp = p.compile(ins, outs, dg.Engine(dg.Engine.CPU), constants={1: dg.StoredWeight((n, k), storage, raw)})
    path = tmp_path / "mm.dg"
    cp.save(path)
    a = rng.standard_normal((5, k), dtype=np.float32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "w.npy", deq)
    code = IMPORT_TESTS + textwrap.dedent(f"""
        import numpy as np, dyngraph as dg
        from quant_rounding import rounded_rows
        cp = dg.load({str(path)!r}, dg.Engine(dg.Engine.CPU), mmap_weights={mmap_weights})
        a, W = np.load({str(tmp_path / "a.npy")!r}), np.load({str(tmp_path / "w.npy")!r})
        (y,) = cp(a)
        # our kernels round the rows as quant_rounding does; ggml's product (the generic ISA, rows; q5 rows
        # below dequant_min_rows) in its own way
        rows_ours = dg._backend.kernel_isa() != "generic" and {storage!r} in ("q8_0", "q4_0", "q4_1")  # (quant_rows)
        ours = cp.cache_info().panel_bytes > 0 or rows_ours
        ref = (rounded_rows(a) if ours else a.astype(np.float64)) @ W.T
        assert np.abs(y - ref).max() / np.abs(ref).max() < (1e-5 if ours else 2e-2)
        print(cp.cache_info().panel_bytes)
    """)
    # (the child runs at this process's kernel level: q6_K and iq4_nl keep their rows without VNNI)
    taken = storage not in VNNI_ONLY or dg._backend.kernel_isa() in ("generic", "avx512vnni")
    for value, want in (("0", 0), ("1", raw.nbytes if taken else 0)):
        r = run_python(code, env_vars={"DYNGRAPH_QUANT_PANELS": value})
        assert r.returncode == 0, r.stderr[-2000:]
        assert int(r.stdout.split()[-1]) == want
    # the file holds ggml's blocks: the bytes given, found whole in it
    assert bytes(raw.tobytes()) in path.read_bytes()
