// Products of 8 rows and more (prefill) with q8_0, q4_0 or q4_1 weights, in
// integer arithmetic as llama.cpp does: the activation rows are rounded to 8
// bits per 32-value block once (quant_act.h), then tiles of 4 activation rows
// x 2 weight rows are multiplied block by block with 8-bit dot products
// (AVX2 maddubs), each block's int32 sums scaled by the two blocks' scales
// into f32 accumulators. The q4 types' offsets (q4_0: -8 d, q4_1: m) times
// the activation blocks' sums are a small f32 product added with sgemm.
// Against dequantizing the weights and sgemm in f32 (what ran before), the
// weights are read as stored (2-7x fewer bytes) and nothing is converted.
// AVX2 only (isa.h); where the CPU has AVX-512 VNNI, quant_vnni.h computes it, and from 16
// rows on q8_0 / q4_0 weights, where the OS enabled AMX (amx.h), quant_amx.h.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ggml.h"

namespace dg::kernels {

// Whether quant_gemm_nt handles weights of `type` in this process.
bool quant_gemm_supports(ggml_type type);

// C[m, n] = sum_k A[m, k] * W[n, k] for m < M, n < N; W's rows of `type` are
// ldw bytes apart (K a multiple of 32); A's and C's row strides in floats.
void quant_gemm_nt(ggml_type type, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const char* W,
                   size_t ldw, float* C, int64_t ldc);

}  // namespace dg::kernels
