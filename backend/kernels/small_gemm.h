// C = A . B^T for a few rows of A: the f32 product of 1 to 7 rows of
// activations with a weight matrix. Register-blocked: each weight row is read
// once and multiplied into every activation row while it is in registers; the
// activation rows are first packed into one stream (rows 1 or 4 KB apart
// collide in the L1 cache), and weight rows some blocks ahead are prefetched
// into L2 (the weights of a model stream from memory once per call). Compiled
// for AVX-512VL (32 registers: wider blocks), AVX2 + FMA and the baseline,
// chosen at run time (isa.h).
#pragma once

#include <cstdint>

namespace dg::kernels {

constexpr int kSmallGemmMaxRows = 7;

// C[m, n] = sum_k A[m, k] * B[n, k] for m < rows (1..kSmallGemmMaxRows) and
// n < N; row strides lda, ldb, ldc in floats.
void small_gemm_nt(int rows, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
                   int64_t ldc);

}  // namespace dg::kernels
