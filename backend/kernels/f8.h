// 8-bit floats (OCP FP8), one byte an element:
//   f8_e4m3 ("fn"): 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities,
//                   largest 448, NaN is S.1111.111; smallest subnormal 2^-9.
//   f8_e5m2:        1 sign, 5 exponent (bias 15), 2 mantissa bits; IEEE-like,
//                   largest 57344, infinity S.11111.00, NaN S.11111.xx (xx != 0);
//                   smallest subnormal 2^-16.
// f32 -> f8 rounds once to the nearest f8 value, ties to even, without
// saturation (oneDNN's conversion): a value that rounds beyond the largest
// finite one, and an infinity, become NaN (e4m3) or an infinity of its sign
// (e5m2); NaN stays NaN (quiet, its sign kept).
#pragma once

#include <cstdint>
#include <cstring>

namespace dg::kernels {

enum class F8 : uint8_t { E4M3, E5M2 };

namespace f8_detail {

inline uint32_t bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

inline float from_bits(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// M mantissa bits, exponent bias B; FN: no infinities (the all-ones pattern is NaN)
template <int M, int B, bool FN>
inline uint8_t encode(float x) {
    constexpr int E = 7 - M;
    constexpr int emin = 1 - B;                                   // exponent of the smallest normal
    constexpr int emax = (FN ? (1 << E) - 1 : (1 << E) - 2) - B;  // exponent of the largest finite
    constexpr float max_finite = FN ? float((2.0 - 2.0 / (1 << M)) * double(1LL << emax))
                                    : float((2.0 - 1.0 / (1 << M)) * double(1LL << emax));
    constexpr uint8_t nan = FN ? 0x7F : uint8_t(0x7C | (1 << (M - 1)));
    const uint32_t u = bits(x);
    const uint8_t sign = uint8_t((u >> 24) & 0x80);
    const uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return sign | nan;
    const uint8_t overflow = FN ? uint8_t(sign | nan) : uint8_t(sign | 0x7C);
    int e = int(a >> 23) - 127;
    if (e > emax) return overflow;  // (infinities too)
    if (e < emin) e = emin;         // subnormal in f8: the quantum of the smallest normal binade
    // |x| rounded to a multiple of 2^(e - M), ties to even: beside c = 2^(e - M + 23), that quantum is one ulp
    const float c = from_bits(uint32_t(e - M + 23 + 127) << 23);
    const float r = (from_bits(a) + c) - c;
    if (r > max_finite) return overflow;
    if (r == 0.0f) return sign;
    const uint32_t ru = bits(r);
    const int er = int(ru >> 23) - 127;
    if (er < emin) return uint8_t(sign | uint8_t(r * from_bits(uint32_t(M - emin + 127) << 23)));  // subnormal
    return uint8_t(sign | ((er + B) << M) | ((ru >> (23 - M)) & ((1u << M) - 1)));
}

}  // namespace f8_detail

inline uint8_t f32_to_f8(float x, F8 t) {
    return t == F8::E4M3 ? f8_detail::encode<3, 7, true>(x) : f8_detail::encode<2, 15, false>(x);
}

// The 256 values of an f8 type as f32 (exact), indexed by the byte.
const float* f8_values(F8 t);

}  // namespace dg::kernels
