// Products of 1 to 7 activation rows with q8_0, q4_0 or q4_1 weights (decode,
// and the first steps of a short prompt). The activation rows are rounded to
// 8 bits per 32-value block once (as ggml's product does), then each weight
// block is read once and multiplied into every row with 8-bit integer dot
// products (AVX2, in 128-bit or 256-bit vectors by the CPU's units: isa.h,
// half_width_units), the next weight rows prefetched. ggml's product for these
// types computes one output at a time and reaches about half the memory
// bandwidth; this reaches it. AVX2 only (isa.h): elsewhere ggml's product runs;
// where the CPU has AVX-512 VNNI, quant_vnni.h computes it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ggml.h"

namespace dg::kernels {

constexpr int kQuantRowsMax = 7;

// Whether quant_rows_nt handles weights of `type` in this process.
bool quant_rows_supports(ggml_type type);

// C[m, n] = sum_k A[m, k] * W[n, k] for m < rows (1..kQuantRowsMax), n < N;
// W's rows of `type` are ldw bytes apart; A's and C's row strides in floats.
void quant_rows_nt(ggml_type type, int rows, int64_t N, int64_t K, const float* A, int64_t lda, const char* W,
                   size_t ldw, float* C, int64_t ldc);

}  // namespace dg::kernels
