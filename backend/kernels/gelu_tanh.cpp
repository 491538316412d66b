#include "gelu_tanh.h"

#include "fast_exp.h"
#include "vector_clones.h"

namespace dg::kernels {

namespace {

// x sigmoid(v), v = 2u: with e = e^-|v| (in (0, 1], no overflow), sigmoid(v) is 1 / (1 + e) for v >= 0
// and e / (1 + e) for v < 0. e is taken as h^2, h = e^(-|v| / 2), and x multiplied by h twice: e alone
// leaves the normal floats at |v| = 87 (x = -10.3), where x e / (1 + e) is still 1e-37, and these
// results would be 0 down to x = -10.4. A v that overflows (|x| above about 1e13) gives h = 0, and so x or 0.
inline float gelu_tanh(float x) {
    constexpr float k2 = 2.0f * 0.7978845608028654f;
    const float v = k2 * x * (1.0f + 0.044715f * x * x);
    const float av = v < 0.0f ? -v : v;  // NaN stays NaN, and so does h
    const float h = exp_nonpositive(-0.5f * av);
    const float num = v < 0.0f ? h : 1.0f;
    // -inf: held at the lowest float, so that it times num = 0 is -0, not NaN; NaN passes
    const float xm = x < -3.4028234e38f ? -3.4028234e38f : x;
    return xm * num * num / (1.0f + h * h);
}

DG_VECTOR_BODY void gelu_tanh_auto_body(const float* in, float* out, int64_t n) {
#pragma GCC unroll 4
    for (int64_t i = 0; i < n; ++i) out[i] = gelu_tanh(in[i]);
}
DG_VECTORIZED(void, gelu_tanh_auto, (const float* in, float* out, int64_t n), (in, out, n))

}  // namespace

void gelu_tanh_row(const float* in, float* out, int64_t n) { gelu_tanh_auto(in, out, n); }

}  // namespace dg::kernels
