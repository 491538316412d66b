// q6_K weights in the panels (quant_panels.h): a super-block of 256 values
// a row is 16 groups of 16 with int8 scales, value = d * sc * (u - 32), u
// 6 bits: a low nibble in ql and 2 bits in qh (quant_blocks.h, BlockQ6_K),
// spread so that one byte serves 2 or 4 blocks of 32. In a panel a
// super-block is its w f16 d, its 16 scales as 16 fields of w bytes, then per
// activation block b of 32 values 6 chunks of w rows x 4 bytes: "low" chunk
// q < 4 the low 4 bits of values 4 q + i (low nibbles) and 16 + 4 q + i
// (high nibbles), as q4_0 lays them out, and "top" chunk r < 2 their top 2
// bits, for q = 2 r + e at bits 4 e (values 4 q + i) and 4 e + 2 (16 + 4 q +
// i); in the order top 0, low 0, low 1, top 1, low 2, low 3, the order the
// product reads them: each block's values in 24 consecutive bytes a row, read
// once (ggml's ql and qh would be read 2 and 4 times, back and forth). The
// values move one by one at packing (q6k_values_to_panel). Per block and row
// the two groups' integer sums (u times the activations' 8-bit values, less
// 32 times the group's sum of those: corr and half, quant_panels_tile.h) are
// scaled by the groups' scales in integers, sc_0 s_0 + sc_1 s_1 (exact: at
// most 2 x 16 x 32 x 127 x 128 < 2^24), then acc = fma(float(sum), d * d_a,
// acc) in every variant, so all give the same bits. With AVX-512 VNNI:
// vpdpbusd, 4 rows x 32 outputs a tile (16 sums and 8 accumulators), the data
// 8 KiB ahead prefetched into L2 (from memory at one row 1.3-1.5x faster than
// without, which read at 11 GB/s against ggml's 15: the tile's work between
// loads kept fewer lines in flight). Without VNNI q6_K weights keep their
// rows (quant_panels_take): a vpmaddubsw tile, one row at a time, took 1.6x
// ggml's time at one row and 1.2x at 128 rows, level between.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant_panels_simd.h"

#ifdef DG_QUANT_PANELS_X86
#include <immintrin.h>
#endif

