#include "quant_act.h"

#include "quant_blocks.h"

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>

namespace dg::kernels {

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

void quantize_act_row(const float* x, int64_t nb, ActBlock* out) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t b = 0; b < nb; ++b, x += kQuantBlock) {
        __m256 v[4];
        for (int j = 0; j < 4; ++j) v[j] = _mm256_loadu_ps(x + 8 * j);
        __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1])),
                                 _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3])));
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        const float amax = _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
        // a NaN (which max drops) or an infinity makes the block's scale NaN: the outputs it feeds are NaN
        const __m256 nan = _mm256_or_ps(_mm256_or_ps(_mm256_cmp_ps(v[0], v[0], _CMP_UNORD_Q), _mm256_cmp_ps(v[1], v[1], _CMP_UNORD_Q)),
                                        _mm256_or_ps(_mm256_cmp_ps(v[2], v[2], _CMP_UNORD_Q), _mm256_cmp_ps(v[3], v[3], _CMP_UNORD_Q)));
        const bool finite = _mm256_movemask_ps(nan) == 0 && amax <= 3.4e38f;
        const float d = finite ? amax / 127.0f : __builtin_nanf("");
        const __m256 id = _mm256_set1_ps(finite && amax > 0.0f ? 127.0f / amax : 0.0f);
        __m256i q[4];
        for (int j = 0; j < 4; ++j) q[j] = _mm256_cvtps_epi32(_mm256_mul_ps(v[j], id));  // nearest, ties to even
        const __m256i total = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
        __m128i t = _mm_add_epi32(_mm256_castsi256_si128(total), _mm256_extracti128_si256(total, 1));
        t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4E));
        t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xB1));
        // int32 -> int8: the two packs interleave 4-value groups across the 128-bit lanes; the permute restores order
        const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        const __m256i ordered = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        out[b].d = d;
        out[b].s = d * float(_mm_cvtsi128_si32(t));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[b].qs), ordered);
    }
}

#pragma GCC pop_options

}  // namespace dg::kernels

#else  // not x86-64: never called (isa.h)

namespace dg::kernels {
void quantize_act_row(const float*, int64_t, ActBlock*) {}
}  // namespace dg::kernels

#endif
