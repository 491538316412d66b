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

// y = n ln2 + r with |r| <= ln2 / 2, e^r by a polynomial of degree 5 (1 + r + c2 r^2 + ... + c5 r^5,
// c2..c5 fitted here to the least maximum relative error on that interval: 1.05e-7, against 3e-6 for
// Taylor's of the same degree; with f32 rounding the result is within 2.1e-7 of e^y, 1.7 ulps, where
// Taylor's to r^7 gave 1.7e-7 with two multiply-adds more), 2^n by building the float's exponent.
// Below -87 (where 2^n would leave the normal floats; -inf included) it returns 0: the argument is
// clamped to -87 so the exponent bits stay valid, and a final select gives 0. NaN gives NaN.
inline float exp_nonpositive(float y) {
    const float yc = y < -87.0f ? -87.0f : y;
    constexpr float kShift = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
    const float k = yc * 1.4426950408889634f + kShift;
    const float n = k - kShift;
    const int32_t ni = int32_t(float_bits(k) - float_bits(kShift));
    const float r = (yc - n * 0.693145751953125f) - n * 1.428606765330187e-06f;  // ln2 in two parts
    // two pairs of terms, then r^2 (a2 r^2 + a1) + a0: a chain of 3 multiply-adds (Horner's is 5; a loop
    // of these is bound by its latency, not by its multiply-adds)
    const float r2 = r * r;
    const float a0 = r + 1.0f, a1 = r * 0.16667114f + 0.49999231f, a2 = r * 0.0083125252f + 0.041890115f;
    const float p = r2 * (r2 * a2 + a1) + a0;
    const float scale = float_from_bits(uint32_t(ni + 127) << 23);
    return y < -87.0f ? 0.0f : p * scale;
}

}  // namespace dg::kernels
