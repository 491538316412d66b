#include "gelu_erf.h"

#include "fast_exp.h"
#include "vector_clones.h"

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#include <immintrin.h>
#define DG_GELU_AVX2 1
#endif

namespace dg::kernels {

namespace {

// erfc(z) = t exp(q(s) - z^2), t = 1 / (1 + 0.39 z), s = 1 - t = 0.39 z t, q of degree 8 (tools/fit_erfc.py:
// within 6.1e-8 of log(erfcx(z) / t) for z in [0, 9.4], so that is the relative error it adds). s is
// computed as (0.39 z) t, to the relative error of one rounding: 1 - t (or a polynomial in t), near z = 0
// where t rounds to an absolute 6e-8, reads erfcx at a z off by up to 6e-8 / 0.39 (a fit of degree 7 in t
// was 2.2 ulps of x off at x = -0.07; this form 1.2 at most). On |x|: 0.39 / sqrt(2)
constexpr float kT = 0.27577164466275356f;
constexpr float kC[9] = {-5.49184946e-08f, -1.89326692f, -0.00469934195f, 0.493290067f, 0.0962576047f,
                         0.0360246263f,    -0.773844481f, 0.760323703f,    -0.228259221f};

inline float gelu_erf(float x) {
    // |x|, held at 14 (where the result is max(x, 0) in f32: GELU(-13.3) is below the normal floats) so
    // that x = +-inf gives the finite 0.5 |x| t below; written as a select that keeps NaN
    float ax = x < 0.0f ? -x : x;
    ax = 14.0f < ax ? 14.0f : ax;
    const float hx = 0.5f * ax, kax = kT * ax;
    const float t = 1.0f / (1.0f + kax), s = kax * t;
    // q(s) in Estrin's order: a chain of 4 multiply-adds, not 8
    const float s2 = s * s, s4 = s2 * s2;
    const float q = (s2 * (s * kC[3] + kC[2]) + (s * kC[1] + kC[0])) +
                    s4 * (s2 * (s2 * kC[8] + (s * kC[7] + kC[6])) + (s * kC[5] + kC[4]));
    // z^2 as x^2 / 2, one rounding (x / sqrt(2), squared, rounds twice: 1.7e-6 at x = -4, where this is 7e-7).
    // erfc(|x| / sqrt(2)) = t exp(q - x^2 / 2); 0.5 x erfc(-x / sqrt(2)) is 0.5 |x| (2 - erfc) for x >= 0 and
    // -0.5 |x| erfc for x < 0: max(x, 0) - 0.5 |x| t exp(...) both ways, with no select on the sign.
    // NaN: max gives 0, and the product NaN
    const float pos = x > 0.0f ? x : 0.0f;
    return pos - (hx * t) * exp_nonpositive(q - hx * ax);
}

#ifdef DG_GELU_AVX2
#pragma GCC push_options
#pragma GCC target("avx2,fma")

// gelu_erf above, 8 values at a time, its selects written as min / max: GCC's vectorization of the scalar
// form blends (vblendvps, 2 uops and a long latency each on a Zen 1). Min and max take their second
// operand where either is NaN: the operand order below keeps the scalar form's NaN, inf and -0. The loop
// is bound by its operations, not their latency (each one left out takes its share of the time), so its
// exp is exp_nonpositive's with two fewer: ln2 in one constant (with the multiply-add, n ln2 is off by at
// most 143 x 1.9e-9), and 2^n built from k's bits, where n + 127 already sits (below).
inline __m256 gelu_erf8(__m256 x) {
    const __m256 ax = _mm256_min_ps(_mm256_set1_ps(14.0f), _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x));
    const __m256 hx = _mm256_mul_ps(ax, _mm256_set1_ps(0.5f)), kax = _mm256_mul_ps(ax, _mm256_set1_ps(kT));
    const __m256 t = _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_add_ps(kax, _mm256_set1_ps(1.0f)));
    const __m256 s = _mm256_mul_ps(kax, t);
    const __m256 s2 = _mm256_mul_ps(s, s), s4 = _mm256_mul_ps(s2, s2);
    auto pair = [&](int i) { return _mm256_fmadd_ps(s, _mm256_set1_ps(kC[i + 1]), _mm256_set1_ps(kC[i])); };
    const __m256 hi = _mm256_fmadd_ps(s2, _mm256_fmadd_ps(s2, _mm256_set1_ps(kC[8]), pair(6)), pair(4));
    const __m256 q = _mm256_fmadd_ps(s4, hi, _mm256_fmadd_ps(s2, pair(2), pair(0)));
    const __m256 y = _mm256_fnmadd_ps(hx, ax, q);  // q - x^2 / 2, in [-99.3, 0]
    // e^y = 2^n e^r, n = round(y / ln2), |r| <= ln2 / 2; k = y / ln2 + 1.5 * 2^23 + 127 rounds to an
    // integer whose low mantissa bits are n + 127 (0 to 127, or below 0 for the values that are 0 in f32)
    const __m256 shift = _mm256_set1_ps(12583039.0f);
    const __m256 k = _mm256_fmadd_ps(y, _mm256_set1_ps(1.4426950408889634f), shift);
    const __m256 n = _mm256_sub_ps(k, shift);
    const __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.69314718055994531f), y);
    const __m256 r2 = _mm256_mul_ps(r, r);  // e^r: fast_exp.h's polynomial
    const __m256 a0 = _mm256_add_ps(r, _mm256_set1_ps(1.0f));
    const __m256 a1 = _mm256_fmadd_ps(r, _mm256_set1_ps(0.16667114f), _mm256_set1_ps(0.49999231f));
    const __m256 a2 = _mm256_fmadd_ps(r, _mm256_set1_ps(0.0083125252f), _mm256_set1_ps(0.041890115f));
    const __m256 p = _mm256_fmadd_ps(r2, _mm256_fmadd_ps(r2, a2, a1), a0);
    // 2^n: k's low 9 bits shifted into the exponent field; k held at 1.5 * 2^23 (n + 127 = 0) gives +0.
    // NaN: the max gives 1.5 * 2^23, and p is NaN
    const __m256i bits = _mm256_castps_si256(_mm256_max_ps(k, _mm256_set1_ps(12582912.0f)));
    const __m256 scale = _mm256_castsi256_ps(_mm256_slli_epi32(bits, 23));
    const __m256 pos = _mm256_max_ps(x, _mm256_setzero_ps());  // NaN: 0, and the product below NaN
    return _mm256_fnmadd_ps(_mm256_mul_ps(hx, t), _mm256_mul_ps(p, scale), pos);
}

