// quant_panels.h's product with AVX2 (no VNNI): vpmaddubsw multiplies a
// chunk's 32 bytes, 8 outputs x 4 values, with 4 values of an activation row
// broadcast, into 16-bit sums of pairs.
// - q4_0, q4_1: the nibbles (0..15) are the unsigned operand as stored; a
//   pair sums to at most 2 x 15 x 128 = 3840 in magnitude, so the block's 8
//   products (4 chunks, low and high nibbles) add up in 16 bits (at most
//   30720) and widen once a block (vpmaddwd); q5_0, q5_1: the nibbles with
//   their fifth bits (0..31), widened every 2 chunks (at most 31744);
// - q8_0: the stored byte - 128 is the weight v (-128..127); |v| is the
//   unsigned operand and the activation takes v's sign (vpsignb), so a pair
//   is at most 2 x 128 x 127 = 32512, widened every chunk. The sum is v * a
//   itself: the panels' offset is not taken off (corr is not read).
// Tiles of 2 rows x a panel's 32 outputs (4 vectors): from memory 1.2-1.9x
// faster at 2-4 rows than 3 rows x 16 outputs (each half of the panel in turn,
// 64 of every 128 bytes a pass), 0.83-1.18x at 7 and within 2-5% at 32 (Zen 4,
// AVX2 forced).
#include <algorithm>
#include <cstring>

#include "quant_panels_simd.h"

#ifdef DG_QUANT_PANELS_X86

#include <immintrin.h>

