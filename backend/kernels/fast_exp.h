// e^y for y <= 0.5, written so the compiler vectorizes loops that call it (no
// libm call, no branch): the softmax of attention.cpp and GELU's erfc
// (gelu_erf.cpp). Compile its callers with -fno-trapping-math and
// -fno-math-errno so the selects stay selects.
#pragma once

#include <cstdint>
#include <cstring>

namespace dg::kernels {

inline float float_from_bits(uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

inline uint32_t float_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

// y = n ln2 + r with |r| <= ln2 / 2, e^r by its Taylor polynomial to r^7
// (error < 1e-8), 2^n by building the float's exponent. Below -87 (where 2^n
// would leave the normal floats; -inf included) it returns 0: the argument is
// clamped to -87 so the exponent bits stay valid, and a final select gives 0.
// NaN gives NaN.
inline float exp_nonpositive(float y) {
    const float yc = y < -87.0f ? -87.0f : y;
    constexpr float kShift = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
    const float k = yc * 1.4426950408889634f + kShift;
    const float n = k - kShift;
    const int32_t ni = int32_t(float_bits(k) - float_bits(kShift));
    const float r = (yc - n * 0.693145751953125f) - n * 1.428606765330187e-06f;  // ln2 in two parts
    // the polynomial in Estrin's order: pairs of terms, then pairs of pairs, a chain of 4 multiply-adds
    // where Horner's is 7 (a loop of these is bound by its latency, not by its multiply-adds)
    const float r2 = r * r, r4 = r2 * r2;
    const float a0 = r + 1.0f, a1 = r * (1.0f / 6.0f) + 0.5f;
    const float a2 = r * (1.0f / 120.0f) + 1.0f / 24.0f, a3 = r * (1.0f / 5040.0f) + 1.0f / 720.0f;
    const float p = (r2 * a1 + a0) + r4 * (r2 * a3 + a2);
    const float scale = float_from_bits(uint32_t(ni + 127) << 23);
    return y < -87.0f ? 0.0f : p * scale;
}

}  // namespace dg::kernels
