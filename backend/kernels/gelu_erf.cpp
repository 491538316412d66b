#include "gelu_erf.h"

#include <cstring>

namespace dg::kernels {

namespace {

inline float from_bits(uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

inline uint32_t to_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

// e^y for y <= 0.5 (the only arguments erfc's fit gives): y = n ln2 + r with
// |r| <= ln2 / 2, e^r by its Taylor polynomial to r^7 (error < 1e-8), 2^n by
// building the float's exponent. Below -87 (where 2^n would leave the normal
// floats) it returns 0: the argument is clamped to -87 so the exponent bits
// stay valid, and a final select gives 0.
inline float exp_nonpositive(float y) {
    const float yc = y < -87.0f ? -87.0f : y;
    constexpr float kShift = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
    const float k = yc * 1.4426950408889634f + kShift;
    const float n = k - kShift;
    const int32_t ni = int32_t(to_bits(k) - to_bits(kShift));
    const float r = (yc - n * 0.693145751953125f) - n * 1.428606765330187e-06f;  // ln2 in two parts
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const float scale = from_bits(uint32_t(ni + 127) << 23);
    return y < -87.0f ? 0.0f : p * scale;
}

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

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
void gelu_erf_row(const float* in, float* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = gelu_erf(in[i]);
}

}  // namespace dg::kernels
