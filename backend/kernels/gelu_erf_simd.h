// GELU's erf form (gelu_erf.h) on vectors: its coefficients, and gelu_erf_v(x) for AVX2's 8 lanes
// (gelu::avx2) and AVX-512's 16 (gelu::avx512), on x86-64 with GCC (DG_GELU_SIMD). The row kernel
// (gelu_erf.cpp) and the products that apply GELU to their tiles in registers (f32_panels.cpp) call
// the same code; both widths run the same operations lane by lane, so they give the same bits.
// Callers' targets must include the functions' ("avx2,fma"; "avx512f,avx2,fma").
#pragma once

#include <cstdint>

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#include <immintrin.h>
#define DG_GELU_SIMD 1
#endif

namespace dg::kernels::gelu {

// erfc(z) = t exp(q(s) - z^2), t = 1 / (1 + 0.39 z), s = 1 - t = 0.39 z t, q of degree 8 (tools/fit_erfc.py:
// within 6.1e-8 of log(erfcx(z) / t) for z in [0, 9.4], so that is the relative error it adds). s is
// computed as (0.39 z) t, to the relative error of one rounding: 1 - t (or a polynomial in t), near z = 0
// where t rounds to an absolute 6e-8, reads erfcx at a z off by up to 6e-8 / 0.39 (a fit of degree 7 in t
// was 2.2 ulps of x off at x = -0.07; this form 1.2 at most). On |x|: 0.39 / sqrt(2)
constexpr float kT = 0.27577164466275356f;
constexpr float kC[9] = {-5.49184946e-08f, -1.89326692f, -0.00469934195f, 0.493290067f, 0.0962576047f,
                         0.0360246263f,    -0.773844481f, 0.760323703f,    -0.228259221f};

#ifdef DG_GELU_SIMD
#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace avx2 {
using V = __m256;
inline V set1(float f) { return _mm256_set1_ps(f); }
inline V vmin(V a, V b) { return _mm256_min_ps(a, b); }
inline V vmax(V a, V b) { return _mm256_max_ps(a, b); }
inline V vandnot(V a, V b) { return _mm256_andnot_ps(a, b); }
inline V vadd(V a, V b) { return _mm256_add_ps(a, b); }
inline V vsub(V a, V b) { return _mm256_sub_ps(a, b); }
inline V vmul(V a, V b) { return _mm256_mul_ps(a, b); }
inline V vdiv(V a, V b) { return _mm256_div_ps(a, b); }
inline V vfmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
inline V vfnmadd(V a, V b, V c) { return _mm256_fnmadd_ps(a, b, c); }
inline V exponent_of(V k) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(k), 23)); }
#include "gelu_erf_simd.inc"
}  // namespace avx2
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma")
namespace avx512 {
using V = __m512;
inline V set1(float f) { return _mm512_set1_ps(f); }
inline V vmin(V a, V b) { return _mm512_min_ps(a, b); }
inline V vmax(V a, V b) { return _mm512_max_ps(a, b); }
inline V vandnot(V a, V b) {  // (AVX-512F's integer form: the float one is AVX-512DQ's)
    return _mm512_castsi512_ps(_mm512_andnot_si512(_mm512_castps_si512(a), _mm512_castps_si512(b)));
}
inline V vadd(V a, V b) { return _mm512_add_ps(a, b); }
inline V vsub(V a, V b) { return _mm512_sub_ps(a, b); }
inline V vmul(V a, V b) { return _mm512_mul_ps(a, b); }
inline V vdiv(V a, V b) { return _mm512_div_ps(a, b); }
inline V vfmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
inline V vfnmadd(V a, V b, V c) { return _mm512_fnmadd_ps(a, b, c); }
inline V exponent_of(V k) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_castps_si512(k), 23)); }
#include "gelu_erf_simd.inc"
}  // namespace avx512
#pragma GCC pop_options
#endif

}  // namespace dg::kernels::gelu
