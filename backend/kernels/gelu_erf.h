// GELU in its exact (erf) form, 0.5 x erfc(-x / sqrt(2)), over contiguous f32
// rows, written so the compiler vectorizes it: no libm calls, no branches.
// ggml's own gelu_erf calls erff per element (about 16x slower here than
// PyTorch's vectorized one).
#pragma once

#include <cstdint>

namespace dg::kernels {

// out[i] = GELU(in[i]) for i < n; relative error below 1e-6 down to x = -4
// (erfc through a polynomial fitted by tools/fit_erfc.py, within 6.1e-8, and
// an exp of our own; 1.2 ulps of x at most near 0), growing to 8e-6 in the
// negative tail (x < -4) with the f32 rounding of x^2 / 2 in exp(-x^2 / 2);
// 0 where the result is below the normal floats (x < -13.1). NaN stays NaN;
// +inf gives +inf, -inf 0 (the limit; PyTorch's erf form gives NaN there), -0 gives +0.
void gelu_erf_row(const float* in, float* out, int64_t n);

}  // namespace dg::kernels
