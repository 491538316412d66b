// Inside the quantized panels' vector tiles (quant_panels_*.cpp): the small
// helpers they share, each compiled for the ISA its callers run at.
#pragma once

#include <cstdint>
#include <cstring>

#include "quant_panels_tile.h"

#ifdef DG_QUANT_PANELS_X86
#include <immintrin.h>

namespace dg::kernels::panels {

// (vectors as GCC's: arithmetic, shifts and masks by operators)
typedef int32_t v16si __attribute__((vector_size(64)));
typedef int32_t v8si __attribute__((vector_size(32)));

// the first n of 16 lanes
__attribute__((target("avx512f"))) inline __mmask16 lanes16(int64_t n) {
    return n >= 16 ? __mmask16(0xFFFF) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}

// the first n of 8 int32 lanes (vpmaskmovd)
__attribute__((target("avx2"))) inline __m256i lane_mask(int64_t n) {
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(int32_t(n < 0 ? 0 : n > 8 ? 8 : n)), idx);
}

// 4 int8 values (4 activations of a row) in every 32-bit lane
__attribute__((target("avx512f"))) inline __m512i bcast4_512(const int8_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}
__attribute__((target("avx2"))) inline __m256i bcast4_256(const int8_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

// The VNNI tiles' loads from a panel of 32 rows, in halves of 16 rows: Full (w = 32), or only the rows of
// mask k (a narrow panel's, lanes16). A chunk's 64 bytes (4 a row); 16 f16 of a field as f32; 16 bytes of
// a byte field as int32, unsigned or Signed. (The maskz conversions: the plain ones' undefined first
// operand draws -Wmaybe-uninitialized from GCC 12.)
template <bool Full>
__attribute__((target("avx512f"))) inline __m512i chunk64(const uint8_t* p, __mmask16 k) {
    return Full ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi32(k, p);
}
template <bool Full>
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline __m512 half16(const uint8_t* p, __mmask16 k) {
    const __m256i h = Full ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)) : _mm256_maskz_loadu_epi16(k, p);
    return _mm512_maskz_cvtph_ps(__mmask16(0xFFFF), h);
}
template <bool Full, bool Signed = false>
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline v16si bytes16(const uint8_t* p, __mmask16 k) {
    const __m128i v = Full ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)) : _mm_maskz_loadu_epi8(k, p);
    return v16si(Signed ? _mm512_maskz_cvtepi8_epi32(__mmask16(0xFFFF), v) : _mm512_maskz_cvtepu8_epi32(__mmask16(0xFFFF), v));
}

// s[m][x][0] += u[x][0] . act[at + m nb]'s 4 values at 4q, s[m][x][1] += u[x][1] . its 4 at 16 + 4q
// (vpdpbusd), for MR rows m (nb blocks apart) and both halves x of a panel: a step of the tiles whose
// block of 32 values is two groups of 16 (q6_K, q2_K, q3_K)
template <int MR>
__attribute__((target("avx512f,avx512vnni"))) inline void dot_two_groups(__m512i (&s)[MR][2][2], const __m512i (&u)[2][2],
                                                                       const ActBlock* act, int64_t at, int64_t nb, int q) {
    for (int m = 0; m < MR; ++m) {
        const __m512i a0 = bcast4_512(act[at + m * nb].qs + 4 * q), a1 = bcast4_512(act[at + m * nb].qs + 16 + 4 * q);
        for (int x = 0; x < 2; ++x) {
            s[m][x][0] = _mm512_dpbusd_epi32(s[m][x][0], u[x][0], a0);
            s[m][x][1] = _mm512_dpbusd_epi32(s[m][x][1], u[x][1], a1);
        }
    }
}

// the panels' tiles prefetch their weights this far ahead into L2 (q4_K, q5_K, q6_K: gemm-choices.md)
constexpr size_t kPrefetchAhead = 8192;

// a tile's MR rows x 32 outputs (f[m][h]: the 16 of half h) to C, rows ldc apart; lanes lo / hi of each half
template <int MR>
__attribute__((target("avx512f"))) inline void store_tile(float* C, int64_t ldc, const __m512 (&f)[MR][2], __mmask16 lo,
                                                          __mmask16 hi) {
    for (int m = 0; m < MR; ++m) {
        _mm512_mask_storeu_ps(C + m * ldc, lo, f[m][0]);
        _mm512_mask_storeu_ps(C + m * ldc + 16, hi, f[m][1]);
    }
}

// a tile's MR rows x 32 outputs (f[m][v]: the 8 of vector v) to C; Full: all 32, else the lanes of mask[v]
template <bool Full, int MR>
__attribute__((target("avx2"))) inline void store_tile(float* C, int64_t ldc, const __m256 (&f)[MR][4], const __m256i (&mask)[4]) {
    for (int m = 0; m < MR; ++m)
        for (int v = 0; v < 4; ++v) {
            float* c = C + m * ldc + 8 * v;
            if (Full) _mm256_storeu_ps(c, f[m][v]);
            else _mm256_maskstore_ps(c, mask[v], f[m][v]);
        }
}

// 16 in byte k where bit k of `bits` is set, else 0
__attribute__((target("avx2"))) inline __m256i sixteens(uint32_t bits) {
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                            2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x(int64_t(0x8040201008040201));
    const __m256i x = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32(int32_t(bits)), spread), bit);
    return _mm256_and_si256(_mm256_cmpeq_epi8(x, bit), _mm256_set1_epi8(16));
}

// a narrow panel's (w < 32 rows) f16 fields and byte fields copied into `pad` as a full panel's lie (32
// rows each), so the AVX2 tiles read them with full loads; pad: at least byte_field_offset(fm, 32) + 32 *
// byte_fields bytes
inline void pad_head(const Format& fm, const uint8_t* blk, int64_t w, uint8_t* pad) {
    for (int f = 0; f < fm.fields; ++f) std::memcpy(pad + field_offset(kW, f), blk + field_offset(w, f), 2 * size_t(w));
    for (int t = 0; t < fm.byte_fields; ++t)
        std::memcpy(pad + byte_field_offset(fm, kW) + size_t(t) * kW, blk + byte_field_offset(fm, w) + size_t(t) * size_t(w), size_t(w));
}

}  // namespace dg::kernels::panels

#endif
