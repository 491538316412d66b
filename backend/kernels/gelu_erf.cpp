#include "gelu_erf.h"

#include "fast_exp.h"
#include "vector_clones.h"

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#include <immintrin.h>
#define DG_GELU_AVX2 1
#endif

namespace dg::kernels {

namespace {

inline float gelu_erf(float x) {
    // |x|, held below 1e4 (where the result is max(x, 0) to f32 precision) so that x = +-inf gives
    // the finite 0.5 |x| t below; written as a select that keeps NaN
    float ax = x < 0.0f ? -x : x;
    ax = 1e4f < ax ? 1e4f : ax;
    const float z = ax * 0.70710678118654752f;  // |x| / sqrt(2)
    const float t = 1.0f / (1.0f + 0.5f * z);
    // c0 + c1 t + ... + c9 t^9 in Estrin's order (fast_exp.h): a chain of 4 multiply-adds, not 9
    const float t2 = t * t, t4 = t2 * t2, t8 = t4 * t4;
    const float b0 = t * 1.00002368f - 1.26551223f, b1 = t * 0.09678418f + 0.37409196f;
    const float b2 = t * 0.27886807f - 0.18628806f, b3 = t * 1.48851587f - 1.13520398f;
    const float b4 = t * 0.17087277f - 0.82215223f;
    const float q = ((t2 * b1 + b0) + t4 * (t2 * b3 + b2)) + t8 * b4;
    // erfc(|x| / sqrt(2)) = t exp(q - z^2); 0.5 x erfc(-x / sqrt(2)) is 0.5 |x| (2 - erfc) for x >= 0 and
    // -0.5 |x| erfc for x < 0: max(x, 0) - 0.5 |x| t exp(...) both ways, with no select on the sign.
    // NaN: max gives 0, and the product NaN
    const float pos = x > 0.0f ? x : 0.0f;
    return pos - (0.5f * ax * t) * exp_nonpositive(q - z * z);
}

#ifdef DG_GELU_AVX2
#pragma GCC push_options
#pragma GCC target("avx2,fma")

// gelu_erf above, 8 values at a time, its selects written as min / max / and: GCC's vectorization of
// the scalar form blends (vblendvps, 2 uops and a long latency each on a Zen 1), and this form took
// 0.87 of its time there (256 x 1024 values, one thread, the GELU node alone). Min and max take their second
// operand where either is NaN: the operand order below keeps the scalar form's NaN, inf and -0.
inline __m256 gelu_erf8(__m256 x) {
    const __m256 ax = _mm256_min_ps(_mm256_set1_ps(1e4f), _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x));
    const __m256 z = _mm256_mul_ps(ax, _mm256_set1_ps(0.70710678118654752f));
    const __m256 t = _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_fmadd_ps(_mm256_set1_ps(0.5f), z, _mm256_set1_ps(1.0f)));
    const __m256 t2 = _mm256_mul_ps(t, t), t4 = _mm256_mul_ps(t2, t2), t8 = _mm256_mul_ps(t4, t4);
    const __m256 b0 = _mm256_fmadd_ps(t, _mm256_set1_ps(1.00002368f), _mm256_set1_ps(-1.26551223f));
    const __m256 b1 = _mm256_fmadd_ps(t, _mm256_set1_ps(0.09678418f), _mm256_set1_ps(0.37409196f));
    const __m256 b2 = _mm256_fmadd_ps(t, _mm256_set1_ps(0.27886807f), _mm256_set1_ps(-0.18628806f));
    const __m256 b3 = _mm256_fmadd_ps(t, _mm256_set1_ps(1.48851587f), _mm256_set1_ps(-1.13520398f));
    const __m256 b4 = _mm256_fmadd_ps(t, _mm256_set1_ps(0.17087277f), _mm256_set1_ps(-0.82215223f));
    const __m256 q = _mm256_fmadd_ps(
        t8, b4, _mm256_add_ps(_mm256_fmadd_ps(t2, b1, b0), _mm256_mul_ps(t4, _mm256_fmadd_ps(t2, b3, b2))));
    const __m256 y = _mm256_fnmadd_ps(z, z, q);  // q - z^2
    // exp_nonpositive(y) (fast_exp.h), 0 below -87
    const __m256 yc = _mm256_max_ps(_mm256_set1_ps(-87.0f), y);
    const __m256 shift = _mm256_set1_ps(12582912.0f);
    const __m256 k = _mm256_fmadd_ps(yc, _mm256_set1_ps(1.4426950408889634f), shift);
    const __m256 n = _mm256_sub_ps(k, shift);
    const __m256i ni = _mm256_sub_epi32(_mm256_castps_si256(k), _mm256_castps_si256(shift));
    const __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187e-06f),
                                      _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), yc));
    const __m256 r2 = _mm256_mul_ps(r, r);
    const __m256 a0 = _mm256_add_ps(r, _mm256_set1_ps(1.0f));
    const __m256 a1 = _mm256_fmadd_ps(r, _mm256_set1_ps(0.16667114f), _mm256_set1_ps(0.49999231f));
    const __m256 a2 = _mm256_fmadd_ps(r, _mm256_set1_ps(0.0083125252f), _mm256_set1_ps(0.041890115f));
    const __m256 p = _mm256_fmadd_ps(r2, _mm256_fmadd_ps(r2, a2, a1), a0);
    const __m256 scale = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(ni, _mm256_set1_epi32(127)), 23));
    const __m256 e = _mm256_and_ps(_mm256_mul_ps(p, scale), _mm256_cmp_ps(y, _mm256_set1_ps(-87.0f), _CMP_GE_OQ));
    const __m256 pos = _mm256_max_ps(x, _mm256_setzero_ps());  // NaN: 0, and the product below NaN
    return _mm256_fnmadd_ps(_mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), ax), t), e, pos);
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
