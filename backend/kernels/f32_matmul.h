// Matrix products with f32 activations as a ggml custom op. ggml's own computes every
// output element as a separate dot product: several times slower than a
// blocked product once more than one row multiplies the same weights. From
// kSgemmRows rows of activations on, OpenBLAS's sgemm (the scipy-openblas32
// wheel); below it, our register-blocked kernel (small_gemm.h), since sgemm
// packs the whole weight matrix on every call, which a few rows do not repay.
// Quantized (or f16) weights, from kDequantMinRows rows on: blocks of weight
// rows dequantized into cache, then sgemm (dequantize.h); ggml's own product
// quantizes the activations and runs a dot product per output element, which
// is slower at prefill. 1-7 rows with q8_0/q4_0/q4_1 weights: 8-bit dot
// products of our own (quant_rows.h). Other types below kDequantMinRows rows,
// and weights ggml repacked for its own kernels, stay with ggml.
#pragma once

#include "ggml.h"

namespace dg::kernels {

constexpr int64_t kSgemmRows = 8;

// From this many rows on, f32 products go to f32_mul_mat; one row is a
// matrix-vector product, where ggml's dot products do as well.
constexpr int64_t kF32KernelMinRows = 2;

// From this many rows on, products with quantized weights are dequantized
// blocks and sgemm (below it: quant_rows.h where it has the type, else ggml).
constexpr int64_t kDequantMinRows = 8;

// Whether f32_mul_mat computes ggml_mul_mat(x, y): y F32, x F32 or a type
// dequantize.h converts (and not repacked by ggml), elements
// contiguous in each row, x's batch dims dividing y's (ggml's broadcast), and
// y with at least `min_rows` rows per batch.
bool f32_matmul_applies(const ggml_tensor* x, const ggml_tensor* y, int64_t min_rows);

// The same result as ggml_mul_mat(x, y) (x [K, N, b2, b3], y [K, M, B2, B3] ->
// [N, M, B2, B3]), ggml's threads sharing the output columns (or the batches,
// when there are enough), each running single-threaded code.
ggml_tensor* f32_mul_mat(ggml_context* ctx, ggml_tensor* x, ggml_tensor* y);

// ggml_mul_mat(x, y) as dyngraph computes it: f32_mul_mat where it applies
// (from kF32KernelMinRows rows on for f32 weights, from one row for the types
// quant_rows.h has, kDequantMinRows for others), else ggml's own product.
ggml_tensor* mul_mat(ggml_context* ctx, ggml_tensor* x, ggml_tensor* y);

}  // namespace dg::kernels