void gelu_erf_row_avx2(const float* in, float* out, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {  // two vectors in flight: 0.94-0.96 of the time of one
        const __m256 a = gelu_erf8(_mm256_loadu_ps(in + i)), b = gelu_erf8(_mm256_loadu_ps(in + i + 8));
        _mm256_storeu_ps(out + i, a);
        _mm256_storeu_ps(out + i + 8, b);
    }
    for (; i < n; i += 8) {  // the last values through the same code, masked
        const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(int(n - i < 8 ? n - i : 8)),
                                                _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        _mm256_maskstore_ps(out + i, mask, gelu_erf8(_mm256_maskload_ps(in + i, mask)));
    }
}

#pragma GCC pop_options
#endif

DG_VECTOR_BODY void gelu_erf_auto_body(const float* in, float* out, int64_t n) {
#pragma GCC unroll 4
    for (int64_t i = 0; i < n; ++i) out[i] = gelu_erf(in[i]);
}
DG_VECTORIZED(void, gelu_erf_auto, (const float* in, float* out, int64_t n), (in, out, n))

}  // namespace

void gelu_erf_row(const float* in, float* out, int64_t n) {
#ifdef DG_GELU_AVX2
    if (vector_level() == 1) return gelu_erf_row_avx2(in, out, n);
#endif
    gelu_erf_auto(in, out, n);
}

}  // namespace dg::kernels
