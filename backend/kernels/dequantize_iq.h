// The i-quants of 1 to 3 bits (iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s,
// iq1_s, iq1_m: llama.cpp's IQ1_* to IQ3_* files) back to f32 with AVX2, for
// the products that multiply them dequantized from dequant_min_rows
// (f32_matmul.h). Each 8 values of a block are 8 bytes of a grid (an index
// of 8 to 11 bits), times the group's scale, with 8 sign bits (iq1: plus a
// delta); ggml converts them one value at a time (about 3.4 ns a value on a
// Zen 4 for iq2 and iq3), these 8 lanes at a time, with ggml's operations
// in ggml's order: the same bits.
//
// The grids are not ggml's public API: they are read once out of ggml's own
// conversion of blocks that pick each grid entry with a scale of one.
#pragma once

#include <cstdint>

#include "ggml.h"

namespace dg::kernels {

using DequantRowFn = void (*)(const void* src, float* dst, int64_t n);

// The AVX2 conversion of `type` (one of the seven), else null. The caller checks that the CPU has AVX2.
DequantRowFn iq_dequant_row_avx2(ggml_type type);

}  // namespace dg::kernels
