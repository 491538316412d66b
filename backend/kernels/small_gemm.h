// C = A . B^T for a few rows of A: the f32 product of 1 to 7 rows of
// activations with a weight matrix. Register-blocked: each weight row is read
// once and multiplied into every activation row while it is in registers, and
// the weight rows a few ahead are prefetched (the weights of a model stream
// from memory once per call; without the prefetch this ran slower than
// ggml's dot products inside a model, though faster on one cached matrix).
#pragma once

#include <cstdint>

namespace dg::kernels {

// C[m, n] = sum_k A[m, k] * B[n, k] for m < rows (1..7) and n < N; row strides
// lda, ldb, ldc in floats.
void small_gemm_nt(int rows, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
                   int64_t ldc);

}  // namespace dg::kernels
