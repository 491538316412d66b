// f32 matrix products through OpenBLAS's sgemm (the scipy-openblas32 wheel),
// as a ggml custom op: ggml's own f32 x f32 product is a dot product per
// output element, several times slower than a blocked GEMM once more than a
// couple of rows multiply the same weights.
#pragma once

#include "ggml.h"

namespace dg::kernels {

// Whether sgemm_mul_mat computes ggml_mul_mat(x, y): both F32, elements
// contiguous in each row, x's batch dims dividing y's (ggml's broadcast), and
// y with at least `min_rows` rows per batch.
bool sgemm_applies(const ggml_tensor* x, const ggml_tensor* y, int64_t min_rows);

// The same result as ggml_mul_mat(x, y) (x [K, N, b2, b3], y [K, M, B2, B3] ->
// [N, M, B2, B3]), each of ggml's threads running single-threaded sgemm on its
// share of the output columns (or of the batches, when there are enough).
ggml_tensor* sgemm_mul_mat(ggml_context* ctx, ggml_tensor* x, ggml_tensor* y);

}  // namespace dg::kernels
