// An activation applied by the kernel that computes its input (a MatMul's or a
// convolution's), on each thread's block of the result while it is in cache, in
// place of a pass of the op's own (LowerCtx::absorb). Each is the row function of
// the op it stands for (kernels.h's relu, gelu_erf.h), so the values are those of
// the two ops apart.
#pragma once

#include <cstdint>

namespace dg::kernels {

enum class Activation : uint8_t { None, Relu, GeluErf };

// C = act(C) on a block of M rows of n values, rows ldc floats apart.
void activate(Activation act, int64_t M, int64_t n, float* C, int64_t ldc);

// C = act(C + R), R a block of the same layout (a residual added to a convolution, the Add it stands
// for rounding once as that op does); act(C) where R is null.
void epilogue(Activation act, const float* R, int64_t M, int64_t n, float* C, int64_t ldc);

}  // namespace dg::kernels
