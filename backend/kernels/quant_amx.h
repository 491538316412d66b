// The AMX int8 variant of our products with q8_0 or q4_0 weights (quant_gemm.h's contract), for
// prefill: 16 activation rows or more, where amx_int8() (amx.h) says the OS enabled the tiles.
// The activation rows are rounded to 8 bits per block as the AVX2 and VNNI variants round them
// (quant_act.h); the weights are unpacked to signed bytes (q4_0: nibble - 8) in the tiles' B
// layout, a chunk of columns at a time. Each 32-value block's int8 x int8 dot products are exact
// int32 sums (TDPBSSD over one block: A tiles of 16 rows x 32 bytes, B tiles of 8 rows x 64
// bytes), then scaled by the two blocks' scales and added into f32 sums as the other variants
// do: only the order of the f32 additions differs. Nothing is rounded to f16 or bf16.
// The algorithm is written once (quant_amx_tiles.h) over the tile operations; the real ones are
// the AMX instructions, and the same algorithm runs on emulated tiles (amx_emulated.h) for the
// tests on any CPU; where the machine has AMX the tests compare the two bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ggml.h"

namespace dg::kernels::amx {

// The fewest activation rows the products take the AMX variant for (one full tile of rows).
constexpr int64_t kMinRows = 16;

// Whether the AMX variant handles weights of `type` (q8_0, q4_0).
bool supports(ggml_type type);

// C[m, n] = sum_k A[m, k] * W[n, k] (quant_gemm_nt's contract) on the AMX tiles: call only
// where amx_int8() (amx.h) is true; compiled out (does nothing) where amx_compiled() is false.
void quant_gemm_nt(ggml_type type, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const char* W,
                   size_t ldw, float* C, int64_t ldc);

// The same algorithm on emulated tiles (plain C++, any CPU): for the tests.
void quant_gemm_nt_emulated(ggml_type type, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                            const char* W, size_t ldw, float* C, int64_t ldc);

}  // namespace dg::kernels::amx
