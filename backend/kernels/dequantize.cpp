#include "dequantize.h"

#include <cstddef>
#include <cstring>

#include "dequantize_iq.h"
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

// the 16 bytes of nibbles as 32 values 0..15, in value order, to f32: (v + off) * d (q4_0: off -8, ggml's
// (v - 8) * d, zeros' signs too), or v * d + m (q4_1)
template <bool Offset>
inline void nibbles_avx2(const uint8_t* qs, __m256 d, __m256 m, float* dst) {
    __m128i q;
    std::memcpy(&q, qs, 16);
    const __m128i low = _mm_and_si128(q, _mm_set1_epi8(0x0F));
    const __m128i high = _mm_and_si128(_mm_srli_epi16(q, 4), _mm_set1_epi8(0x0F));
    const __m128i halves[2] = {low, high};
    for (int h = 0; h < 2; ++h) {
        const __m128i v = halves[h];
        const __m256i off = _mm256_set1_epi32(Offset ? -8 : 0);
        const __m256 a = _mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_cvtepu8_epi32(v), off));
        const __m256 b = _mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8)), off));
        _mm256_storeu_ps(dst + 16 * h, Offset ? _mm256_mul_ps(a, d) : _mm256_fmadd_ps(a, d, m));
        _mm256_storeu_ps(dst + 16 * h + 8, Offset ? _mm256_mul_ps(b, d) : _mm256_fmadd_ps(b, d, m));
    }
}

void q4_0_avx2(const void* src, float* dst, int64_t n) {
    const auto* b = static_cast<const BlockQ4_0*>(src);
    for (int64_t i = 0; i < n / kQuantBlock; ++i, ++b, dst += kQuantBlock) {
        nibbles_avx2<true>(b->qs, _mm256_set1_ps(_cvtsh_ss(b->d)), _mm256_setzero_ps(), dst);
    }
}

void q4_1_avx2(const void* src, float* dst, int64_t n) {
    const auto* b = static_cast<const BlockQ4_1*>(src);
    for (int64_t i = 0; i < n / kQuantBlock; ++i, ++b, dst += kQuantBlock)
        nibbles_avx2<false>(b->qs, _mm256_set1_ps(_cvtsh_ss(b->d)), _mm256_set1_ps(_cvtsh_ss(b->m)), dst);
}

// 8 of a q5 block's values (0..31, in int32 lanes) from 8 bytes of nibbles (the low or the high
// ones: shift 0 or 4) and their fifth bits, bits `first`.. of qh
inline __m256i fives_avx2(const uint8_t* qs, int shift, uint32_t qh, int first) {
    __m128i q = _mm_setzero_si128();
    std::memcpy(&q, qs, 8);
    const __m256i nib = _mm256_and_si256(_mm256_srli_epi32(_mm256_cvtepu8_epi32(q), shift), _mm256_set1_epi32(15));
    const __m256i at = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(first));
    const __m256i bit = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(int32_t(qh)), at), _mm256_set1_epi32(1));
    return _mm256_or_si256(nib, _mm256_slli_epi32(bit, 4));
}

// (ggml's order of operations: (v - 16) * d for q5_0, v * d + m for q5_1, so the same values)
template <bool One>
void q5_avx2(const void* src, float* dst, int64_t n) {
    const auto* p = static_cast<const uint8_t*>(src);
    constexpr size_t bytes = One ? sizeof(BlockQ5_1) : sizeof(BlockQ5_0);
    for (int64_t i = 0; i < n / kQuantBlock; ++i, p += bytes, dst += kQuantBlock) {
        uint16_t dh, mh = 0;
        std::memcpy(&dh, p, 2);
        if (One) std::memcpy(&mh, p + 2, 2);
        const uint8_t* qhp = p + (One ? offsetof(BlockQ5_1, qh) : offsetof(BlockQ5_0, qh));
        const uint8_t* qs = p + (One ? offsetof(BlockQ5_1, qs) : offsetof(BlockQ5_0, qs));
        uint32_t qh;
        std::memcpy(&qh, qhp, 4);
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(dh)), m = _mm256_set1_ps(_cvtsh_ss(mh));
        for (int g = 0; g < 4; ++g) {  // values 8g.. : nibbles low (g < 2) or high of bytes 8 (g % 2)..
            __m256i v = fives_avx2(qs + 8 * (g % 2), g < 2 ? 0 : 4, qh, 8 * g);
            if (!One) v = _mm256_sub_epi32(v, _mm256_set1_epi32(16));
            const __m256 x = _mm256_mul_ps(_mm256_cvtepi32_ps(v), d);
            _mm256_storeu_ps(dst + 8 * g, One ? _mm256_add_ps(x, m) : x);
        }
    }
}

// (ggml's order: (d * scale) * (v - 32))
void q6_k_avx2(const void* src, float* dst, int64_t n) {
    const auto* b = static_cast<const BlockQ6_K*>(src);
    for (int64_t i = 0; i < n / 256; ++i, ++b, dst += 256) {
        const float d = _cvtsh_ss(b->d);
        for (int h = 0; h < 2; ++h)
            for (int l = 0; l < 32; l += 8) {
                __m128i lo = _mm_setzero_si128(), hi = _mm_setzero_si128(), top = _mm_setzero_si128();
                std::memcpy(&lo, b->ql + 64 * h + l, 8);
                std::memcpy(&hi, b->ql + 64 * h + 32 + l, 8);
                std::memcpy(&top, b->qh + 32 * h + l, 8);
                const __m256i ql[2] = {_mm256_cvtepu8_epi32(lo), _mm256_cvtepu8_epi32(hi)};
                const __m256i qh = _mm256_cvtepu8_epi32(top);
                for (int k = 0; k < 4; ++k) {  // values 128 h + 32 k + l..
                    const __m256i nib = _mm256_and_si256(_mm256_srli_epi32(ql[k % 2], 4 * (k / 2)), _mm256_set1_epi32(15));
                    const __m256i two = _mm256_and_si256(_mm256_srli_epi32(qh, 2 * k), _mm256_set1_epi32(3));
                    const __m256i v = _mm256_sub_epi32(_mm256_or_si256(nib, _mm256_slli_epi32(two, 4)), _mm256_set1_epi32(32));
                    const float ds = d * float(b->scales[8 * h + 2 * k + l / 16]);
                    _mm256_storeu_ps(dst + 128 * h + 32 * k + l, _mm256_mul_ps(_mm256_cvtepi32_ps(v), _mm256_set1_ps(ds)));
                }
            }
    }
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
        if (type == GGML_TYPE_Q5_0) return q5_avx2<false>;
        if (type == GGML_TYPE_Q5_1) return q5_avx2<true>;
        if (type == GGML_TYPE_Q6_K) return q6_k_avx2;
        if (RowFn f = iq_dequant_row_avx2(type)) return f;
    }
#endif
    return nullptr;
}

}  // namespace

bool dequantizable(ggml_type type) {
    return type != GGML_TYPE_F32 && type < GGML_TYPE_COUNT && ggml_get_type_traits(type)->to_float != nullptr &&
           ggml_get_type_traits(type)->blck_size > 0;
}

bool dequantize_vectorized(ggml_type type) { return fast_row(type) != nullptr; }

void dequantize_row(ggml_type type, const void* src, float* dst, int64_t n) {
    if (RowFn f = fast_row(type)) return f(src, dst, n);
    ggml_get_type_traits(type)->to_float(src, dst, n);
}

}  // namespace dg::kernels
