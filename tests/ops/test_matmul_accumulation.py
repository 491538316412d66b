"""f16 and bf16 products accumulate in f32, on every CPU (issue 20).

The K products of a MatMul with f16 or bf16 operands are summed in f32, as
oneDNN's default (strict) fpmath mode and PyTorch do. ggml built with
AVX512-FP16 (-march=native on a Sapphire Rapids or later Xeon) would sum f16
dot products in f16 vectors instead: dyngraph builds ggml-cpu without that
extension (third_party/ggml/ggml.cmake; the rule itself is tested by
tests/test_build_rules.py, since this CPU may not have it).

Measured here against the f32-accumulation bound of tests/ops/test_matmul.py:
|out - exact| <= 4 f32 ulps of sum_k |a_k| |b_k| (+ the rounding of an f16
output), at K up to 16384 and 1 to 64 rows. Summing in f16 breaks it by far:
each f16 addition rounds at 2^-11 relative to the partial sum (against 2^-24
in f32), and an f16 partial sum overflows to inf above 65504 (the last test).
"""

import numpy as np
import pytest

import dyngraph as dg
from oputil import compile_op, run
from ops.test_matmul import F16_U, assert_matmul_close, f16_rounding, reference

K = dg.OpKind
KS = [512, 4096, 16384]
ROWS = [1, 2, 7, 8, 33, 64]  # 1 row: ggml's dot products; 2-7, 8-63, 64: the other product paths
N = 12


@pytest.fixture(scope="module")
def runtime_f16():
    # f16 a [m, k] @ f16 b [k, n], both at run time, m and k dynamic
    k = dg.Dim("k")
    return compile_op(K.MatMul, [[dg.Dim("m"), k], [k, N]], in_dtypes=dg.f16)


@pytest.mark.parametrize("k", KS)
def test_f16_products_sum_in_f32(runtime_f16, k):
    rng = np.random.default_rng(k)
    b = rng.standard_normal((k, N)).astype(np.float16)
    for m in ROWS:
        a = rng.standard_normal((m, k)).astype(np.float16)
        (out,) = run(runtime_f16, a, b)
        assert out.dtype == np.float16
        ref, scale = reference(a, b)
        assert_matmul_close(out, ref, scale, extra=f16_rounding(ref))


@pytest.mark.parametrize("weight_type, weight_u, activation_u", [("f16", F16_U, F16_U), ("bf16", 2.0**-9, 0.0)])
@pytest.mark.parametrize("k", KS)
def test_stored_half_weights_sum_in_f32(weight_type, weight_u, activation_u, k):
    # f32 activations, constant weights stored as f16 / bf16 (f32 output): each product carries the
    # rounding of the weight (and, for f16, of the activation: ggml multiplies in f16), the sum only f32's
    rng = np.random.default_rng(k + 1)
    w = rng.standard_normal((k, N)).astype(np.float32)
    cp = compile_op(K.MatMul, [[dg.Dim("m"), k], [k, N]], constants={1: w}, weight_type=weight_type)
    for m in ROWS:
        a = rng.standard_normal((m, k)).astype(np.float32)
        (out,) = run(cp, a)
        ref, scale = reference(a, w)
        assert_matmul_close(out, ref, scale, extra=(weight_u + activation_u) * scale)


@pytest.mark.parametrize("rows", [1, 3, 16])
@pytest.mark.parametrize("weight_type", ["f16", "bf16"])
def test_a_sum_beyond_the_f16_range_is_finite(weight_type, rows):
    # 512 products of 400: 204800, above f16's largest finite value (65504). Summed in f16 it is inf
    # (AVX512-FP16 ggml gave inf for one row, K = 512); in f32 it is exact.
    k = 512
    w = np.full((k, N), 400.0, np.float32)
    cp = compile_op(K.MatMul, [[dg.Dim("m"), k], [k, N]], constants={1: w}, weight_type=weight_type)
    (out,) = run(cp, np.ones((rows, k), np.float32))
    assert np.isfinite(out).all()
    np.testing.assert_array_equal(out, np.full((rows, N), 204800.0, np.float32))
