// quant_panels.h's product with AVX-512 VNNI: 4 values of an activation row,
// broadcast, times a chunk's 64 bytes (or nibbles) into 16 outputs' int32 sums
// (vpdpbusd); 6 rows x 32 outputs a tile.
#include <algorithm>
#include <cstring>

#include "quant_panels_simd.h"

#ifdef DG_QUANT_PANELS_X86

#include <immintrin.h>

namespace dg::kernels::panels {

namespace {

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")

constexpr int kTileRows = 6;  // 12 sums and 12 accumulators of 32 registers

// (the maskz forms: the plain ones' undefined first operand draws -Wmaybe-uninitialized from GCC 12)
inline __m512 cvtepi32(__m512i v) { return _mm512_maskz_cvtepi32_ps(__mmask16(0xFFFF), v); }

// C[MR rows, w] = one panel of type T times MR activation rows (act, corr: rows nb apart). Full: w = 32.
// With one row the sums of each half alternate between two registers (vpdpbusd's latency).
template <ggml_type T, int MR, bool Full>
void tile(int64_t nb, const ActBlock* act, const int32_t* corr, const uint8_t* panel, int64_t w, float* C,
          int64_t ldc) {
    constexpr Format fm = format_of(T);
    constexpr int CH = MR == 1 ? 2 : 1;
    const int64_t width = Full ? kW : w;
    const size_t bs = size_t(width) * fm.block_bytes, c0 = chunk_offset(fm, width, 0), cs = 4 * size_t(width);
    const size_t m0 = field_offset(width, 1);
    const __mmask16 lo = Full ? __mmask16(0xFFFF) : lanes16(w), hi = Full ? __mmask16(0xFFFF) : lanes16(w - 16);
    const __m512i nibble = _mm512_set1_epi8(0x0F);
    // q5: group g's fifth bits of the 16 rows of half h (quant_panels_tile.h)
    auto fifth = [&](const uint8_t* blk, int g, int h) {
        const uint8_t* area = blk + bits_offset(fm, width);
        uint64_t k;
        if (Full) std::memcpy(&k, area + 16 * g + 8 * h, 8);
        else k = read_bits(area, fifth_bit(width, g, 16 * h, 0), 4 * int(std::min<int64_t>(16, width - 16 * h)));
        return _cvtu64_mask64(k);
    };
    __m512 f[MR][2];
    for (int m = 0; m < MR; ++m) f[m][0] = f[m][1] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* blk = panel + size_t(b) * bs;
        // fewer rows than a tile (decode): the weights come from memory, read once; kPrefetchAhead ahead
        // into L2 (one row, from memory: 10-17% less time on an AVX-512 Xeon, docs/performance.md)
        if constexpr (MR < kTileRows)
            for (size_t l = 0; l < bs; l += 64) _mm_prefetch(reinterpret_cast<const char*>(blk + kPrefetchAhead + l), _MM_HINT_T1);
        __m512i s[MR][2][CH];
        for (int m = 0; m < MR; ++m) {
            const __m512i c = _mm512_set1_epi32(corr[m * nb + b]);
            for (int h = 0; h < 2; ++h) {
                s[m][h][0] = c;
                if constexpr (CH == 2) s[m][h][CH - 1] = _mm512_setzero_si512();
            }
        }
#pragma GCC unroll 8
        for (int q = 0; q < fm.chunks; ++q) {
            const uint8_t* g = blk + c0 + q * cs;
            const __m512i w0 = chunk64<Full>(g, lo), w1 = chunk64<Full>(g + 64, hi);
            if constexpr (T == GGML_TYPE_Q8_0) {
                for (int m = 0; m < MR; ++m) {
                    const __m512i a = bcast4_512(act[m * nb + b].qs + 4 * q);
                    s[m][0][q % CH] = _mm512_dpbusd_epi32(s[m][0][q % CH], w0, a);
                    s[m][1][q % CH] = _mm512_dpbusd_epi32(s[m][1][q % CH], w1, a);
                }
            } else {  // low nibbles: values 4q.., high nibbles: values 16 + 4q..
                __m512i l0 = _mm512_and_si512(w0, nibble), h0 = _mm512_and_si512(_mm512_srli_epi16(w0, 4), nibble);
                __m512i l1 = _mm512_and_si512(w1, nibble), h1 = _mm512_and_si512(_mm512_srli_epi16(w1, 4), nibble);
                if constexpr (fm.bits != 0) {  // q5: + 16 where the fifth bit is set (a mask of 16 rows' 64 bytes)
                    const __m512i sixteen = _mm512_set1_epi8(16);
                    l0 = _mm512_mask_add_epi8(l0, fifth(blk, 2 * q, 0), l0, sixteen);
                    l1 = _mm512_mask_add_epi8(l1, fifth(blk, 2 * q, 1), l1, sixteen);
                    h0 = _mm512_mask_add_epi8(h0, fifth(blk, 2 * q + 1, 0), h0, sixteen);
                    h1 = _mm512_mask_add_epi8(h1, fifth(blk, 2 * q + 1, 1), h1, sixteen);
                }
                for (int m = 0; m < MR; ++m) {
                    const __m512i alo = bcast4_512(act[m * nb + b].qs + 4 * q), ahi = bcast4_512(act[m * nb + b].qs + 16 + 4 * q);
                    s[m][0][0] = _mm512_dpbusd_epi32(s[m][0][0], l0, alo);
                    s[m][1][0] = _mm512_dpbusd_epi32(s[m][1][0], l1, alo);
                    s[m][0][CH - 1] = _mm512_dpbusd_epi32(s[m][0][CH - 1], h0, ahi);
                    s[m][1][CH - 1] = _mm512_dpbusd_epi32(s[m][1][CH - 1], h1, ahi);
                }
            }
        }
        const __m512 d0 = half16<Full>(blk, lo), d1 = half16<Full>(blk + 32, hi);
        for (int m = 0; m < MR; ++m) {
            const ActBlock& a = act[m * nb + b];
            const __m512 da = _mm512_set1_ps(a.d);
            __m512i s0 = s[m][0][0], s1 = s[m][1][0];
            if constexpr (CH == 2) {
                s0 = _mm512_add_epi32(s0, s[m][0][1]);
                s1 = _mm512_add_epi32(s1, s[m][1][1]);
            }
            f[m][0] = _mm512_fmadd_ps(cvtepi32(s0), _mm512_mul_ps(d0, da), f[m][0]);
            f[m][1] = _mm512_fmadd_ps(cvtepi32(s1), _mm512_mul_ps(d1, da), f[m][1]);
        }
        if constexpr (fm.fields == 2) {  // q4_1, q5_1: the minimum times the block's sum
            const __m512 mn0 = half16<Full>(blk + m0, lo), mn1 = half16<Full>(blk + m0 + 32, hi);
            for (int m = 0; m < MR; ++m) {
                const __m512 sa = _mm512_set1_ps(act[m * nb + b].s);
                f[m][0] = _mm512_fmadd_ps(mn0, sa, f[m][0]);
                f[m][1] = _mm512_fmadd_ps(mn1, sa, f[m][1]);
            }
        }
    }
    store_tile(C, ldc, f, lo, hi);
}

// The panel for every row, a tile at a time.
struct Rows {
    template <ggml_type T, bool Full>
    static void run(int64_t M, int64_t nb, const ActBlock* a, const int32_t* c, const uint8_t* panel, int64_t w,
                    float* C, int64_t ldc) {
        row_tiles<kTileRows>(M, [&](auto r, int64_t m) {
            tile<T, decltype(r)::value, Full>(nb, a + m * nb, c + m * nb, panel, w, C + m * ldc, ldc);
        });
    }
};

}  // namespace

void panel_vnni(ggml_type type, int64_t M, int64_t nb, const ActBlock* act, const int32_t* corr,
                const uint8_t* panel, int64_t w, float* C, int64_t ldc) {
    by_type_and_width<Rows, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1>(
        type, w == kW, M, nb, act, corr, panel, w, C, ldc);
}

#pragma GCC pop_options

}  // namespace dg::kernels::panels

#endif
