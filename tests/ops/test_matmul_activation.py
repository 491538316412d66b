"""An activation read off a MatMul computed in the product's kernel
(kernels/f32_matmul.h, `Activation`; lower/matmul.cpp decides): GELU in its erf
form and ReLU, when that op is the product's one reader and both are f32.

The fused graph must give the very bits of the same product followed by the op
as a node of its own (the partition compiled with the product also an output,
which keeps the two apart), at every row count that picks another kernel
(1 row, ggml's without AVX2; 2-7, 8-11, sgemm, the AVX-512 kernel to 63), 1 and 2 threads,
with and without a bias, quantized weights too; and must be one node where our
kernels multiply. Where the op is not fused (another reader, GELU's tanh form,
a bias that does not fuse) the values are those of the two ops.
"""

import math

import numpy as np
import pytest

import dyngraph as dg
from oputil import run
from ops.test_matmul import F32_EPS, SUM_ULPS, reference

K = dg.OpKind
ROWS = [1, 2, 5, 7, 8, 11, 12, 13, 33, 64, 100, 300]
ACTS = {"gelu": (K.GELU, {"mode": "erf"}), "relu": (K.ReLU, {})}


def randn(rng, shape):
    return rng.standard_normal(shape).astype(np.float32)


def gelu_ref(x):
    return x * 0.5 * (1.0 + np.vectorize(math.erf, otypes=[np.float64])(x / math.sqrt(2.0)))


def relu_ref(x):
    return np.where(x > 0, x, 0.0)


REFS = {"gelu": gelu_ref, "relu": relu_ref}


def compiled(act, k, n, w, bias=None, also_product=False, also_added=False, threads=1, batch=None, **options):
    """act(x @ w (+ bias)) for x [rows, k] (rows dynamic; [batch, rows, k] with `batch`). With
    `also_product` the product is a partition output too; with `also_added`, product + product is
    one (a second reader): either keeps the activation a node of its own."""
    g, m = dg.GraphBuilder(), dg.Dim("m", 1, 4096)
    x = g.input("x", dg.f32, [m, k] if batch is None else [batch, m, k])
    ins = [x, g.constant("w", w)] + ([g.constant("bias", bias)] if bias is not None else [])
    product = g.op(K.MatMul, ins, {})
    kind, attrs = ACTS[act] if act in ACTS else (K.GELU, {"mode": act})
    y = g.op(kind, [product], attrs)
    outs = [y] + ([product] if also_product else []) + ([g.op(K.Add, [product, product], {})] if also_added else [])
    g.output(*outs)
    return g.compile(dg.Engine(dg.Engine.CPU, num_threads=threads), **options)


def nodes(cp) -> int:
    return cp.cache_info().last_graph_nodes


