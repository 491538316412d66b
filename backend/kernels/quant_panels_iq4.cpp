// iq4_nl and iq4_xs weights in the panels (quant_panels.h): 4-bit indices
// into a table of 16 int8 values (quant_blocks.h, kIq4Values), the types of
// llama.cpp's IQ4_NL and IQ4_XS files. An iq4_nl block is q4_0's (d, 16 bytes
// of nibbles) and is laid out as q4_0's: d, then 4 chunks. An iq4_xs
// super-block is 8 such blocks of 32 under one d, each with a 6-bit scale
// (ls - 32) in 6 bytes: in a panel its w d, the 6 bytes as 6 fields of w
// bytes, then 32 chunks, chunk 4 ib + q holding sub-block ib's qs[4 q .. + 3]
// (low nibbles: values 4 q.., high nibbles: values 16 + 4 q..). A group of 32
// values (a block, or a sub-block) sums its table values times the
// activations' 8-bit values exactly in integers, then
// acc = fma(float(sum), dl * d_a, acc) with dl = d (iq4_nl) or
// d * float(ls - 32) (iq4_xs, exact: 11 by 6 bits), in every variant, so all
// give the same bits. With AVX-512 VNNI the nibbles index the table + 128
// (vpshufb: unsigned operands of vpdpbusd, and -128 times the block's sum,
// corr, takes the offset off), 6 rows x 32 outputs a tile; with AVX2 (iq4_xs
// only: ggml's repacked iq4_nl product was faster than this tile) they index
// the table itself and the products go as q8_0's (|v| times the activation
// with v's sign, vpmaddubsw: 2 x 127 x 127 at most a pair, widened at once),
// 2 rows x 32 outputs.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant_panels_simd.h"

#ifdef DG_QUANT_PANELS_X86
#include <immintrin.h>
#endif

