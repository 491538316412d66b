// The operands of the AMX int8 products (quant_amx.h) as their tiles read them, and the scaling of
// a tile of int32 block sums into f32 sums: plain C++ shared by the real and the emulated tiles.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ggml.h"

namespace dg::kernels::amx {

// M activation rows (A, lda apart) rounded to 8 bits per 32-value block (quant_act.h's rounding:
// the AVX2 code where kernel_isa() has AVX2, else the same in plain C++) into q: rows K bytes
// apart, and d: the blocks' scales, rows nb = K / 32 apart. Rows M..rows-1 are zeros (scale 0).
void round_activations(int64_t M, int64_t rows, int64_t K, const float* A, int64_t lda, int8_t* q, float* d);

// The plain C++ rounding of one block of 32 values: the scale (NaN for a block holding a NaN or
// an infinity, its values then 0) and the 32 values in q.
float round_block(const float* x, int8_t* q);

// n weight rows of `type` (q8_0 or q4_0; W, ldw bytes apart, nb blocks each) as (n + 15) / 16
// tiles of 16 columns: q holds, for tile t and block b, 8 rows of 64 bytes (the B layout: row k4,
// bytes 4 j..4 j + 3 = values 4 k4..4 k4 + 3 of column j, q4_0 as nibble - 8) at (t * nb + b) *
// 512; d the 16 columns' scales at (t * nb + b) * 16. Columns past n are zeros (scale 0).
void pack_weights(ggml_type type, int64_t n, int64_t nb, const char* W, size_t ldw, int8_t* q, float* d);

// acc[r][j] (rows ldacc apart) += sums[r][j] * (dw[j] * da[r * nb]) for a tile of 16 x 16 block sums.
void scale_add(const int32_t* sums, const float* da, int64_t nb, const float* dw, float* acc, int ldacc);

}  // namespace dg::kernels::amx
