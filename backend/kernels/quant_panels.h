// q8_0, q4_0, q4_1, q5_0, q5_1, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_nl and iq4_xs matmul weights in panels: the layout of
// f32_panels.h for ggml's quantized blocks (quant_blocks.h). Panel p holds
// weight rows [32 p, 32 p + w) (w = 32, fewer in the last panel); for each
// block b of K / 32, in order: the w f16 scales d (q4_1, q5_1: then the w f16
// minimums m), q5: the rows' fifth bits (4 w bytes, in groups of 4 a row that
// a vector of 4 bytes a row takes as its mask: quant_panels_tile.h), then
// chunks of w rows x 4 bytes, row j's 4 bytes side by side with the others':
//   q8_0: 8 chunks, chunk q holding the row's values 4q..4q+3, each + 128
//         (unsigned, the operand vpdpbusd multiplies);
//   q4, q5: 4 chunks, chunk q holding the row's bytes qs[4q..4q+3] as
//         ggml stores them: low nibbles the values 4q..4q+3, high nibbles
//         the values 16+4q..16+4q+3.
// q4_K's and q5_K's super-blocks of 256 values (d, dmin, 12 bytes of scales as
// 12 fields of w bytes, q5_K: fifth bits, 32 chunks): quant_panels_q45k.cpp;
// q6_K's: quant_panels_q6k.cpp; q2_K's and q3_K's: quant_panels_q23k.cpp; iq4_nl
// (q4_0's layout) and iq4_xs (d, 6 bytes of scales, 32 chunks): quant_panels_iq4.cpp.
// A block of a panel takes w times the block's bytes, and the panel starts at
// the byte its first row did: the bytes (q5's fifth bits: the bits) of the
// rows, moved, so a constant packed in place needs no memory of its own.
//
// The product (quant_gemm_panels) rounds each activation row to 8 bits per
// block (quant_act.h's rounding) and multiplies 4 values of a row, broadcast,
// with a chunk's bytes (or nibbles): 4 of each of 16 outputs (AVX-512 VNNI's
// vpdpbusd, 6 rows x 32 outputs a tile, quant_panels_vnni.cpp) or 8 (AVX2's
// vpmaddubsw, 2 rows x 32 outputs, quant_panels_avx2.cpp): no permutes, no
// horizontal sums, one pass through the weights in the order they lie. Against
// the [N, K] rows (quant_vnni.cpp, quant_rows.cpp, and without VNNI the
// weights dequantized into f32 products) on a Zen 4: docs/design/gemm-choices.md,
// "Quantized weights in panels".
#pragma once

#include <cstdint>

#include "ggml.h"

namespace dg::kernels {

constexpr int64_t kQuantPanelWidth = 32;

// Whether the panels take weights of `type` (q8_0, q4_0, q4_1, q5_0, q5_1, q2_K, q3_K, q4_K, q5_K,
// iq4_xs; q6_K and iq4_nl where kernel_isa() has AVX-512 VNNI, or is generic: quant_panels_q6k.cpp).
bool quant_panels_take(ggml_type type);

// P = the N rows of nb blocks of `type` each (W, row after row) in panels.
void pack_quant_panels(ggml_type type, int64_t N, int64_t nb, const uint8_t* W, uint8_t* P);

// W (rows of nb blocks, dense) = the rows of the panels P.
void unpack_quant_panels(ggml_type type, int64_t N, int64_t nb, const uint8_t* P, uint8_t* W);

// row (nb blocks) = row n < N of the panels P: what a Gather of the table reads (gather_panel_rows).
void unpack_quant_panel_row(ggml_type type, int64_t N, int64_t nb, const uint8_t* P, int64_t n, uint8_t* row);

// C[m, j - n0] = sum_k A[m, k] * W[j, k] for m < M, n0 <= j < n1 (A's rows
// rounded to 8 bits per block of 32 first), W's N rows of K values (K a
// multiple of the type's block) of `type` in panels (P); n0 a multiple of kQuantPanelWidth; row strides
// lda, ldc in floats. AVX-512 VNNI or AVX2 as kernel_isa() has them (isa.h),
// portable code else: each sums the same integers exactly, then takes the same
// f32 steps in the same order, so all give the same bits.
void quant_gemm_panels(ggml_type type, int64_t M, int64_t N, int64_t K, int64_t n0, int64_t n1, const float* A,
                       int64_t lda, const uint8_t* P, float* C, int64_t ldc);

}  // namespace dg::kernels