def ours(rows: int) -> bool:
    """Whether our kernels multiply `rows` rows of f32 weights (kernels::computes): ggml's
    matrix-vector product takes one row where the CPU has no AVX2."""
    return rows >= 2 or dg._backend.kernel_isa() != "generic"


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("act", ["gelu", "relu"])
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("repack", [True, False])  # (weights in panels where this CPU lays them out, or rows)
def test_the_fused_activation_has_the_bits_of_its_own_node(act, with_bias, threads, repack, rng):
    k, n = 72, 40  # 2 threads: a block of 32 columns and one of 8
    w, bias = randn(rng, (k, n)), randn(rng, (n,)) if with_bias else None
    fused = compiled(act, k, n, w, bias, threads=threads, repack_weights=repack)
    apart = compiled(act, k, n, w, bias, also_product=True, threads=threads, repack_weights=repack)
    for m in ROWS:
        a = randn(rng, (m, k))
        a[m // 2, 3] = np.nan  # a NaN row stays NaN through both activations
        (y,) = run(fused, a)
        y_apart, product = run(apart, a)
        assert nodes(fused) == nodes(apart) - (1 if ours(m) else 0), m
        if ours(m):
            assert nodes(fused) == 1
        np.testing.assert_array_equal(y, y_apart, err_msg=f"{act} {m} rows")
        assert np.isnan(y[m // 2]).all()
        # and the values are the activation of the exact product (GELU's kernel: ~2e-6 relative)
        ref, scale = reference(np.nan_to_num(a, nan=0.0), w, bias)
        keep = np.arange(m) != m // 2
        bound = SUM_ULPS * F32_EPS * scale[keep] + 4e-6 * np.abs(ref[keep])
        assert np.all(np.abs(y[keep] - REFS[act](ref[keep])) <= bound), f"{act} {m} rows"


def test_dynamic_rows_alternate_between_fused_and_not(rng):
    """Every graph built is lowered afresh: 1 row (ggml's product without AVX2, the op a node of its
    own) and 40 rows (fused) in turn give the values of their own."""
    k, n = 64, 48
    w, bias = randn(rng, (k, n)), randn(rng, (n,))
    cp = compiled("gelu", k, n, w, bias, threads=2, cache_capacity=1)
    for m in (1, 40, 1, 40, 3):
        a = randn(rng, (m, k))
        ref, scale = reference(a, w, bias)
        (y,) = run(cp, a)
        np.testing.assert_allclose(y, gelu_ref(ref), rtol=4e-6, atol=float(SUM_ULPS * F32_EPS * scale.max()))


@pytest.mark.parametrize("act", ["gelu", "relu"])
def test_a_second_reader_keeps_the_product_as_it_is(act, rng):
    """The product read by the activation and by an Add: the Add sees the product, not its activation,
    and the activation is applied once."""
    k, n = 32, 24
    w, bias = randn(rng, (k, n)), randn(rng, (n,))
    cp = compiled(act, k, n, w, bias, also_added=True)
    for m in (5, 40):
        a = randn(rng, (m, k))
        y, doubled = run(cp, a)
        _, product = run(compiled(act, k, n, w, bias, also_product=True), a)
        np.testing.assert_array_equal(doubled, product + product)
        ref, scale = reference(a, w, bias)
        np.testing.assert_allclose(y, REFS[act](ref), rtol=4e-6, atol=float(SUM_ULPS * F32_EPS * scale.max()))


def test_the_product_as_an_output_is_the_product(rng):
    k, n = 48, 16
    w = randn(rng, (k, n))
    cp = compiled("relu", k, n, w, also_product=True)
    a = randn(rng, (20, k))
    y, product = run(cp, a)
    ref, scale = reference(a, w)
    assert (product < 0).any()  # the ReLU would show
    assert np.all(np.abs(product - ref) <= SUM_ULPS * F32_EPS * scale)
    np.testing.assert_array_equal(y, np.where(product > 0, product, 0.0).astype(np.float32))


def test_gelu_tanh_stays_a_node_of_its_own(rng):
    k, n = 40, 24
    w, bias = randn(rng, (k, n)), randn(rng, (n,))
    cp = compiled("tanh", k, n, w, bias)
    a = randn(rng, (16, k))
    (y,) = run(cp, a)
    assert nodes(cp) == 2
    ref, scale = reference(a, w, bias)
    want = ref / (1.0 + np.exp(-2.0 * math.sqrt(2.0 / math.pi) * (ref + 0.044715 * ref**3)))
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=float(SUM_ULPS * F32_EPS * scale.max()))


@pytest.mark.parametrize("weight_type", ["q8_0", "q4_0", "f16"])
def test_stored_weights_fuse_with_the_same_bits(weight_type, rng):
    """Quantized weights (our integer kernels) fuse like f32 ones; f16 weights go to ggml's product
    (llamafile's sgemm) where ggml has it, and then the GELU stays a node of its own."""
    k, n = 64, 40
    w, bias = randn(rng, (k, n)), randn(rng, (n,))
    fused = compiled("gelu", k, n, w, bias, threads=2, weight_type=weight_type)
    apart = compiled("gelu", k, n, w, bias, also_product=True, threads=2, weight_type=weight_type)
    for m in (1, 3, 8, 33):
        a = randn(rng, (m, k))
        (y,) = run(fused, a)
        np.testing.assert_array_equal(y, run(apart, a)[0], err_msg=f"{weight_type} {m} rows")


def test_batched_rows_fuse(rng):
    """[batch, rows, k] @ [k, n]: the batches folded into rows of one product, the GELU on all of them."""
    k, n = 24, 32
    w, bias = randn(rng, (k, n)), randn(rng, (n,))
    cp = compiled("gelu", k, n, w, bias, batch=3, threads=2)
    apart = compiled("gelu", k, n, w, bias, batch=3, threads=2, also_product=True)
    for m in (1, 6, 50):
        a = randn(rng, (3, m, k))
        (y,) = run(cp, a)
        y_apart, _ = run(apart, a)
        assert nodes(cp) == nodes(apart) - 1
        np.testing.assert_array_equal(y, y_apart)
        ref, scale = reference(a, w, bias)
        np.testing.assert_allclose(y, gelu_ref(ref), rtol=4e-6, atol=float(SUM_ULPS * F32_EPS * scale.max()))


@pytest.mark.parametrize("repack", [True, False])
def test_a_product_beyond_the_cache_keeps_its_activation_apart(repack, rng):
    """Above kActivationFuseMaxValues (2^21 values of the product) the GELU stays a node of its own: the
    product's block is out of cache by then (kernels/f32_matmul.h); but not where the weights are in
    panels, whose product applies it tile by tile (f32_panels.h). Either way the values are the GELU
    of the product, with the bits of the GELU as a node of its own."""
    k, n = 8, 1024
    w, bias = randn(rng, (k, n)), randn(rng, (n,))
    cp = compiled("gelu", k, n, w, bias, repack_weights=repack)
    apart = compiled("gelu", k, n, w, bias, also_product=True, repack_weights=repack)
    # (f32 weights go in panels where the kernels have AVX2: kernels/f32_matmul.h, f32_panels_wanted)
    in_panels = repack and dg._backend.kernel_isa() != "generic"
    assert (cp.cache_info().panel_bytes > 0) == in_panels
    for m, fused in ((2048, True), (2049, in_panels), (4096, in_panels)):
        a = randn(rng, (m, k))
        (y,) = run(cp, a)
        assert nodes(cp) == (1 if fused else 2), m
        np.testing.assert_array_equal(y, run(apart, a)[0], err_msg=f"{m} rows")
        ref, scale = reference(a, w, bias)
        np.testing.assert_allclose(y, gelu_ref(ref), rtol=4e-6, atol=float(SUM_ULPS * F32_EPS * scale.max()))
