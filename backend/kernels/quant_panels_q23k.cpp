// q2_K and q3_K weights in the panels (quant_panels.h): the k-quants of
// llama.cpp's Q2_K and Q3_K_* files (and a Q2_K file's q3_K tensors where a
// row's length does not take q2_K's super-blocks). A super-block of 256
// values a row is 16 groups of 16 with 2-bit values (quant_blocks.h,
// BlockQ2_K: a 4-bit scale and minimum a group, d and dmin; BlockQ3_K: a
// third bit a value, a 6-bit scale a group, d). In a panel a super-block is
// its w f16 d (q2_K: and w dmin), its bytes of scales as fields of w bytes
// (q2_K 16, q3_K 12), then per activation block b of 32 values, q3_K: a
// chunk of w rows x 4 bytes whose byte i holds at bit 2 q + h the third bit
// of the block's value 16 h + 4 q + i, then 2 chunks whose chunk q / 2 holds
// at bits 4 (q % 2) and 4 (q % 2) + 2 of byte i the 2 bits of values 4 q + i
// (group 2 b) and 16 + 4 q + i (group 2 b + 1). Per block and row the two
// groups' integer sums (values as unsigned u = 2 bits + 4 x third bit, less
// 4 times the group's sum of activations for q3_K: half and sum,
// quant_panels_tile.h) are scaled in integers, sc_0 s_0 + sc_1 s_1 (exact: at
// most 2 x 32 x 16 x 4 x 128 < 2^24), then acc = fma(float(sum), d * d_a,
// acc), and for q2_K acc = fma(-float(m_0 h_0 + m_1 h_1), dmin * d_a, acc)
// (h: the groups' activation sums), in every variant, so all give the same
// bits. With AVX-512 VNNI: vpdpbusd, 4 rows x 32 outputs a tile, q3_K's
// third bits tested into a mask under which 4 is added; with AVX2:
// vpmaddubsw, 2 rows x 32 outputs, a group's products summed in 16 bits and
// scaled by vpmaddwd; both prefetch the data 8 KiB ahead into L2. The third
// bits as bytes (not as q5's masks of 64 bits): the AVX2 tile shifts one into
// place in 2 operations instead of spreading bits into bytes in 5 (dg_bench,
// 1536x576 from memory, AVX2: 1 row 47 -> 40 us, 8 rows 211 -> 186, 32 rows
// 842 -> 710; VNNI 1 row 32 -> 26, the rest level).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

#include "quant_panels_simd.h"

#ifdef DG_QUANT_PANELS_X86
#include <immintrin.h>
#endif

