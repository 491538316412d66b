// GELU in its tanh form, 0.5 x (1 + tanh(u)) with u = sqrt(2/pi) (x + 0.044715 x^3)
// (GPT-2's "gelu_new", PyTorch's approximate="tanh"), over contiguous f32 rows, written
// so the compiler vectorizes it: no libm call, no branch.
#pragma once

#include <cstdint>

namespace dg::kernels {

// out[i] = GELU_tanh(in[i]) for i < n, computed as x sigmoid(2u) (no cancellation of 1 + tanh(u)
// for x < 0: the relative error holds in the negative tail) with fast_exp.h's exp. NaN stays NaN;
// +inf gives +inf, -inf 0 (the limit), -0 gives -0.
void gelu_tanh_row(const float* in, float* out, int64_t n);

}  // namespace dg::kernels
