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

}  // namespace dg::kernels

#else  // not x86-64: never called (isa.h)

namespace dg::kernels {
void f32_matvec_nt(int64_t, int64_t, const float*, const float*, int64_t, float*) {}
}  // namespace dg::kernels

#endif