namespace dg::kernels::panels {

namespace {

// the chunks of block b: q3_K's third bits, the 2 bits of values 4 q + i and 16 + 4 q + i; their shifts
template <bool Q3>
constexpr int crumb_chunk(int b, int q) { return Q3 ? 3 * b + 1 + q / 2 : 2 * b + q / 2; }
constexpr int third_chunk(int b) { return 3 * b; }
constexpr int crumb_shift(int q, int h) { return 4 * (q % 2) + 2 * h; }
constexpr int third_shift(int q, int h) { return 2 * q + h; }

// ggml's value v of a super-block: the byte of qs holding its 2 bits and their shift, its hmask bit
inline size_t qs_at(int v) { return size_t(32 * (v / 128) + v % 32); }
inline int qs_shift(int v) { return 2 * (v % 128 / 32); }

float f16_at(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return ggml_fp16_to_fp32(h);
}

// value r < 32 of block b: its q, h, i
struct Place {
    int q, h, i;
};
inline Place place_of(int r) { return Place{r % 16 / 4, r / 16, r % 4}; }

}  // namespace

void q23k_values_to_panel(ggml_type type, const uint8_t* values, uint8_t* chunks, int64_t w, int64_t j) {
    const bool q3 = type == GGML_TYPE_Q3_K;
    const uint8_t* qs = q3 ? values + offsetof(BlockQ3_K, qs) - offsetof(BlockQ3_K, hmask) : values;
    auto byte = [&](int chunk, int i) -> uint8_t& { return chunks[size_t(chunk) * 4 * size_t(w) + 4 * size_t(j) + size_t(i)]; };
    for (int c = 0; c < format_of(type).chunks; ++c)
        for (int i = 0; i < 4; ++i) byte(c, i) = 0;
    for (int v = 0; v < 256; ++v) {
        const int b = v / 32;
        const Place p = place_of(v % 32);
        const int crumb = (qs[qs_at(v)] >> qs_shift(v)) & 3;
        byte(q3 ? crumb_chunk<true>(b, p.q) : crumb_chunk<false>(b, p.q), p.i) |= uint8_t(crumb << crumb_shift(p.q, p.h));
        if (q3) byte(third_chunk(b), p.i) |= uint8_t(((values[v % 32] >> (v / 32)) & 1) << third_shift(p.q, p.h));
    }
}

void q23k_values_from_panel(ggml_type type, const uint8_t* chunks, int64_t w, int64_t j, uint8_t* values) {
    const bool q3 = type == GGML_TYPE_Q3_K;
    uint8_t* qs = q3 ? values + offsetof(BlockQ3_K, qs) - offsetof(BlockQ3_K, hmask) : values;
    auto byte = [&](int chunk, int i) { return chunks[size_t(chunk) * 4 * size_t(w) + 4 * size_t(j) + size_t(i)]; };
    std::memset(values, 0, q3 ? 96 : 64);
    for (int v = 0; v < 256; ++v) {
        const int b = v / 32;
        const Place p = place_of(v % 32);
        const int crumb = (byte(q3 ? crumb_chunk<true>(b, p.q) : crumb_chunk<false>(b, p.q), p.i) >> crumb_shift(p.q, p.h)) & 3;
        qs[qs_at(v)] = uint8_t(qs[qs_at(v)] | crumb << qs_shift(v));
        if (q3) values[v % 32] = uint8_t(values[v % 32] | ((byte(third_chunk(b), p.i) >> third_shift(p.q, p.h)) & 1) << (v / 32));
    }
}

void panel_q23k_portable(ggml_type type, int64_t M, int64_t nb, const ActBlock* act, const int32_t* sum,
                         const int32_t* half, const uint8_t* panel, int64_t w, int64_t cols, float* C, int64_t ldc) {
    const Format fm = format_of(type);
    const bool q3 = type == GGML_TYPE_Q3_K;
    for (int64_t m = 0; m < M; ++m) {
        float acc[kW] = {};
        for (int64_t sb = 0; sb < nb / 8; ++sb) {
            const uint8_t* blk = panel + size_t(sb) * size_t(w) * size_t(fm.block_bytes);
            for (int64_t j = 0; j < w; ++j) {
                auto byte = [&](int t) { return int(blk[byte_field_offset(fm, w) + size_t(t) * size_t(w) + size_t(j)]); };
                auto chunk = [&](int c, int i) { return int(blk[chunk_offset(fm, w, c) + 4 * size_t(j) + size_t(i)]); };
                const float d = f16_at(blk + field_offset(w, 0) + 2 * j);
                for (int b = 0; b < 8; ++b) {
                    const int64_t at = m * nb + 8 * sb + b;
                    const ActBlock& a = act[at];
                    const int32_t h0 = half[at], h1 = sum[at] - half[at];
                    int32_t s[2] = {q3 ? -4 * h0 : 0, q3 ? -4 * h1 : 0};
                    for (int r = 0; r < 32; ++r) {
                        const Place p = place_of(r);
                        int u = (chunk(q3 ? crumb_chunk<true>(b, p.q) : crumb_chunk<false>(b, p.q), p.i) >> crumb_shift(p.q, p.h)) & 3;
                        if (q3) u |= ((chunk(third_chunk(b), p.i) >> third_shift(p.q, p.h)) & 1) << 2;
                        s[p.h] += u * a.qs[r];
                    }
                    int sc[2];
                    for (int g = 0; g < 2; ++g) {
                        if (q3) q3_k_scale(2 * b + g, byte, sc[g]);
                        sc[g] = q3 ? sc[g] - 32 : byte(2 * b + g) & 15;
                    }
                    acc[j] = std::fma(float(sc[0] * s[0] + sc[1] * s[1]), d * a.d, acc[j]);
                    if (!q3) {
                        const int32_t ms = (byte(2 * b) >> 4) * h0 + (byte(2 * b + 1) >> 4) * h1;
                        acc[j] = std::fma(-float(ms), f16_at(blk + field_offset(w, 1) + 2 * j) * a.d, acc[j]);
                    }
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

// C[MR rows, w] = one q2_K or q3_K panel (T) times MR activation rows (rows nb blocks apart). Full: w = 32.
template <ggml_type T, int MR, bool Full>
void tile_vnni(int64_t nb, const ActBlock* act, const int32_t* sum, const int32_t* half, const uint8_t* panel,
               int64_t w, float* C, int64_t ldc) {
    constexpr Format kFm = format_of(T);
    constexpr bool q3 = T == GGML_TYPE_Q3_K;
    const int64_t width = Full ? kW : w;
    const size_t bs = size_t(width) * kFm.block_bytes, c0 = chunk_offset(kFm, width, 0), cs = 4 * size_t(width);
    const size_t sf = byte_field_offset(kFm, width);
    const __mmask16 mask[2] = {Full ? __mmask16(0xFFFF) : lanes16(w), Full ? __mmask16(0xFFFF) : lanes16(w - 16)};
    const __m512i three = _mm512_set1_epi8(3), four = _mm512_set1_epi8(4);
    __m512 f[MR][2];
    for (int m = 0; m < MR; ++m) f[m][0] = f[m][1] = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nb / 8; ++sb) {
        const uint8_t* blk = panel + size_t(sb) * bs;
        __m512 d[2], dmin[2];
        for (int x = 0; x < 2; ++x) {
            d[x] = half16<Full>(blk + field_offset(width, 0) + 32 * x, mask[x]);
            dmin[x] = q3 ? d[x] : half16<Full>(blk + field_offset(width, 1) + 32 * x, mask[x]);
        }
        for (int b = 0; b < 8; ++b) {
            const int64_t at = 8 * sb + b;  // row m's block: at + m * nb
            // an eighth of the super-block's bytes a block, kPrefetchAhead ahead, into L2
            for (size_t l = 0; l < bs / 8; l += 64)
                _mm_prefetch(reinterpret_cast<const char*>(blk + size_t(b) * (bs / 8) + kPrefetchAhead + l), _MM_HINT_T1);
            __m512i s[MR][2][2];  // [row][half of the panel][group]
            for (int m = 0; m < MR; ++m) {
                const int32_t h0 = half[at + m * nb], h1 = sum[at + m * nb] - h0;
                for (int x = 0; x < 2; ++x) {
                    s[m][x][0] = _mm512_set1_epi32(q3 ? -4 * h0 : 0);
                    s[m][x][1] = _mm512_set1_epi32(q3 ? -4 * h1 : 0);
                }
            }
            __m512i third[2];  // q3_K: the block's third bits, 16 rows a half
            if constexpr (q3)
                for (int x = 0; x < 2; ++x) {
                    third[x] = chunk64<Full>(blk + c0 + size_t(third_chunk(b)) * cs + 64 * x, mask[x]);
                }
#pragma GCC unroll 4
            for (int q = 0; q < 4; ++q) {
                const uint8_t* p = blk + c0 + size_t(crumb_chunk<q3>(b, q)) * cs;
                __m512i u[2][2];  // [half of the panel][group]
                for (int x = 0; x < 2; ++x) {
                    const __m512i c = chunk64<Full>(p + 64 * x, mask[x]);
                    for (int h = 0; h < 2; ++h) {
                        const int shift = crumb_shift(q, h);
                        u[x][h] = _mm512_and_si512(shift ? _mm512_srli_epi16(c, unsigned(shift)) : c, three);
                        if constexpr (q3) {
                            const __mmask64 k = _mm512_test_epi8_mask(third[x], _mm512_set1_epi8(char(1 << third_shift(q, h))));
                            u[x][h] = _mm512_mask_add_epi8(u[x][h], k, u[x][h], four);
                        }
                    }
                }
                dot_two_groups<MR>(s, u, act, at, nb, q);
            }
            for (int x = 0; x < 2; ++x) {
                auto bytes = [&](int t) { return bytes16<Full>(blk + sf + size_t(t) * size_t(width) + 16 * size_t(x), mask[x]); };
                v16si sc[2], mn[2];
                for (int g = 0; g < 2; ++g) {
                    if constexpr (q3) {
                        q3_k_scale(2 * b + g, bytes, sc[g]);
                        sc[g] -= 32;
                    } else {
                        const v16si v = bytes(2 * b + g);
                        sc[g] = v & 15;
                        mn[g] = v >> 4;
                    }
                }
                for (int m = 0; m < MR; ++m) {
                    const __m512 da = _mm512_set1_ps(act[at + m * nb].d);
                    const __m512i isum = _mm512_add_epi32(_mm512_mullo_epi32(s[m][x][0], __m512i(sc[0])),
                                                          _mm512_mullo_epi32(s[m][x][1], __m512i(sc[1])));
                    f[m][x] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(__mmask16(0xFFFF), isum), _mm512_mul_ps(d[x], da), f[m][x]);
                    if constexpr (!q3) {
                        const int32_t h0 = half[at + m * nb], h1 = sum[at + m * nb] - h0;
                        const __m512i ms = _mm512_add_epi32(_mm512_mullo_epi32(__m512i(mn[0]), _mm512_set1_epi32(h0)),
                                                            _mm512_mullo_epi32(__m512i(mn[1]), _mm512_set1_epi32(h1)));
                        f[m][x] = _mm512_fnmadd_ps(_mm512_maskz_cvtepi32_ps(__mmask16(0xFFFF), ms), _mm512_mul_ps(dmin[x], da), f[m][x]);
                    }
                }
            }
        }
    }
    store_tile(C, ldc, f, mask[0], mask[1]);
}

struct RowsVnni {
    template <ggml_type T, bool Full>
    static void run(int64_t M, int64_t nb, const ActBlock* a, const int32_t* s, const int32_t* h, const uint8_t* panel,
                    int64_t w, float* C, int64_t ldc) {
        row_tiles<4>(M, [&](auto r, int64_t m) {  // (4 rows: 16 sums and 8 accumulators of 32 registers)
            tile_vnni<T, decltype(r)::value, Full>(nb, a + m * nb, s + m * nb, h + m * nb, panel, w, C + m * ldc, ldc);
        });
    }
};

#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

// x (int32 lanes, |x| < 2^15) in both 16-bit halves of each lane: what vpmaddwd multiplies a pair by
inline __m256i pair16(__m256i x) { return _mm256_mullo_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0xFFFF)), _mm256_set1_epi32(0x10001)); }

// C[MR rows, w] = one q2_K or q3_K panel (T) times MR activation rows. Full: w = 32; else the lanes past w
// are neither read nor written (the panel's fields and scale bytes copied, padded, a super-block at a time).
// A group's 16 products a lane are summed in 16 bits (at most 4 x 2 x 7 x 128 = 7168, with q3_K's -4 h
// in the low half: 15360), then vpmaddwd by the group's scale in both halves gives sc s in 32 bits.
template <ggml_type T, int MR, bool Full>
void tile_avx2(int64_t nb, const ActBlock* act, const int32_t* sum, const int32_t* half, const uint8_t* panel,
               int64_t w, float* C, int64_t ldc) {
    constexpr Format kFm = format_of(T);
    constexpr bool q3 = T == GGML_TYPE_Q3_K;
    constexpr int V = 4;  // a panel's 32 outputs in 4 vectors
    const int64_t width = Full ? kW : w;
    const size_t bs = size_t(width) * kFm.block_bytes, c0 = chunk_offset(kFm, width, 0), cs = 4 * size_t(width);
    __m256i mask[V];
    for (int v = 0; v < V; ++v) mask[v] = lane_mask(w - 8 * v);
    const __m256i three = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4);
    __m256 f[MR][V];
    for (int m = 0; m < MR; ++m)
        for (int v = 0; v < V; ++v) f[m][v] = _mm256_setzero_ps();
    alignas(32) uint8_t pad[byte_field_offset(kFm, kW) + 16 * kW] = {};
    for (int64_t sb = 0; sb < nb / 8; ++sb) {
        const uint8_t* blk = panel + size_t(sb) * bs;
        const uint8_t* head = blk;  // the fields and byte fields, `stride` rows each
        int64_t stride = width;
        if constexpr (!Full) {
            pad_head(kFm, blk, w, pad);
            head = pad;
            stride = kW;
        }
        auto field = [&](int i, int v) {
            return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(head + 2 * stride * i + 16 * v)));
        };
        auto bytes = [&](int t, int v) {
            const uint8_t* p = head + 2 * stride * kFm.fields + size_t(t) * size_t(stride) + 8 * size_t(v);
            return v8si(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
        };
        for (int b = 0; b < 8; ++b) {
            const int64_t at = 8 * sb + b;  // row m's block: at + m * nb
            for (size_t l = 0; l < bs / 8; l += 64)  // (as the VNNI tile)
                _mm_prefetch(reinterpret_cast<const char*>(blk + size_t(b) * (bs / 8) + kPrefetchAhead + l), _MM_HINT_T1);
            __m256i isum[MR][V];
            for (int m = 0; m < MR; ++m)
                for (int v = 0; v < V; ++v) isum[m][v] = _mm256_setzero_si256();
            for (int h = 0; h < 2; ++h) {
                __m256i t[MR][V];
                for (int m = 0; m < MR; ++m) {
                    const int32_t hs = h ? sum[at + m * nb] - half[at + m * nb] : half[at + m * nb];
                    for (int v = 0; v < V; ++v) t[m][v] = _mm256_set1_epi32(q3 ? (-4 * hs) & 0xFFFF : 0);
                }
#pragma GCC unroll 4
                for (int q = 0; q < 4; ++q) {
                    auto load = [&](int chunk, int v) {
                        const uint8_t* p = blk + c0 + size_t(chunk) * cs + 32 * v;
                        return Full ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))
                                    : _mm256_maskload_epi32(reinterpret_cast<const int*>(p), mask[v]);
                    };
                    const int shift = crumb_shift(q, h), up = third_shift(q, h) - 2;  // (the third bit to bit 2)
                    __m256i u[V];
                    for (int v = 0; v < V; ++v) {
                        u[v] = load(crumb_chunk<q3>(b, q), v);
                        u[v] = _mm256_and_si256(shift ? _mm256_srli_epi16(u[v], shift) : u[v], three);
                        if constexpr (q3) {
                            __m256i t3 = load(third_chunk(b), v);
                            t3 = up > 0 ? _mm256_srli_epi16(t3, up) : up < 0 ? _mm256_slli_epi16(t3, -up) : t3;
                            u[v] = _mm256_or_si256(u[v], _mm256_and_si256(t3, four));
                        }
                    }
                    for (int m = 0; m < MR; ++m) {
                        const __m256i a = bcast4_256(act[at + m * nb].qs + 16 * h + 4 * q);
                        for (int v = 0; v < V; ++v) t[m][v] = _mm256_add_epi16(t[m][v], _mm256_maddubs_epi16(u[v], a));
                    }
                }
                for (int v = 0; v < V; ++v) {
                    v8si sc;
                    if constexpr (q3) {
                        q3_k_scale(2 * b + h, [&](int i) { return bytes(i, v); }, sc);
                        sc -= 32;
                    } else {
                        sc = bytes(2 * b + h, v) & 15;
                    }
                    const __m256i scale = pair16(__m256i(sc));
                    for (int m = 0; m < MR; ++m) isum[m][v] = _mm256_add_epi32(isum[m][v], _mm256_madd_epi16(t[m][v], scale));
                }
            }
            for (int v = 0; v < V; ++v) {
                const __m256 d = field(0, v);
                __m256i mins = _mm256_setzero_si256();
                if constexpr (!q3)  // (m_0, m_1) in the halves of each lane
                    mins = _mm256_or_si256(__m256i(bytes(2 * b, v) >> 4), _mm256_slli_epi32(__m256i(bytes(2 * b + 1, v) >> 4), 16));
                for (int m = 0; m < MR; ++m) {
                    const __m256 da = _mm256_set1_ps(act[at + m * nb].d);
                    f[m][v] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[m][v]), _mm256_mul_ps(d, da), f[m][v]);
                    if constexpr (!q3) {
                        const int32_t h0 = half[at + m * nb], h1 = sum[at + m * nb] - h0;
                        const __m256i hs = _mm256_set1_epi32(int32_t((uint32_t(h0) & 0xFFFF) | uint32_t(h1) << 16));
                        f[m][v] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(mins, hs)), _mm256_mul_ps(field(1, v), da), f[m][v]);
                    }
                }
            }
        }
    }
    store_tile<Full>(C, ldc, f, mask);
}

