#include "gelu_erf.h"

#include "fast_exp.h"
#include "vector_clones.h"

namespace dg::kernels {

namespace {

inline float gelu_erf(float x) {
    const float ax = x < 0.0f ? -x : x;
    const float z = ax * 0.70710678118654752f;  // |x| / sqrt(2)
    const float t = 1.0f / (1.0f + 0.5f * z);
    float q = 0.17087277f;
    q = q * t - 0.82215223f;
    q = q * t + 1.48851587f;
    q = q * t - 1.13520398f;
    q = q * t + 0.27886807f;
    q = q * t - 0.18628806f;
    q = q * t + 0.09678418f;
    q = q * t + 0.37409196f;
    q = q * t + 1.00002368f;
    q = q * t - 1.26551223f;
    const float e = t * exp_nonpositive(q - z * z);  // erfc(|x| / sqrt(2))
    // erfc(-x / sqrt(2)) is 2 - e for x >= 0 and e for x < 0; NaN propagates through x
    const float c = x < 0.0f ? e : 2.0f - e;
    return x == x ? 0.5f * x * c : x;
}

}  // namespace

DG_VECTOR_BODY void gelu_erf_row_body(const float* in, float* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = gelu_erf(in[i]);
}
DG_VECTORIZED(void, gelu_erf_row, (const float* in, float* out, int64_t n), (in, out, n))

}  // namespace dg::kernels
