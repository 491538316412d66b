// Products of 8 rows and more (prefill) with q8_0, q4_0 or q4_1 weights in
// integer arithmetic, where the CPU has AVX-512 VNNI (quant_vnni.h: the
// activation rows rounded to 8 bits per 32-value block once, as llama.cpp
// does, then 8-bit dot products with the weights as stored), and from 16 rows
// on q8_0 / q4_0 weights, where the OS enabled AMX (amx.h), on AMX tiles
// (quant_amx.h). Without VNNI these products are f32 ones on weights
// dequantized chunk by chunk (f32_gemm.h's f32_gemm_nt_dequant): on a Zen 1
// (AVX2) our AVX2 integer kernel (maddubs) ran 16-22 GFLOP/s at 8-2048 rows,
// the dequantized f32 product 17-22 at 8 rows and 29-34 from 32 (dg_bench
// matmul, 2026-11-29), so the AVX2 integer kernel is gone.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ggml.h"

namespace dg::kernels {

// Whether quant_gemm_nt handles weights of `type` in this process (VNNI, one of the three types).
bool quant_gemm_supports(ggml_type type);

// C[m, n] = sum_k A[m, k] * W[n, k] for m < M, n < N; W's rows of `type` are
// ldw bytes apart (K a multiple of 32); A's and C's row strides in floats.
void quant_gemm_nt(ggml_type type, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const char* W,
                   size_t ldw, float* C, int64_t ldc);

}  // namespace dg::kernels
