// f32 matmul weights in panels: a layout of the weight matrix (N rows of K
// floats, ggml's [K, N]) that the product reads as one stream and multiplies
// without horizontal sums. Panel p holds weight rows [kPanelWidth * p,
// kPanelWidth * p + w) (w = kPanelWidth, fewer in the last panel) at float
// offset kPanelWidth * p * K, in sub-panels of s = panel_split() of its
// columns: sub-panel q holds the panel's columns [q s, min(w, (q + 1) s))
// transposed, min(s, w - q s) floats per k, K times, at float offset q s K in
// the panel (s = kPanelWidth: the panel transposed as a whole). The panels
// take exactly the floats of the [N, K] form (no padding), so a constant
// packed in place needs no memory of its own.
//
// The product over it (f32_gemm_panels) keeps a tile of rows x 48 outputs in
// registers (AVX2: rows x 24, a sub-panel's), loads the tile's floats of each
// k once and multiplies them
// by each row's activation, broadcast from A where it lies: no packing of
// either side per call, and the sums are the outputs. On a Zen 4 (dg_bench
// matmul: one thread, SmolLM2's shapes, weights from memory, GFLOP/s against
// the kernels over [N, K] rows in the same run): 8 rows 73-89 against 35-45
// (f32_gemm.h), 32 rows 88-104 against 75-90, 64-256 rows 93-111 against
// 66-96 (OpenBLAS), one row level (bound by memory); the table and the
// end-to-end effect are in docs/design/gemm-choices.md, "Weights in panels".
#pragma once

#include <cstdint>

#include "activation.h"
#include "ggml.h"

namespace dg::kernels {

constexpr int64_t kPanelWidth = 48;

// The width of a panel's sub-panels in this process: 24 where its kernels are AVX2's (a tile of 4 rows
// x 24 columns then reads its weights as one stream rather than half of each 48-float row: 1.1-1.2x the
// GFLOP/s from 3 rows up on a Zen 3, docs/design/gemm-choices.md, "Sub-panels"), else kPanelWidth
// (AVX-512's tile is a whole panel wide). Chosen at the first call, from kernel_isa() then, and kept:
// weights packed once are read the same way by every later product (AVX-512's tiles leave sub-panels
// of 24 to AVX2's, which take either). DYNGRAPH_PANEL_SPLIT=24 or 48, read then, overrides it.
int64_t panel_split();

// Where element (k, j) of a panel w columns wide lies in it, with sub-panels s wide.
inline int64_t panel_at(int64_t K, int64_t w, int64_t s, int64_t k, int64_t j) {
    const int64_t q0 = j / s * s;
    return q0 * K + k * (w - q0 < s ? w - q0 : s) + (j - q0);
}

// P (N * K floats) = W (N rows of K floats, ldw apart) in panels.
void pack_panels(int64_t N, int64_t K, const float* W, int64_t ldw, float* P);

// W (N rows of K floats, dense) = the [N, K] form of the panels P.
void unpack_panels(int64_t N, int64_t K, const float* P, float* W);

// What the product does to its outputs after the sums: adds bias[j - n0] to column j (bias null: none),
// then applies act; tile by tile while the tile is in cache, with the bits of adding and activating
// after the whole product (which took a pass over C, from memory once C is more than L2, and left a
// GELU of more than 2^21 values a node of its own: f32_matmul.h).
struct PanelEpilogue {
    const float* bias = nullptr;
    Activation act = Activation::None;
};

// C[m, j - n0] = sum_k A[m, k] * W[j, k] (then `epi`) for m < M, n0 <= j < n1, W's N rows
// in panels (P); n0 a multiple of kPanelWidth; row strides lda, ldc in floats.
// AVX-512 or AVX2 where kernel_isa() has them (isa.h), portable code else.
void f32_gemm_panels(int64_t M, int64_t N, int64_t K, int64_t n0, int64_t n1, const float* A, int64_t lda,
                     const float* P, float* C, int64_t ldc, PanelEpilogue epi = {});

// The same for f16 and bf16 weights (ggml's F16, BF16: a GGUF F16 or BF16 file's, weight_type="f16"):
// panels of the same shape with 2-byte elements, each converted to f32 as loaded (exact), then the f32
// product's very steps: the bits of f32_gemm_panels on the weights converted to f32. The activations
// stay f32 (ggml's product with llamafile's sgemm rounds them to the weights' type). type: F16 or BF16.
void pack_half_panels(int64_t N, int64_t K, const uint16_t* W, uint16_t* P);
void unpack_half_panels(int64_t N, int64_t K, const uint16_t* P, uint16_t* W);
// Where the CPU has AVX-512 BF16 (and kernel_isa() AVX-512) bf16 weights of an even K lie in pairs of k
// instead (element 2 (t w + j) + e of a panel w wide is W[j, 2 t + e]), and half_gemm_panels multiplies
// them with vdpbf16ps by the activations rounded to bf16 (nearest, ties to even), as ggml's bf16
// product does: two products a lane summed in f32.
bool bf16_pair_panels(int64_t K);
void pack_bf16_pair_panels(int64_t N, int64_t K, const uint16_t* W, uint16_t* P);
void unpack_bf16_pair_panels(int64_t N, int64_t K, const uint16_t* P, uint16_t* W);
// Row n < N of weights in panels as K floats (F32: pack_panels's; F16, BF16: pack_half_panels's, or
// pack_bf16_pair_panels's where bf16_pair_panels(K)), converted exactly: what a Gather of a tied
// table reads (panel_rows.h).
void panel_row_to_f32(ggml_type type, int64_t N, int64_t K, const void* P, int64_t n, float* row);
void half_gemm_panels(ggml_type type, int64_t M, int64_t N, int64_t K, int64_t n0, int64_t n1, const float* A,
                      int64_t lda, const uint16_t* P, float* C, int64_t ldc, PanelEpilogue epi = {});

}  // namespace dg::kernels
