// GELU in its exact (erf) form, 0.5 x erfc(-x / sqrt(2)), over contiguous f32
// rows, written so the compiler vectorizes it: no libm calls, no branches.
// ggml's own gelu_erf calls erff per element (about 16x slower here than
// PyTorch's vectorized one).
#pragma once

#include <cstdint>

namespace dg::kernels {

// out[i] = GELU(in[i]) for i < n; relative error about 1e-6 (erfc through
// the Chebyshev fit of Press et al., Numerical Recipes 6.2, fractional error
// < 1.2e-7, with an exp of our own), growing to 2e-5 in the negative tail
// (x < -4) with the f32 rounding of x^2 / 2 in exp(-x^2 / 2). NaN stays NaN;
// +inf gives +inf, -inf 0 (the limit; PyTorch's erf form gives NaN there), -0 gives +0.
void gelu_erf_row(const float* in, float* out, int64_t n);

}  // namespace dg::kernels
