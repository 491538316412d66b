// q8_0 matmul weights in panels: the layout of f32_panels.h for ggml's q8_0
// blocks (quant_blocks.h). Panel p holds weight rows [32 p, 32 p + w) (w = 32,
// fewer in the last panel); for each block b of K / 32, in order: the w f16
// scales d, then 8 groups of 4 values k = 32 b + 4 q .. + 3 (q < 8), each
// group w rows x 4 bytes, the bytes being the values + 128 (unsigned, what
// vpdpbusd multiplies). A block of a panel is 34 w bytes, the panel starts at
// byte 34 * 32 p * K / 32: the bytes of the rows, moved, so a constant packed in
// place needs no memory of its own.
//
// The product (q8_gemm_panels) rounds each activation row to 8 bits per block
// (quant_act.h's rounding) and, with AVX-512 VNNI, multiplies 4 values of a
// row, broadcast, with a group's 64 bytes into 16 outputs' int32 sums: no
// permutes, no horizontal sums, and one pass through the weights in the order
// they lie. Against the [N, K] rows (quant_vnni.cpp) on a Zen 4, one row,
// weights from memory: 576x576 15-16 us against 22-24, 576x1536 37-45
// against 59-69, 1536x576 39-46 against 42-53 (docs/design/gemm-choices.md,
// "q8_0 weights in panels").
#pragma once

#include <cstdint>

namespace dg::kernels {

constexpr int64_t kQ8PanelWidth = 32;

// P = the N rows of nb q8_0 blocks each (W, row after row: 34 * nb bytes a row) in panels.
void pack_q8_panels(int64_t N, int64_t nb, const uint8_t* W, uint8_t* P);

// W (rows of nb blocks, dense) = the rows of the panels P.
void unpack_q8_panels(int64_t N, int64_t nb, const uint8_t* P, uint8_t* W);

// C[m, j - n0] = sum_k A[m, k] * W[j, k] for m < M, n0 <= j < n1 (A's rows
// rounded to 8 bits per block first), W's N rows of K values (K a multiple of
// 32) in panels (P); n0 a multiple of kQ8PanelWidth; row strides lda, ldc in
// floats. AVX-512 VNNI where kernel_isa() has it (isa.h), portable code else
// (the same sums in the same order: the same bits).
void q8_gemm_panels(int64_t M, int64_t N, int64_t K, int64_t n0, int64_t n1, const float* A, int64_t lda,
                    const uint8_t* P, float* C, int64_t ldc);

}  // namespace dg::kernels
