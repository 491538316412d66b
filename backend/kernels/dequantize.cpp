#include "dequantize.h"

#include <cstring>

#include "isa.h"
#include "quant_blocks.h"

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define DG_DEQUANT_X86 1
#endif

namespace dg::kernels {

namespace {

#ifdef DG_DEQUANT_X86
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

void q8_0_avx2(const void* src, float* dst, int64_t n) {
    const auto* b = static_cast<const BlockQ8_0*>(src);
    for (int64_t i = 0; i < n / kQuantBlock; ++i, ++b, dst += kQuantBlock) {
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(b->d));
        for (int j = 0; j < kQuantBlock; j += 8) {
            __m128i q;
            std::memcpy(&q, b->qs + j, 8);
            _mm256_storeu_ps(dst + j, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), d));
        }
    }
}

// the 16 bytes of nibbles as 32 values 0..15, in value order, to f32 (times d, plus m)
inline void nibbles_avx2(const uint8_t* qs, __m256 d, __m256 m, float* dst) {
    __m128i q;
    std::memcpy(&q, qs, 16);
    const __m128i low = _mm_and_si128(q, _mm_set1_epi8(0x0F));
    const __m128i high = _mm_and_si128(_mm_srli_epi16(q, 4), _mm_set1_epi8(0x0F));
    const __m128i halves[2] = {low, high};
    for (int h = 0; h < 2; ++h) {
        const __m128i v = halves[h];
        const __m256 a = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v));
        const __m256 b = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8)));
        _mm256_storeu_ps(dst + 16 * h, _mm256_fmadd_ps(a, d, m));
        _mm256_storeu_ps(dst + 16 * h + 8, _mm256_fmadd_ps(b, d, m));
    }
}

void q4_0_avx2(const void* src, float* dst, int64_t n) {
    const auto* b = static_cast<const BlockQ4_0*>(src);
    for (int64_t i = 0; i < n / kQuantBlock; ++i, ++b, dst += kQuantBlock) {
        const float d = _cvtsh_ss(b->d);
        nibbles_avx2(b->qs, _mm256_set1_ps(d), _mm256_set1_ps(-8.0f * d), dst);
    }
}

void q4_1_avx2(const void* src, float* dst, int64_t n) {
    const auto* b = static_cast<const BlockQ4_1*>(src);
    for (int64_t i = 0; i < n / kQuantBlock; ++i, ++b, dst += kQuantBlock)
        nibbles_avx2(b->qs, _mm256_set1_ps(_cvtsh_ss(b->d)), _mm256_set1_ps(_cvtsh_ss(b->m)), dst);
}

#pragma GCC pop_options
#endif

using RowFn = void (*)(const void*, float*, int64_t);

// our AVX2 version for `type` (isa.h), else null
RowFn fast_row(ggml_type type) {
#ifdef DG_DEQUANT_X86
    if (kernel_isa() != Isa::generic) {
        if (type == GGML_TYPE_Q8_0) return q8_0_avx2;
        if (type == GGML_TYPE_Q4_0) return q4_0_avx2;
        if (type == GGML_TYPE_Q4_1) return q4_1_avx2;
    }
#endif
    return nullptr;
}

}  // namespace

bool dequantizable(ggml_type type) {
    return type != GGML_TYPE_F32 && type < GGML_TYPE_COUNT && ggml_get_type_traits(type)->to_float != nullptr &&
           ggml_get_type_traits(type)->blck_size > 0;
}

void dequantize_row(ggml_type type, const void* src, float* dst, int64_t n) {
    if (RowFn f = fast_row(type)) return f(src, dst, n);
    ggml_get_type_traits(type)->to_float(src, dst, n);
}

}  // namespace dg::kernels
