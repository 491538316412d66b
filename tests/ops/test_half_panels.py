"""f16 and bf16 MatMul weights in panels (backend/kernels/f32_panels.h,
half_gemm_panels): a GGUF F16 or BF16 file's weights (dg.StoredWeight) that
only MatMuls read are laid out as the f32 panels are, 2 bytes an element,
and converted to f32 as they are loaded; the product then takes the f32
panels' very steps, so its bits are those of the same weights given in f32.
Where the CPU has AVX-512 BF16 (and the kernels run at AVX-512) bf16 weights
of an even row length lie in pairs of k instead and vdpbf16ps multiplies them
by the activations rounded to bf16 (as ggml's bf16 product does): checked
against numpy on the rounded activations. At every kernel variant (each in a
fresh process with DYNGRAPH_F32_PANELS=1, so the portable variant runs too),
at row counts on both sides of the tiles' sizes, weight counts that leave
every kind of last panel, odd and even row lengths, several threads; the
rule of the pairs; and that save() writes the rows back. Each variant over its own sub-panels and the
other width (tests/ops/test_f32_panels.py)."""

import os
import textwrap

import numpy as np
import pytest

import dyngraph as dg
from ops.test_f32_panels import SPLITS, run_split
from ops.test_kernel_isa import ORDER
from oputil import compile_weight_product
from subproc import IMPORT_TESTS


CHECK = IMPORT_TESTS + textwrap.dedent("""
    import numpy as np
    import dyngraph as dg
    from oputil import compile_weight_product

    def bits(values, storage):  # the 2-byte elements of `storage` nearest the values, and their f32 values
        if storage == "f16":
            h = values.astype(np.float16)
            return h.view(np.uint16), h.astype(np.float32)
        u = values.astype(np.float32).view(np.uint32)
        h = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)  # nearest, ties to even
        return h, (h.astype(np.uint32) << 16).view(np.float32)

    def bf16_rounded(a):  # nearest, ties to even (what vcvtneps2bf16 does to normal values)
        u = a.astype(np.float32).view(np.uint32).astype(np.uint64)
        return (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)

    rng = np.random.default_rng(0)
    for storage in ("f16", "bf16"):
        for threads in (1, 3):
            e = dg.Engine(dg.Engine.CPU, num_threads=threads)
            for k, n in ((1, 5), (2, 3), (33, 7), (64, 48), (37, 49), (100, 97), (256, 200), (20, 1030), (34, 50), (29, 85)):
                raw, w32 = bits(rng.standard_normal((n, k)), storage)
                half = compile_weight_product(n, k, dg.StoredWeight((n, k), storage, raw), e)
                f32 = compile_weight_product(n, k, w32, e)
                assert half.cache_info().panel_bytes == 2 * n * k, (storage, k, n, half.cache_info())
                assert f32.cache_info().panel_bytes == 4 * n * k
                pairs = storage == "bf16" and dg._backend.bf16_pair_panels(k)
                for m in (1, 2, 3, 4, 5, 7, 8, 9, 17, 24, 64, 130, 600, 1, 3):  # (600 on 3 threads: by rows)
                    a = rng.standard_normal((m, k)).astype(np.float32)
                    (out,) = half(a)
                    if not pairs:  # the f32 product of the converted weights
                        assert np.array_equal(out, f32(a)[0]), (storage, threads, k, n, m)
                    ar = (bf16_rounded(a) if pairs else a).astype(np.float64)
                    ref = ar @ w32.astype(np.float64).T
                    err = (np.abs(out - ref) / (np.abs(ar) @ np.abs(w32.astype(np.float64)).T)).max()
                    assert err < 1e-6, (storage, threads, k, n, m, err)
    print(dg._backend.panel_split(), dg._backend.kernel_isa())
""")


@pytest.mark.parametrize("split", SPLITS)
@pytest.mark.parametrize("isa", ORDER)
def test_products_over_half_panels_are_the_f32_products_at_every_variant(isa, split):
    run_split(CHECK, isa, split)


def cpu_has_avx512_bf16() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            return " avx512_bf16" in f.read()
    except OSError:
        return False


def test_bf16_weights_lie_in_pairs_where_the_cpu_multiplies_pairs():
    pairs = dg._backend.bf16_pair_panels
    want = cpu_has_avx512_bf16() and dg._backend.kernel_isa() in ("avx512", "avx512vnni")
    assert [pairs(k) for k in (2, 64, 576)] == [want] * 3
    assert not pairs(1) and not pairs(33)  # (an odd row: the converting kernel)


@pytest.mark.parametrize("storage", ["f16", "bf16"])
def test_this_process_follows_the_rule_and_save_writes_the_rows_back(storage, rng, tmp_path):
    n, k = 50, 64
    raw = rng.integers(0x3000, 0x3C00, (n, k), dtype=np.uint16)  # finite values of either type, below 1
    e = dg.Engine(dg.Engine.CPU)
    cp = compile_weight_product(n, k, dg.StoredWeight((n, k), storage, raw), e)
    on = cp.cache_info().panel_bytes > 0
    if dg._backend.kernel_isa() != "generic" and os.environ.get("DYNGRAPH_F32_PANELS") is None:
        assert on  # (where f32 weights go in panels by default, our kernels having AVX2, these do too)
    path = tmp_path / "half.dg"
    cp.save(path)
    a = rng.standard_normal((6, k)).astype(np.float32)
    (want,) = cp(a)
    loaded = dg.load(path, e)
    assert np.array_equal(loaded(a)[0], want)  # the file holds the elements, laid out again as before
    if storage == "f16":
        deq = raw.view(np.float16).astype(np.float64)
    else:
        deq = (raw.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    ref = a.astype(np.float64) @ deq.T
    # in panels: f32 products of the exact values (bf16 in pairs: of the activations rounded to bf16);
    # else ggml's, the activations rounded to the weights' type
    exact = on and not (storage == "bf16" and dg._backend.bf16_pair_panels(k))
    assert np.abs(want - ref).max() / np.abs(ref).max() < (1e-5 if exact else 1e-2)
