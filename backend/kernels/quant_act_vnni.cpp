#include "quant_act_vnni.h"

#include <cstring>

#include "quant_blocks.h"

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>

namespace dg::kernels {

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")

void quantize_act_groups(const float* x, int64_t nb, ggml_type wtype, ActGroup* out) {
    const int64_t ng = (nb + kGroupBlocks - 1) / kGroupBlocks;
    if (nb % kGroupBlocks) std::memset(&out[ng - 1], 0, sizeof(ActGroup));  // the padding blocks
    for (int64_t b = 0; b < nb; ++b, x += kQuantBlock) {
        ActGroup& g = out[b / kGroupBlocks];
        const int slot = int(b % kGroupBlocks);
        const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
        // a NaN (which max drops) or an infinity makes the block's scale NaN: the outputs it feeds are NaN
        const bool nan = (_mm512_cmp_ps_mask(v0, v0, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(v1, v1, _CMP_UNORD_Q)) != 0;
        const bool finite = !nan && amax <= 3.4e38f;  // the bound quant_act.cpp uses
        const float d = finite ? amax / 127.0f : __builtin_nanf("");
        const __m512 id = _mm512_set1_ps(finite && amax > 0.0f ? 127.0f / amax : 0.0f);
        const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, id));  // nearest, ties to even
        const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, id));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(g.q + 16 * slot), _mm512_cvtsepi32_epi8(q0));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(g.q + 64 + 16 * slot), _mm512_cvtsepi32_epi8(q1));
        _mm_storeu_ps(g.d + 4 * slot, _mm_set1_ps(d));
        if (slot == kGroupBlocks - 1 || b == nb - 1) {
            // the sums of the values each lane multiplies: vpdpbusd with ones
            const __m512i ones = _mm512_set1_epi8(1);
            const __m512i lo = _mm512_load_si512(g.q), hi = _mm512_load_si512(g.q + 64);
            const __m512i sum = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, lo), ones, hi);
            const int shift = wtype == GGML_TYPE_Q8_0 ? 7 : wtype == GGML_TYPE_Q4_0 ? 3 : -1;
            const __m512i corr = shift < 0 ? _mm512_setzero_si512()
                                           : _mm512_sub_epi32(_mm512_setzero_si512(),
                                                              _mm512_sll_epi32(sum, _mm_cvtsi32_si128(shift)));
            _mm512_store_si512(g.corr, corr);
            if (wtype == GGML_TYPE_Q4_1) _mm512_store_ps(g.s, _mm512_mul_ps(_mm512_load_ps(g.d), _mm512_cvtepi32_ps(sum)));
        }
    }
}

#pragma GCC pop_options

}  // namespace dg::kernels

#else  // not x86-64: never called (isa.h)

namespace dg::kernels {
void quantize_act_groups(const float*, int64_t, ggml_type, ActGroup*) {}
}  // namespace dg::kernels

#endif