namespace dg::kernels::panels {

namespace {

float f16_at(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return ggml_fp16_to_fp32(h);
}

}  // namespace

void panel_iq4_portable(ggml_type type, int64_t M, int64_t nb, const ActBlock* act, const uint8_t* panel, int64_t w,
                        int64_t cols, float* C, int64_t ldc) {
    const Format fm = format_of(type);
    const int groups = fm.values / kQuantBlock;  // blocks of 32 a block of the type: 1 or 8
    for (int64_t m = 0; m < M; ++m) {
        float acc[kW] = {};
        for (int64_t sb = 0; sb < nb / groups; ++sb) {
            const uint8_t* blk = panel + size_t(sb) * size_t(w) * size_t(fm.block_bytes);
            for (int64_t j = 0; j < w; ++j) {
                auto byte = [&](int t) { return int(blk[byte_field_offset(fm, w) + size_t(t) * size_t(w) + size_t(j)]); };
                const float d = f16_at(blk + field_offset(w, 0) + 2 * j);
                for (int g = 0; g < groups; ++g) {
                    const ActBlock& a = act[m * nb + sb * groups + g];
                    int32_t s = 0;
                    for (int q = 0; q < 4; ++q)
                        for (int i = 0; i < 4; ++i) {
                            const int v = blk[chunk_offset(fm, w, 4 * g + q) + 4 * size_t(j) + i];
                            s += kIq4Values[v & 15] * a.qs[4 * q + i] + kIq4Values[v >> 4] * a.qs[16 + 4 * q + i];
                        }
                    int ls = 32;  // (iq4_nl: d alone)
                    if (fm.byte_fields) iq4_xs_scale(g, byte, ls);
                    const float dl = fm.byte_fields ? d * float(ls - 32) : d;
                    acc[j] = std::fma(float(s), dl * a.d, acc[j]);
                }
            }
        }
        std::copy(acc, acc + cols, C + m * ldc);
    }
}

#ifdef DG_QUANT_PANELS_X86

namespace {

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")

// C[MR rows, w] = one iq4_nl or iq4_xs panel (T) times MR activation rows (act, corr: rows nb blocks apart).
// Full: w = 32. With one row the low and high nibbles' sums go to two registers (vpdpbusd's latency).
template <ggml_type T, int MR, bool Full>
void tile_vnni(int64_t nb, const ActBlock* act, const int32_t* corr, const uint8_t* panel, int64_t w, float* C,
               int64_t ldc) {
    constexpr Format fm = format_of(T);
    constexpr int G = fm.values / kQuantBlock;
    constexpr int CH = MR == 1 ? 2 : 1;
    const int64_t width = Full ? kW : w;
    const size_t bs = size_t(width) * fm.block_bytes, c0 = chunk_offset(fm, width, 0), cs = 4 * size_t(width);
    const size_t sf = byte_field_offset(fm, width);
    const __mmask16 lo = Full ? __mmask16(0xFFFF) : lanes16(w), hi = Full ? __mmask16(0xFFFF) : lanes16(w - 16);
    const __m512i nibble = _mm512_set1_epi8(0x0F);
    alignas(16) uint8_t table[16];
    for (int i = 0; i < 16; ++i) table[i] = uint8_t(kIq4Values[i] + 128);
    const __m512i lut = _mm512_maskz_broadcast_i32x4(__mmask16(0xFFFF), _mm_load_si128(reinterpret_cast<const __m128i*>(table)));
    __m512 f[MR][2];
    for (int m = 0; m < MR; ++m) f[m][0] = f[m][1] = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nb / G; ++sb) {
        const uint8_t* blk = panel + size_t(sb) * bs;
        for (int g = 0; g < G; ++g) {
            const int64_t b = sb * G + g;  // row m's block of 32: b + m * nb
            __m512i s[MR][2][CH];
            for (int m = 0; m < MR; ++m)
                for (int h = 0; h < 2; ++h) {
                    s[m][h][0] = _mm512_set1_epi32(corr[m * nb + b]);
                    if constexpr (CH == 2) s[m][h][1] = _mm512_setzero_si512();
                }
#pragma GCC unroll 4
            for (int q = 0; q < 4; ++q) {
                const uint8_t* p = blk + c0 + size_t(4 * g + q) * cs;
                const __m512i w0 = chunk64<Full>(p, lo), w1 = chunk64<Full>(p + 64, hi);
                const __m512i l0 = _mm512_shuffle_epi8(lut, _mm512_and_si512(w0, nibble));
                const __m512i l1 = _mm512_shuffle_epi8(lut, _mm512_and_si512(w1, nibble));
                const __m512i h0 = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(w0, 4), nibble));
                const __m512i h1 = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(w1, 4), nibble));
                for (int m = 0; m < MR; ++m) {
                    const __m512i alo = bcast4_512(act[m * nb + b].qs + 4 * q), ahi = bcast4_512(act[m * nb + b].qs + 16 + 4 * q);
                    s[m][0][0] = _mm512_dpbusd_epi32(s[m][0][0], l0, alo);
                    s[m][1][0] = _mm512_dpbusd_epi32(s[m][1][0], l1, alo);
                    s[m][0][CH - 1] = _mm512_dpbusd_epi32(s[m][0][CH - 1], h0, ahi);
                    s[m][1][CH - 1] = _mm512_dpbusd_epi32(s[m][1][CH - 1], h1, ahi);
                }
            }
            for (int h = 0; h < 2; ++h) {  // the group's dl for the 16 rows of half h
                const __mmask16 k = h ? hi : lo;
                __m512 dl = half16<Full>(blk + 32 * size_t(h), k);
                if constexpr (fm.byte_fields != 0) {
                    auto bytes = [&](int t) { return bytes16<Full>(blk + sf + size_t(t) * size_t(width) + 16 * size_t(h), k); };
                    v16si ls;
                    iq4_xs_scale(g, bytes, ls);
                    dl = _mm512_mul_ps(dl, _mm512_maskz_cvtepi32_ps(__mmask16(0xFFFF), __m512i(ls - 32)));
                }
                for (int m = 0; m < MR; ++m) {
                    __m512i sum = s[m][h][0];
                    if constexpr (CH == 2) sum = _mm512_add_epi32(sum, s[m][h][1]);
                    f[m][h] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(__mmask16(0xFFFF), sum),
                                              _mm512_mul_ps(dl, _mm512_set1_ps(act[m * nb + b].d)), f[m][h]);
                }
            }
        }
    }
    store_tile(C, ldc, f, lo, hi);
}

struct RowsVnni {
    template <ggml_type T, bool Full>
    static void run(int64_t M, int64_t nb, const ActBlock* a, const int32_t* c, const uint8_t* panel, int64_t w,
                    float* C, int64_t ldc) {
        row_tiles<6>(M, [&](auto r, int64_t m) {  // (6 rows: 12 sums and 12 accumulators of 32 registers)
            tile_vnni<T, decltype(r)::value, Full>(nb, a + m * nb, c + m * nb, panel, w, C + m * ldc, ldc);
        });
    }
};

#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