struct RowsAvx2 {
    template <ggml_type T, bool Full>
    static void run(int64_t M, int64_t nb, const ActBlock* a, const int32_t* s, const int32_t* h, const uint8_t* panel,
                    int64_t w, float* C, int64_t ldc) {
        row_tiles<2>(M, [&](auto r, int64_t m) {
            tile_avx2<T, decltype(r)::value, Full>(nb, a + m * nb, s + m * nb, h + m * nb, panel, w, C + m * ldc, ldc);
        });
    }
};

#pragma GCC pop_options

}  // namespace

void panel_q23k_avx2(ggml_type type, int64_t M, int64_t nb, const ActBlock* act, const int32_t* sum, const int32_t* half,
                     const uint8_t* panel, int64_t w, float* C, int64_t ldc) {
    by_type_and_width<RowsAvx2, GGML_TYPE_Q2_K, GGML_TYPE_Q3_K>(type, w == kW, M, nb, act, sum, half, panel, w, C, ldc);
}

void panel_q23k_vnni(ggml_type type, int64_t M, int64_t nb, const ActBlock* act, const int32_t* sum, const int32_t* half,
                     const uint8_t* panel, int64_t w, float* C, int64_t ldc) {
    by_type_and_width<RowsVnni, GGML_TYPE_Q2_K, GGML_TYPE_Q3_K>(type, w == kW, M, nb, act, sum, half, panel, w, C, ldc);
}

#endif

}  // namespace dg::kernels::panels
