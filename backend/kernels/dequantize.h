// Weight rows in ggml's storage types back to f32, for products that
// multiply many activation rows with a quantized weight (f32_matmul.h): a
// block of weight rows is dequantized into cache, then sgemm runs on it.
// q8_0, q4_0, q4_1, q5_0, q5_1, q6_K and the i-quants of 1 to 3 bits
// (dequantize_iq.h) have AVX2 versions (chosen at run time, isa.h; the same
// values as ggml's); every other type ggml can convert goes through ggml's
// own row conversion.
#pragma once

#include <cstdint>

#include "ggml.h"

namespace dg::kernels {

// Whether dequantize_row handles `type` (ggml has a conversion to f32 for it).
bool dequantizable(ggml_type type);

// Whether dequantize_row converts `type` with our vector code at this kernel_isa() (else ggml's).
bool dequantize_vectorized(ggml_type type);

// dst[0..n) = the n values of one row stored as `type` at src (n a whole
// number of the type's blocks).
void dequantize_row(ggml_type type, const void* src, float* dst, int64_t n);

}  // namespace dg::kernels