namespace dg::kernels::panels {

namespace {

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

constexpr int kTileRows = 2;  // 8 sums and 8 accumulators of 16 registers
constexpr int V = 4;          // a panel's 32 outputs in 4 vectors

// C[MR rows, w] = one panel of type T times MR activation rows (act, corr: rows nb apart).
// Full: the panel is 32 rows wide; else w < 32 and the lanes past w are neither read nor written.
template <ggml_type T, int MR, bool Full>
void tile(int64_t nb, const ActBlock* act, const int32_t* corr, const uint8_t* panel, int64_t w, float* C,
          int64_t ldc) {
    constexpr Format fm = format_of(T);
    const int64_t width = Full ? kW : w;
    const size_t bs = size_t(width) * fm.block_bytes, c0 = chunk_offset(fm, width, 0), cs = 4 * size_t(width);
    __m256i mask[V];
    for (int v = 0; v < V; ++v) mask[v] = lane_mask(w - 8 * v);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 f[MR][V];
    for (int m = 0; m < MR; ++m)
        for (int v = 0; v < V; ++v) f[m][v] = _mm256_setzero_ps();
    alignas(32) uint16_t fields[2][kW] = {};  // a narrow panel's f16 fields, padded to 32
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* blk = panel + size_t(b) * bs;
        auto load = [&](const uint8_t* p, int v) {
            return Full ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))
                        : _mm256_maskload_epi32(reinterpret_cast<const int*>(p), mask[v]);
        };
        __m256i s[MR][V];
        if constexpr (T == GGML_TYPE_Q8_0) {
            for (int m = 0; m < MR; ++m)
                for (int v = 0; v < V; ++v) s[m][v] = _mm256_setzero_si256();
#pragma GCC unroll 8
            for (int q = 0; q < fm.chunks; ++q) {
                const uint8_t* g = blk + c0 + q * cs;
                __m256i wv[V], wa[V];
                for (int v = 0; v < V; ++v) {
                    wv[v] = _mm256_xor_si256(load(g + 32 * v, v), _mm256_set1_epi8(char(0x80)));
                    wa[v] = _mm256_abs_epi8(wv[v]);
                }
                for (int m = 0; m < MR; ++m) {
                    const __m256i a = bcast4_256(act[m * nb + b].qs + 4 * q);
                    for (int v = 0; v < V; ++v) {
                        const __m256i p = _mm256_maddubs_epi16(wa[v], _mm256_sign_epi8(a, wv[v]));
                        s[m][v] = _mm256_add_epi32(s[m][v], _mm256_madd_epi16(p, ones));
                    }
                }
            }
        } else {  // low nibbles: values 4q.., high nibbles: values 16 + 4q..
            const __m256i nibble = _mm256_set1_epi8(0x0F);
            // q5: group g's fifth bits of the 8 rows of vector v (quant_panels_tile.h)
            const uint8_t* area = blk + bits_offset(fm, width);
            auto fifth = [&](int g, int v) {
                uint32_t k;
                if (Full) std::memcpy(&k, area + 16 * g + 4 * v, 4);
                else k = uint32_t(read_bits(area, fifth_bit(width, g, 8 * v, 0), 4 * int(std::min<int64_t>(8, width - 8 * v))));
                return sixteens(k);
            };
            // the 16-bit sums widen every `widen` chunks: 4 x 2 x 15 x 128 (q4) or 2 x 2 x 2 x 31 x 128
            // (q5) = 30720 or 31744 at most
            constexpr int widen = fm.bits ? 2 : 4;
            __m256i t[MR][V];
            for (int m = 0; m < MR; ++m) {
                const __m256i c = _mm256_set1_epi32(corr[m * nb + b]);
                for (int v = 0; v < V; ++v) {
                    t[m][v] = _mm256_setzero_si256();
                    s[m][v] = c;
                }
            }
#pragma GCC unroll 4
            for (int q = 0; q < fm.chunks; ++q) {
                const uint8_t* g = blk + c0 + q * cs;
                __m256i lo[V], hi[V];
                for (int v = 0; v < V; ++v) {
                    const __m256i x = load(g + 32 * v, v);
                    lo[v] = _mm256_and_si256(x, nibble);
                    hi[v] = _mm256_and_si256(_mm256_srli_epi16(x, 4), nibble);
                    if constexpr (fm.bits != 0) {
                        lo[v] = _mm256_or_si256(lo[v], fifth(2 * q, v));
                        hi[v] = _mm256_or_si256(hi[v], fifth(2 * q + 1, v));
                    }
                }
                for (int m = 0; m < MR; ++m) {
                    const __m256i alo = bcast4_256(act[m * nb + b].qs + 4 * q), ahi = bcast4_256(act[m * nb + b].qs + 16 + 4 * q);
                    for (int v = 0; v < V; ++v)
                        t[m][v] = _mm256_add_epi16(t[m][v], _mm256_add_epi16(_mm256_maddubs_epi16(lo[v], alo),
                                                                              _mm256_maddubs_epi16(hi[v], ahi)));
                }
                if ((q + 1) % widen == 0)
                    for (int m = 0; m < MR; ++m)
                        for (int v = 0; v < V; ++v) {
                            s[m][v] = _mm256_add_epi32(s[m][v], _mm256_madd_epi16(t[m][v], ones));
                            t[m][v] = _mm256_setzero_si256();
                        }
            }
        }
        const uint16_t* field0 = reinterpret_cast<const uint16_t*>(blk);
        const uint16_t* field1 = reinterpret_cast<const uint16_t*>(blk + field_offset(width, 1));
        if constexpr (!Full) {
            std::memcpy(fields[0], field0, 2 * size_t(w));
            if constexpr (fm.fields == 2) std::memcpy(fields[1], field1, 2 * size_t(w));
            field0 = fields[0];
            field1 = fields[1];
        }
        auto half = [&](const uint16_t* p, int v) {
            return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8 * v)));
        };
        for (int v = 0; v < V; ++v) {
            const __m256 d = half(field0, v);
            for (int m = 0; m < MR; ++m)
                f[m][v] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[m][v]), _mm256_mul_ps(d, _mm256_set1_ps(act[m * nb + b].d)),
                                          f[m][v]);
            if constexpr (fm.fields == 2) {  // q4_1, q5_1: the minimum times the block's sum
                const __m256 mn = half(field1, v);
                for (int m = 0; m < MR; ++m) f[m][v] = _mm256_fmadd_ps(mn, _mm256_set1_ps(act[m * nb + b].s), f[m][v]);
            }
        }
    }
    store_tile<Full>(C, ldc, f, mask);
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

void panel_avx2(ggml_type type, int64_t M, int64_t nb, const ActBlock* act, const int32_t* corr,
                const uint8_t* panel, int64_t w, float* C, int64_t ldc) {
    by_type_and_width<Rows, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1>(
        type, w == kW, M, nb, act, corr, panel, w, C, ldc);
}

#pragma GCC pop_options

}  // namespace dg::kernels::panels

#endif
