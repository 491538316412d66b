"""MatMul's bias added inside the product (kernels/f32_matmul.h: sgemm adds its
product to the bias it finds in C, the other kernels add the bias to their
block), at every row count that picks another kernel (ggml's 1 row, the 2-7 row
kernel, 8-11 row blocks, sgemm from 12; the AVX-512 kernel to 63), every weight
type, 1 and 2 threads (each thread its own columns, or its own batches), and
the bias shapes that fuse and those that do not.

f32 weights are compared with the exact product (test_matmul's error bound);
quantized and half-precision ones with the same partition compiled without
the bias, plus the bias: bit for bit where the bias is added to the finished
product, within a few roundings where sgemm adds its K blocks to it (the
dequantizing path, taken at the generic ISA level).
"""

import numpy as np
import pytest

import dyngraph as dg
from oputil import compile_op, run
from ops.test_matmul import F32_EPS, assert_matmul_close, reference

K = dg.OpKind
D = dg.DYNAMIC_DIM
ROWS = [1, 2, 5, 7, 8, 11, 12, 13, 33, 64, 100]


def randn(rng, shape):
    return rng.standard_normal(shape).astype(np.float32)


def nodes(cp) -> int:
    return cp.cache_info().last_graph_nodes


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("n", [7, 40, 100])
@pytest.mark.parametrize("repack", [True, False])
def test_f32_bias_matches_the_exact_product_at_every_kernel(n, threads, repack, rng):
    # n: one block of columns, or 2 threads' blocks of 16 with a short last one; repack: the weights
    # in panels where this CPU's kernels lay them out (x86-64), else kept as rows (the kernels above)
    k = 72
    w, bias = randn(rng, (k, n)), randn(rng, (n,))
    engine = dg.Engine(dg.Engine.CPU, num_threads=threads)
    cp = compile_op(K.MatMul, [[D, k], [k, n], [n]], constants={1: w, 2: bias}, engine=engine,
                    repack_weights=repack)
    for m in ROWS:
        a = randn(rng, (m, k))
        assert_matmul_close(run(cp, a)[0], *reference(a, w, bias))


@pytest.mark.parametrize("threads", [1, 2])
def test_batches_shared_by_threads_add_the_bias_to_each(threads, rng):
    # several batches of runtime weights: each thread takes whole batches
    d = dg.Dim("m", 1, 1024)
    cp = compile_op(K.MatMul, [[4, d, 40], [4, 40, 24], [24]], engine=dg.Engine(dg.Engine.CPU, num_threads=threads))
    for m in (1, 3, 9, 12, 40):
        a, b, c = randn(rng, (4, m, 40)), randn(rng, (4, 40, 24)), randn(rng, (24,))
        assert_matmul_close(run(cp, a, b, c)[0], *reference(a, b, c))


@pytest.mark.parametrize("weight_type", ["q8_0", "q4_0", "q4_1", "f16", "bf16"])
@pytest.mark.parametrize("threads", [1, 2])
def test_stored_weights_add_the_bias_as_a_separate_add_would(weight_type, threads, rng):
    k, n = 96, 40
    w, bias = randn(rng, (k, n)), randn(rng, (n,))
    engine = dg.Engine(dg.Engine.CPU, num_threads=threads)
    with_bias = compile_op(K.MatMul, [[D, k], [k, n], [n]], constants={1: w, 2: bias}, engine=engine,
                           weight_type=weight_type)
    without = compile_op(K.MatMul, [[D, k], [k, n]], constants={1: w}, engine=engine, weight_type=weight_type)
    for m in ROWS:
        a = randn(rng, (m, k))
        (got,), (product,) = run(with_bias, a), run(without, a)
        want = product + bias
        if dg._backend.kernel_isa() == "generic" and weight_type.startswith("q") and m >= 8:
            # dequantized blocks + sgemm, which adds its K blocks to the bias it finds in C: the
            # sum rounds in another order, a few roundings of |product| + |bias| apart at most
            assert np.all(np.abs(got - want) <= 4 * F32_EPS * (np.abs(product) + np.abs(bias))), (weight_type, m)
        else:
            # the bias added to the finished product (our kernels' block, or ggml's add): the same sum
            np.testing.assert_array_equal(got, want, err_msg=f"{weight_type} {m} rows")


def test_the_bias_is_no_node_of_its_own_where_our_kernels_multiply(rng):
    w, bias = randn(rng, (48, 24)), randn(rng, (24,))
    fused = compile_op(K.MatMul, [[D, 48], [48, 24], [1, 24]], constants={1: w, 2: bias})
    plain = compile_op(K.MatMul, [[D, 48], [48, 24]], constants={1: w})
    a = randn(rng, (33, 48))
    run(fused, a), run(plain, a)
    assert nodes(fused) == nodes(plain)
    # a bias per row (or per element) is ggml's add after the product
    per_row = compile_op(K.MatMul, [[D, 48], [48, 24], [D, 1]], constants={1: w})
    c = randn(rng, (33, 1))
    assert_matmul_close(run(per_row, a, c)[0], *reference(a, w, c))
    assert nodes(per_row) == nodes(plain) + 1


@pytest.mark.parametrize("threads", [1, 2])
def test_nan_and_inf_in_the_bias_reach_only_their_column(threads, rng):
    k, n = 64, 40
    w, bias = randn(rng, (k, n)), randn(rng, (n,))
    bias[3], bias[30] = np.nan, np.inf
    cp = compile_op(K.MatMul, [[D, k], [k, n], [n]], constants={1: w, 2: bias},
                    engine=dg.Engine(dg.Engine.CPU, num_threads=threads))
    for m in (2, 9, 33):
        (out,) = run(cp, randn(rng, (m, k)))
        assert np.isnan(out[:, 3]).all() and np.isposinf(out[:, 30]).all(), m
        assert np.isfinite(np.delete(out, [3, 30], axis=1)).all(), m