// C[MR rows, w] = one iq4_nl or iq4_xs panel (T) times MR activation rows. Full: w = 32; else the lanes
// past w are neither read nor written (the panel's d and scale bytes copied, padded, a block at a time).
template <ggml_type T, int MR, bool Full>
void tile_avx2(int64_t nb, const ActBlock* act, const uint8_t* panel, int64_t w, float* C, int64_t ldc) {
    constexpr Format fm = format_of(T);
    constexpr int G = fm.values / kQuantBlock;
    constexpr int V = 4;  // a panel's 32 outputs in 4 vectors
    const int64_t width = Full ? kW : w;
    const size_t bs = size_t(width) * fm.block_bytes, c0 = chunk_offset(fm, width, 0), cs = 4 * size_t(width);
    __m256i mask[V];
    for (int v = 0; v < V; ++v) mask[v] = lane_mask(w - 8 * v);
    const __m256i nibble = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4Values)));
    __m256 f[MR][V];
    for (int m = 0; m < MR; ++m)
        for (int v = 0; v < V; ++v) f[m][v] = _mm256_setzero_ps();
    alignas(32) uint8_t pad[2 * kW + 6 * kW] = {};  // a narrow panel's d and scale bytes, 32 rows wide
    for (int64_t sb = 0; sb < nb / G; ++sb) {
        const uint8_t* blk = panel + size_t(sb) * bs;
        const uint8_t* head = blk;  // d, then the byte fields, `width` rows each
        int64_t stride = width;
        if constexpr (!Full) {
            pad_head(fm, blk, w, pad);
            head = pad;
            stride = kW;
        }
        for (int g = 0; g < G; ++g) {
            const int64_t b = sb * G + g;
            __m256i s[MR][V];
            for (int m = 0; m < MR; ++m)
                for (int v = 0; v < V; ++v) s[m][v] = _mm256_setzero_si256();
#pragma GCC unroll 4
            for (int q = 0; q < 4; ++q) {
                const uint8_t* p = blk + c0 + size_t(4 * g + q) * cs;
                __m256i vl[V], vh[V];  // the table's values (signed) of the low and high nibbles
                for (int v = 0; v < V; ++v) {
                    const __m256i x = Full ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * v))
                                           : _mm256_maskload_epi32(reinterpret_cast<const int*>(p + 32 * v), mask[v]);
                    vl[v] = _mm256_shuffle_epi8(lut, _mm256_and_si256(x, nibble));
                    vh[v] = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(x, 4), nibble));
                }
                for (int m = 0; m < MR; ++m) {
                    const __m256i alo = bcast4_256(act[m * nb + b].qs + 4 * q), ahi = bcast4_256(act[m * nb + b].qs + 16 + 4 * q);
                    for (int v = 0; v < V; ++v) {
                        const __m256i pl = _mm256_maddubs_epi16(_mm256_abs_epi8(vl[v]), _mm256_sign_epi8(alo, vl[v]));
                        const __m256i ph = _mm256_maddubs_epi16(_mm256_abs_epi8(vh[v]), _mm256_sign_epi8(ahi, vh[v]));
                        s[m][v] = _mm256_add_epi32(s[m][v], _mm256_add_epi32(_mm256_madd_epi16(pl, ones), _mm256_madd_epi16(ph, ones)));
                    }
                }
            }
            for (int v = 0; v < V; ++v) {  // the group's dl for the 8 rows of vector v
                __m256 dl = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(head + 16 * v)));
                if constexpr (fm.byte_fields != 0) {
                    auto bytes = [&](int t) {
                        const uint8_t* bp = head + 2 * stride + size_t(t) * size_t(stride) + 8 * size_t(v);
                        return v8si(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(bp))));
                    };
                    v8si ls;
                    iq4_xs_scale(g, bytes, ls);
                    dl = _mm256_mul_ps(dl, _mm256_cvtepi32_ps(__m256i(ls - 32)));
                }
                for (int m = 0; m < MR; ++m)
                    f[m][v] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[m][v]), _mm256_mul_ps(dl, _mm256_set1_ps(act[m * nb + b].d)),
                                              f[m][v]);
            }
        }
    }
    store_tile<Full>(C, ldc, f, mask);
}

struct RowsAvx2 {
    template <ggml_type T, bool Full>
    static void run(int64_t M, int64_t nb, const ActBlock* a, const uint8_t* panel, int64_t w, float* C, int64_t ldc) {
        row_tiles<2>(M, [&](auto r, int64_t m) {
            tile_avx2<T, decltype(r)::value, Full>(nb, a + m * nb, panel, w, C + m * ldc, ldc);
        });
    }
};

#pragma GCC pop_options

}  // namespace

void panel_iq4_vnni(ggml_type type, int64_t M, int64_t nb, const ActBlock* act, const int32_t* corr,
                    const uint8_t* panel, int64_t w, float* C, int64_t ldc) {
    by_type_and_width<RowsVnni, GGML_TYPE_IQ4_NL, GGML_TYPE_IQ4_XS>(type, w == kW, M, nb, act, corr, panel, w, C, ldc);
}

void panel_iq4_xs_avx2(int64_t M, int64_t nb, const ActBlock* act, const uint8_t* panel, int64_t w, float* C,
                       int64_t ldc) {
    if (w == kW) RowsAvx2::run<GGML_TYPE_IQ4_XS, true>(M, nb, act, panel, w, C, ldc);
    else RowsAvx2::run<GGML_TYPE_IQ4_XS, false>(M, nb, act, panel, w, C, ldc);
}

#endif

}  // namespace dg::kernels::panels
