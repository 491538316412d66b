#include "f32_matvec.h"

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>

namespace dg::kernels {

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx2,fma")
// 4 accumulators of 16 lanes over 64 values at a time, then 16 at a time into the first, the last
// K % 16 with a masked load into the second
void f32_matvec_nt(int64_t N, int64_t K, const float* a, const float* W, int64_t ldw, float* C) {
    const int64_t K64 = K & ~int64_t(63), K16 = K & ~int64_t(15);
    const __mmask16 tail = __mmask16((1u << (K - K16)) - 1);
    for (int64_t n = 0; n < N; ++n) {
        const float* w = W + n * ldw;
        __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps(), s2 = _mm512_setzero_ps(), s3 = _mm512_setzero_ps();
        int64_t k = 0;
        for (; k < K64; k += 64) {
            s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + k), _mm512_loadu_ps(w + k), s0);
            s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + k + 16), _mm512_loadu_ps(w + k + 16), s1);
            s2 = _mm512_fmadd_ps(_mm512_loadu_ps(a + k + 32), _mm512_loadu_ps(w + k + 32), s2);
            s3 = _mm512_fmadd_ps(_mm512_loadu_ps(a + k + 48), _mm512_loadu_ps(w + k + 48), s3);
        }
        for (; k < K16; k += 16) s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + k), _mm512_loadu_ps(w + k), s0);
        if (tail) s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, a + k), _mm512_maskz_loadu_ps(tail, w + k), s1);
        C[n] = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
    }
}
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,fma")
// the same with AVX2: 4 accumulators of 8 lanes over 32 values at a time, then 8 at a time, the
// last K % 8 with a masked load
void f32_matvec_nt_avx2(int64_t N, int64_t K, const float* a, const float* W, int64_t ldw, float* C) {
    const int64_t K32 = K & ~int64_t(31), K8 = K & ~int64_t(7);
    const __m256i tail = _mm256_cmpgt_epi32(_mm256_set1_epi32(int(K - K8)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    for (int64_t n = 0; n < N; ++n) {
        const float* w = W + n * ldw;
        __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
        int64_t k = 0;
        for (; k < K32; k += 32) {
            s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(w + k), s0);
            s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 8), _mm256_loadu_ps(w + k + 8), s1);
            s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 16), _mm256_loadu_ps(w + k + 16), s2);
            s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 24), _mm256_loadu_ps(w + k + 24), s3);
        }
        for (; k < K8; k += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(w + k), s0);
        if (k < K) s1 = _mm256_fmadd_ps(_mm256_maskload_ps(a + k, tail), _mm256_maskload_ps(w + k, tail), s1);
        const __m256 s = _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3));
        const __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
        const __m128 q = _mm_add_ps(h, _mm_movehl_ps(h, h));
        C[n] = _mm_cvtss_f32(_mm_add_ss(q, _mm_movehdup_ps(q)));
    }
}
#pragma GCC pop_options

}  // namespace dg::kernels

#else  // not x86-64: never called (isa.h)

namespace dg::kernels {
void f32_matvec_nt(int64_t, int64_t, const float*, const float*, int64_t, float*) {}
void f32_matvec_nt_avx2(int64_t, int64_t, const float*, const float*, int64_t, float*) {}
}  // namespace dg::kernels

#endif