namespace dg::kernels::panels {

namespace {

constexpr Format kFm = format_of(GGML_TYPE_Q6_K);
// chunk q < 4 of activation block b (low 4 bits), chunk 4 + q / 2 (top 2 bits); the top bits of the
// values of chunk q's low nibbles at bits 4 (q % 2) of its bytes, of its high nibbles 2 above
inline int low_chunk(int b, int q) { return 6 * b + 3 * (q / 2) + 1 + q % 2; }
inline int top_chunk(int b, int q) { return 6 * b + 3 * (q / 2); }

// the 6 bits of a value from its low and top chunks' bytes; high: the value of the high nibble
inline int value_of(int low, int top, int q, bool high) {
    return (high ? low >> 4 : low & 15) | ((top >> (4 * (q % 2) + 2 * high)) & 3) << 4;
}

// ggml's value v = 128 h + 32 k + l of a block's ql / qh (192 bytes): where its low 4 and top 2 bits lie
inline size_t ql_at(int v) { return size_t(64 * (v / 128) + 32 * (v % 128 / 32 % 2) + v % 32); }
inline size_t qh_at(int v) { return size_t(128 + 32 * (v / 128) + v % 32); }
inline int low_shift(int v) { return v % 128 / 32 < 2 ? 0 : 4; }
inline int top_shift(int v) { return 2 * (v % 128 / 32); }

}  // namespace

void q6k_values_to_panel(const uint8_t* q, uint8_t* chunks, int64_t w, int64_t j) {
    uint8_t u[256];
    for (int v = 0; v < 256; ++v) u[v] = uint8_t(((q[ql_at(v)] >> low_shift(v)) & 15) | ((q[qh_at(v)] >> top_shift(v)) & 3) << 4);
    auto at = [&](int chunk, int i) -> uint8_t& { return chunks[size_t(chunk) * 4 * size_t(w) + 4 * size_t(j) + size_t(i)]; };
    for (int b = 0; b < 8; ++b)
        for (int i = 0; i < 4; ++i) {
            at(top_chunk(b, 0), i) = at(top_chunk(b, 2), i) = 0;
            for (int q = 0; q < 4; ++q) {
                const int lo = u[32 * b + 4 * q + i], hi = u[32 * b + 16 + 4 * q + i];
                at(low_chunk(b, q), i) = uint8_t((lo & 15) | (hi & 15) << 4);
                at(top_chunk(b, q), i) |= uint8_t((lo >> 4) << (4 * (q % 2)) | (hi >> 4) << (4 * (q % 2) + 2));
            }
        }
}

void q6k_values_from_panel(const uint8_t* chunks, int64_t w, int64_t j, uint8_t* q) {
    auto at = [&](int chunk, int i) { return chunks[size_t(chunk) * 4 * size_t(w) + 4 * size_t(j) + size_t(i)]; };
    std::memset(q, 0, 192);
    for (int b = 0; b < 8; ++b)
        for (int qq = 0; qq < 4; ++qq)
            for (int i = 0; i < 4; ++i)
                for (bool high : {false, true}) {
                    const int v = 32 * b + 16 * high + 4 * qq + i;
                    const int u = value_of(at(low_chunk(b, qq), i), at(top_chunk(b, qq), i), qq, high);
                    q[ql_at(v)] = uint8_t(q[ql_at(v)] | (u & 15) << low_shift(v));
                    q[qh_at(v)] = uint8_t(q[qh_at(v)] | (u >> 4) << top_shift(v));
                }
}

void panel_q6k_portable(int64_t M, int64_t nb, const ActBlock* act, const int32_t* corr, const int32_t* half,
                        const uint8_t* panel, int64_t w, int64_t cols, float* C, int64_t ldc) {
    for (int64_t m = 0; m < M; ++m) {
        float acc[kW] = {};
        for (int64_t sb = 0; sb < nb / 8; ++sb) {
            const uint8_t* blk = panel + size_t(sb) * size_t(w) * size_t(kFm.block_bytes);
            for (int64_t j = 0; j < w; ++j) {
                uint16_t h16;
                std::memcpy(&h16, blk + field_offset(w, 0) + 2 * j, 2);
                const float d = ggml_fp16_to_fp32(h16);
                for (int b = 0; b < 8; ++b) {
                    const int64_t at = m * nb + 8 * sb + b;
                    int32_t s[2] = {-32 * half[at], corr[at] + 32 * half[at]};  // (corr: -32 times the block's sum)
                    for (int q = 0; q < 4; ++q)
                        for (int i = 0; i < 4; ++i) {
                            const int low = blk[chunk_offset(kFm, w, low_chunk(b, q)) + 4 * size_t(j) + i];
                            const int top = blk[chunk_offset(kFm, w, top_chunk(b, q)) + 4 * size_t(j) + i];
                            s[0] += value_of(low, top, q, false) * act[at].qs[4 * q + i];
                            s[1] += value_of(low, top, q, true) * act[at].qs[16 + 4 * q + i];
                        }
                    auto scale = [&](int g) {
                        return int32_t(int8_t(blk[byte_field_offset(kFm, w) + size_t(g) * size_t(w) + size_t(j)]));
                    };
                    const int32_t sum = scale(2 * b) * s[0] + scale(2 * b + 1) * s[1];
                    acc[j] = std::fma(float(sum), d * act[at].d, acc[j]);
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

// C[MR rows, w] = one q6_K panel times MR activation rows (rows nb blocks apart). Full: w = 32.
template <int MR, bool Full>
void tile_vnni(int64_t nb, const ActBlock* act, const int32_t* corr, const int32_t* half, const uint8_t* panel,
               int64_t w, float* C, int64_t ldc) {
    const int64_t width = Full ? kW : w;
    const size_t bs = size_t(width) * kFm.block_bytes, c0 = chunk_offset(kFm, width, 0), cs = 4 * size_t(width);
    const size_t sf = byte_field_offset(kFm, width);
    const __mmask16 mask[2] = {Full ? __mmask16(0xFFFF) : lanes16(w), Full ? __mmask16(0xFFFF) : lanes16(w - 16)};
    const __m512i low4 = _mm512_set1_epi8(0x0F), top2 = _mm512_set1_epi8(0x30);
    __m512 f[MR][2];
    for (int m = 0; m < MR; ++m) f[m][0] = f[m][1] = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nb / 8; ++sb) {
        const uint8_t* blk = panel + size_t(sb) * bs;
        const __m512 d[2] = {half16<Full>(blk, mask[0]), half16<Full>(blk + 32, mask[1])};
        for (int b = 0; b < 8; ++b) {
            const int64_t at = 8 * sb + b;  // row m's block: at + m * nb
            for (int l = 0; l < 12; ++l)
                _mm_prefetch(reinterpret_cast<const char*>(blk + c0 + size_t(top_chunk(b, 0)) * cs + kPrefetchAhead + 64 * l), _MM_HINT_T1);
            __m512i s[MR][2][2];  // [row][half of the panel][group]
            for (int m = 0; m < MR; ++m) {
                const int32_t h = half[at + m * nb];
                for (int x = 0; x < 2; ++x) {
                    s[m][x][0] = _mm512_set1_epi32(-32 * h);
                    s[m][x][1] = _mm512_set1_epi32(corr[at + m * nb] + 32 * h);
                }
            }
#pragma GCC unroll 4
            for (int q = 0; q < 4; ++q) {
                const uint8_t* pl = blk + c0 + size_t(low_chunk(b, q)) * cs;
                const uint8_t* pt = blk + c0 + size_t(top_chunk(b, q)) * cs;
                __m512i u[2][2];  // [half of the panel][group: low, high nibbles]
                for (int x = 0; x < 2; ++x) {
                    const __m512i top = chunk64<Full>(pt + 64 * x, mask[x]), low = chunk64<Full>(pl + 64 * x, mask[x]);
                    // top bits 4 (q % 2) and 4 (q % 2) + 2 moved to bits 4, 5 (16-bit shifts: the bits that
                    // cross into the next byte are masked off)
                    const __m512i t0 = q % 2 ? top : _mm512_slli_epi16(top, 4);
                    const __m512i t1 = q % 2 ? _mm512_srli_epi16(top, 2) : _mm512_slli_epi16(top, 2);
                    u[x][0] = _mm512_or_si512(_mm512_and_si512(low, low4), _mm512_and_si512(t0, top2));
                    u[x][1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(low, 4), low4), _mm512_and_si512(t1, top2));
                }
                dot_two_groups<MR>(s, u, act, at, nb, q);
            }
            for (int x = 0; x < 2; ++x) {
                auto scale = [&](int g) {
                    return __m512i(bytes16<Full, true>(blk + sf + size_t(g) * size_t(width) + 16 * size_t(x), mask[x]));
                };
                const __m512i sc0 = scale(2 * b), sc1 = scale(2 * b + 1);
                for (int m = 0; m < MR; ++m) {
                    const __m512i sum = _mm512_add_epi32(_mm512_mullo_epi32(s[m][x][0], sc0), _mm512_mullo_epi32(s[m][x][1], sc1));
                    const __m512 da = _mm512_mul_ps(d[x], _mm512_set1_ps(act[at + m * nb].d));
                    f[m][x] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(__mmask16(0xFFFF), sum), da, f[m][x]);
                }
            }
        }
    }
    store_tile(C, ldc, f, mask[0], mask[1]);
}

template <bool Full>
void rows_vnni(int64_t M, int64_t nb, const ActBlock* a, const int32_t* c, const int32_t* h, const uint8_t* panel,
               int64_t w, float* C, int64_t ldc) {
    row_tiles<4>(M, [&](auto r, int64_t m) {  // (4 rows: 16 sums and 8 accumulators of 32 registers)
        tile_vnni<decltype(r)::value, Full>(nb, a + m * nb, c + m * nb, h + m * nb, panel, w, C + m * ldc, ldc);
    });
}

#pragma GCC pop_options

}  // namespace

void panel_q6k_vnni(int64_t M, int64_t nb, const ActBlock* act, const int32_t* corr, const int32_t* half,
                    const uint8_t* panel, int64_t w, float* C, int64_t ldc) {
    if (w == kW) rows_vnni<true>(M, nb, act, corr, half, panel, w, C, ldc);
    else rows_vnni<false>(M, nb, act, corr, half, panel, w, C, ldc);
}

#endif

}  // namespace dg::kernels::panels
