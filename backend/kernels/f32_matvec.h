// The f32 product of one activation row with a weight matrix, AVX-512F (isa.h:
// avx512 and up) or AVX2 + FMA (f32_matvec_nt_avx2, the avx2 level): a dot
// product per weight row, the rows read one after
// another. A decode step streams every weight from memory once; one
// sequential stream is what the hardware prefetches best. On a Zen 5 (one
// thread, weights from memory, shapes of SmolLM2 and K = N = 4096) this ran
// at 0.71-0.78x the time of small_gemm_nt's four rows at a time with
// prefetches, and 0.79-0.99x that of ggml's dot products, which read the same
// way (docs/performance.md). The AVX2 variant on a Zen 1 (dg_bench matmul 1,
// SmolLM2's f32 shapes, three runs): 0.85-0.93x ggml's time, 11.5 against
// 9.7 GB/s of weights on 576x1536. Its sums are in another order than
// small_gemm_nt's, so the kernels that must give the same bits for any
// grouping of rows (attention's, split over threads by heads) keep that one.
#pragma once

#include <cstdint>

namespace dg::kernels {

// C[n] = sum_k a[k] * W[n, k] for n < N; W's rows ldw floats apart.
// Call only where kernel_isa() >= Isa::avx512.
void f32_matvec_nt(int64_t N, int64_t K, const float* a, const float* W, int64_t ldw, float* C);
// The same with AVX2; call only where kernel_isa() >= Isa::avx2.
void f32_matvec_nt_avx2(int64_t N, int64_t K, const float* a, const float* W, int64_t ldw, float* C);

}  // namespace dg::kernels
