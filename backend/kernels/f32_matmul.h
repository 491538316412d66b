// Matrix products with f32 activations as a ggml custom op. ggml's own
// f32 product computes every output element as a separate dot product:
// several times slower than a blocked product once more than one row
// multiplies the same weights. Which product runs, by weight type and rows
// (measured with tests/benchmarks/cpp/matmul_bench.cpp):
// - f32 in panels (the constant weights of a compiled partition, where
//   f32_panels_wanted(): f32_panels.h): f32_gemm_panels at every row count;
//   f16 and bf16 constants the same (half_gemm_panels: ggml's product, with
//   llamafile's sgemm, took 1.2-2.3x our time from 8 rows, f16, and 1.25-3x,
//   bf16 with AVX-512 BF16 on both sides; 0.92-1.6x at 1 row).
//   The f32 lines below are for weights kept as [N, K] rows (a weight ops
//   other than products and Gathers read too, products of two activations,
//   DYNGRAPH_F32_PANELS=0).
// - f32: 1 row f32_matvec.h (a dot product per weight row, the rows in order:
//   one stream from memory) where the CPU has AVX2, ggml's product without
//   (a Zen 5, AVX-512: 0.79-0.99x ggml's time; a Zen 1, AVX2: 0.85-0.93x,
//   11.5 against 9.7 GB/s of weights); 2-7 rows our register-blocked
//   kernel (small_gemm.h); from 8 rows our tiled kernel (f32_gemm.h), which
//   reads the weights where they lie where sgemm copies them: with AVX-512 up
//   to kF32GemmMaxRows - 1 (Ice Lake Xeon, 32 rows, several runs: 45-72
//   against 39-55 GFLOP/s for sgemm and 41-57 for ggml; level at 64 rows,
//   sgemm ahead from 128), with AVX2 up to kF32GemmMaxRowsAvx2 - 1 (Zen 1,
//   SmolLM2's shapes with the weights from memory, 16-64 rows: 27-35
//   against OpenBLAS's 12-26 and llamafile's 24-33; the MLP of the report at
//   64 / 128 / 256 rows 0.81 / 0.94 / 1.00 of sgemm's time); from there on
//   OpenBLAS's sgemm (the scipy-openblas32 wheel).
// - q8_0, q4_0, q4_1: 1-7 rows our integer kernels, activations rounded to 8
//   bits per block (quant_rows.h), where the CPU has AVX2; from 8 rows, where
//   it has AVX-512 VNNI, the VNNI integer kernels (quant_gemm.h), else chunks
//   of weight rows dequantized into L2 and our tiled f32 kernel on them
//   (f32_gemm.h's f32_gemm_nt_dequant: on a Zen 1 1.2-1.35x ggml's repacked
//   q4_0 at 32-128 rows, 1.5x our AVX2 integer kernel, which it replaced).
//   Where the CPU has AVX2 the weights are not repacked by ggml
//   (prefer_ggml_repack). Without AVX2: ggml's product below kDequantMinRows
//   rows (q4_0 in ggml's repacked layout), blocks of weight rows dequantized
//   into cache and sgemm from there (dequantize.h).
// - f16, bf16: ggml's product where ggml has llamafile's sgemm (it multiplies
//   in the weights' own type, AVX-512 BF16 where the CPU has it; the
//   activations are rounded to that type); else as the other quantized types.
// - other quantized types: ggml's product below kDequantMinRows rows,
//   from there dequantized in chunks and f32_gemm where the CPU has AVX2
//   (dequantized + sgemm without).
#pragma once

#include <cstdint>

#include "activation.h"
#include "isa.h"
#include "ggml.h"

