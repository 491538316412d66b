// The AVX-512 VNNI variants of our products with q8_0, q4_0 or q4_1 weights
// (isa.h: avx512vnni), for 1-7 rows (quant_rows.h) and 8 rows or more
// (quant_gemm.h), with the same contracts. The activation rows are rounded
// to 8 bits per block as the AVX2 variant (1-7 rows) rounds them and laid out four
// blocks to a group (quant_act_vnni.h); each group of four weight blocks is
// read as stored (the GGUF layout, no repacking) and turned into 128 unsigned
// bytes with two byte permutes (VBMI): q8_0 as w + 128, the q4 types as their
// nibbles. One vpdpbusd then multiplies the first halves of four blocks and a
// second one their second halves into 16 int32 lanes, started from the
// activations' correction for the bytes' offset (q8_0 -128, q4_0 -8: so the
// sums are exact); each lane is scaled by its block's two scales into f32
// accumulators (q4_1: plus m times the activations' sums). 8+ rows: tiles of
// 8 activation rows x 2 weight rows, weights in chunks of 64 rows that stay in
// L2 while every tile of rows passes over them. 1-7 rows: all the rows x 2
// weight rows (1 from 5 rows), the weights 8 KiB ahead prefetched.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ggml.h"

namespace dg::kernels::vnni {

// C[m, n] = sum_k A[m, k] * W[n, k]; rows 1..7 (quant_rows_nt's contract).
void quant_rows_nt(ggml_type type, int rows, int64_t N, int64_t K, const float* A, int64_t lda, const char* W,
                   size_t ldw, float* C, int64_t ldc);

// The same for any number of rows (quant_gemm_nt's contract).
void quant_gemm_nt(ggml_type type, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const char* W,
                   size_t ldw, float* C, int64_t ldc);

}  // namespace dg::kernels::vnni
