// f32 products of 8 rows and more (to the thresholds in f32_matmul.h: 63 rows
// with AVX-512, 255 with AVX2) with f32 weights, AVX-512F or AVX2 + FMA
// (isa.h: avx2 and up): C = A . W^T with the weights read where they lie (no
// packing; the activation rows, small, are packed once), each output a dot
// product along K in the vectors' lanes: tiles of 8 activation rows x 3
// weight rows with AVX-512 (32 registers; 4 x 6 where 512-bit operations issue
// as two halves, isa.h's split_512_units), 4 x 3 with AVX2 (16), every weight
// vector multiplied into the tile's rows while it is in a register, the sums
// reduced together at the end of K. K in blocks (a tile's activations stay
// in L1), weights in chunks of 256 KiB that stay in L2 while every tile of
// rows passes over them, the next chunk prefetched meanwhile. OpenBLAS's
// sgemm (what runs past those thresholds) copies the weights into its packed layout
// on every call: at the few tens of rows of a prompt, that copy from memory
// is about half its time (perf, SmolLM2 f32 prefill on an AVX-512 Xeon); on
// a Zen 1 (AVX2) SmolLM2's f32 prefill went from 97 to 137 tokens/s with
// this kernel in place of sgemm (llama.cpp: 130).
#pragma once

#include <cstddef>
#include <cstdint>

#include "ggml.h"

namespace dg::kernels {

// C[m, n] = sum_k A[m, k] * W[n, k] for m < M, n < N; row strides in floats.
// Call only where kernel_isa() >= Isa::avx2.
void f32_gemm_nt(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* W, int64_t ldw, float* C,
                 int64_t ldc);

// The same product with W's N rows stored as `type` (dequantize.h; K a whole
// number of its blocks), ldw bytes apart: each chunk of weight rows is
// dequantized into a per-thread buffer (256 KiB, in L2) and multiplied from
// there, the next chunk's stored bytes prefetched meanwhile, the activation
// rows packed once for all chunks. Against the AVX2 integer kernel it replaced
// (activations rounded to 8 bits, maddubs) and ggml's repacked q4_0, on a
// Zen 1 (dg_bench matmul, SmolLM2's shapes, weights from memory, 1 thread):
// 8 rows 17-22 GFLOP/s against 17-20 and 17-20; 32 rows 29-31 against 20-22
// and 24-25; 128 rows 31-33 against 20-22 and 25; and the products are those
// of f32 (the activations are not rounded). Call only where kernel_isa() >= Isa::avx2.
void f32_gemm_nt_dequant(ggml_type type, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const char* W,
                         size_t ldw, float* C, int64_t ldc);

}  // namespace dg::kernels