namespace dg::kernels {

constexpr int64_t kF32GemmMaxRows = 64;       // with AVX-512
constexpr int64_t kF32GemmMaxRowsAvx2 = 256;  // with AVX2 and no AVX-512

// From this many rows on, f32 products go to f32_mul_mat without AVX2 (with
// it from one row on: f32_matvec.h); one row is a matrix-vector product, where
// ggml's dot products do as well as our generic code.
constexpr int64_t kF32KernelMinRows = 2;

// From this many rows on, products with quantized weights are dequantized
// blocks and sgemm (below it: quant_rows.h where it has the type, else ggml).
constexpr int64_t kDequantMinRows = 8;
// That threshold for a type quant_rows.h does not take: later for the types
// whose ggml product stays ahead of the dequantized one (dg_bench matmul on a
// Zen 4, ggml's time / ours: q5_0 0.72-0.82 at 8 rows, 0.90-0.96 at 16, level
// at 20-24, 1.05 at 32 -> 20; q6_K 0.85 at 8, level at 12, 1.07 at 16 -> 12;
// 1536x576, ggml's q2_K and q3_K products (its AVX2 code; ours dequantize with ggml's scalar
// to_float): q3_K 0.27 at 8 rows, 0.75 at 32, 0.96-1.09 at 64, 1.21-1.33 at
// 128 -> 64; q2_K 0.26 at 8, 0.63 at 32, 0.74-0.85 at 64, 0.89-1.07 at 128,
// 1.02-1.13 at 256 -> 128). Where the CPU has AVX2, weights of these types
// that products (and Gathers) read are in the quantized panels and never come here.
// The types only ggml multiplies (1536x576, 2026-12-01, ggml's time / ours):
// iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s (dequantize_iq.h: 15x faster than
// ggml's conversion) 0.70-0.92 at 2 rows, 1.20-1.59 at 4, 1.76-2.48 at 8,
// 2.7-4.2 at 32 -> 4 (with ggml's conversion, the generic ISA's, 0.84-0.93
// at 64 rows, 1.11-1.22 at 96 -> 80 (iq2), 0.79-0.88 at 32, 1.08-1.22 at 48
// -> 40 (iq3)); iq1_s, iq1_m (dequantize_iq.h too) 0.67-0.99 at 2 rows,
// 1.11-1.54 at 4, 1.64-2.08 at 8 -> 4 (ggml's conversion: iq1_s 0.80 at 8,
// 1.04 at 12 -> 12; iq1_m 0.88 at 16, 1.17 at 24 -> 20); tq1_0 0.95 at 12,
// 1.06 at 16 -> 16; mxfp4 (where ggml does not repack it: 576 x 576 to
// 1536 x 576) 0.93-0.98 at 32, 1.14-1.27 at 48 -> 40; tq2_0 0.82-0.85 at
// 128-512: never. (ggml's to_float of the iq and tq types is scalar code.)

int64_t dequant_min_rows(ggml_type type);

// Products of more values than this (rows x columns, all batches) leave an activation that reads them
// a node of its own: a thread's block of the result is then far out of cache when the activation would
// run on it, so applying it in the product's kernel saves nothing, and on two threads it was 1.02-1.08x
// the time of the two nodes (MiniLM at batch 32 x 128 tokens, its FFN's 4096 x 1536; 2026-11-28).
// Not for weights in f32, f16 or bf16 panels: their product applies it tile by tile (f32_panels.h).
constexpr int64_t kActivationFuseMaxValues = int64_t(1) << 21;

// Whether constant f32 matmul weights read only by MatMul are laid out in
// panels (f32_panels.h, marked with mark_panels) when a partition is compiled
// for the host CPU: where kernel_isa() has AVX2 (x86-64; on other CPUs the
// portable product over panels is not measured against OpenBLAS), or as
// DYNGRAPH_F32_PANELS=1 / 0 says (read once; the tests run both forms).
bool f32_panels_wanted();

// The same for q8_0, q4_0 and q4_1 weights (quant_panels.h): where kernel_isa()
// has AVX2 (its product over panels is AVX2's or AVX-512 VNNI's) and this
// process does not run the AMX products (whose prefill reads the rows), or as
// DYNGRAPH_QUANT_PANELS=1 / 0 says (=1 anywhere: a portable product reads them).
bool quant_panels_wanted();
// Its default: the kernel ISA has AVX2 and this process does not run the AMX products.
bool quant_panels_rule(Isa isa, bool amx);

// Mark x's data as f32_panels.h's (F32) or quant_panels.h's (q8_0, q4_0, q4_1) panels of its [K, N] (set after it is packed:
// x->extra, which ggml reads only in its extra buffer types), and ask.
// f32_mul_mat is the one reader of such weights: computes(x, y) holds for any
// f32 activations, and mul_mat refuses (gg::Violation) a product that would
// hand them to ggml.
void mark_panels(ggml_tensor* x);
bool in_panels(const ggml_tensor* x);

// Whether f32_mul_mat computes ggml_mul_mat(x, y): y F32, x F32 or a type
// dequantize.h converts (and not repacked by ggml), elements
// contiguous in each row, x's batch dims dividing y's (ggml's broadcast), and
// y with at least `min_rows` rows per batch.
bool f32_matmul_applies(const ggml_tensor* x, const ggml_tensor* y, int64_t min_rows);

// The same result as ggml_mul_mat(x, y) (x [K, N, b2, b3], y [K, M, B2, B3] ->
// [N, M, B2, B3]), ggml's threads sharing the output columns (or the batches,
// when there are enough), each running single-threaded code. With a bias (N
// f32 values, bias_fuses) it is added to every row in the same pass: sgemm
// adds its product to the bias it finds in C (beta 1) where it would have
// written zeros first, the other kernels add it to their block while it is in
// cache (MLP 256 -> 1024 -> 256 at 256 rows, 1 thread: see kernels.md).
//
// With an activation (`act`), each thread applies it to its block of the
// result (after the bias) while the block is in cache, with the kernel of the
// op it stands for (kernels.h's unary), so the values are those of the
// product followed by that op: no pass and no barrier of its own (MLP 256 ->
// 1024 -> GELU -> 256 at 256 rows, two threads: see kernels.md).
ggml_tensor* f32_mul_mat(ggml_context* ctx, ggml_tensor* x, ggml_tensor* y, ggml_tensor* bias = nullptr,
                         Activation act = Activation::None);

// Whether mul_mat(x, y) is f32_mul_mat(x, y) (our kernels), not ggml's product.
bool computes(const ggml_tensor* x, const ggml_tensor* y);

// Whether f32_mul_mat(x, y, bias) is mul_mat(x, y) + bias: a contiguous f32
// bias of x->ne[1] values, and a product mul_mat gives to f32_mul_mat.
bool bias_fuses(const ggml_tensor* x, const ggml_tensor* y, const ggml_tensor* bias);

// Whether quantized matmul weights of `type` go to ggml's CPU_REPACK layout
// (where ggml's buffer type takes them, and the partition asks for it): not
// for the types our kernels compute where the CPU has AVX2 (q8_0, q4_0, q4_1; q5_0, q5_1).
// Our kernels against ggml's repacked q4_0: on an Ice Lake Xeon (VNNI, dg_bench
// matmul, several runs) 32 rows 82-157 against 72-100 GFLOP/s, 1 row 31-39
// against 20-24 (SmolLM2 Q4_0 prefill of 32 tokens 1.14-1.29x, decode
// 1.3-1.5x); on a Zen 1 (AVX2) 32 rows 30-31 against 24-25 (dequantized f32),
// 4 rows 21-23 against 19-20, 1 row level (16-17).
bool prefer_ggml_repack(ggml_type type);

// Whether f16 / bf16 weights go to ggml's product at every row count (ggml has llamafile's sgemm).
bool half_weights_to_ggml(ggml_type type);

// Every kernel that calls OpenBLAS runs in one of ggml's threads: OpenBLAS must
// not start its own. Call this before building a node whose kernel calls it.
void sgemm_in_ggml_threads();

// ggml_mul_mat(x, y) as dyngraph computes it (the choice above): f32_mul_mat
// where it applies (from kF32KernelMinRows rows on for f32 weights, from one
// row for the types quant_rows.h has, kDequantMinRows for others), else
// ggml's own product (with a bias where bias_fuses: f32_mul_mat(x, y, bias)).
ggml_tensor* mul_mat(ggml_context* ctx, ggml_tensor* x, ggml_tensor* y);

}  // namespace dg::kernels
