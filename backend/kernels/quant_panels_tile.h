// Inside quant_panels.cpp and its vector tiles (quant_panels_vnni.cpp,
// quant_panels_avx2.cpp): a block type's form in the panels (quant_panels.h)
// and the tiles that multiply one panel by the rounded activation rows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "ggml.h"
#include "quant_act.h"
#include "quant_blocks.h"
#include "quant_panels.h"

namespace dg::kernels::panels {

constexpr int64_t kW = kQuantPanelWidth;

// A block type's form in the panels: its bytes and values, its f16 fields before the values (d; q4_1,
// q5_1: d, m; q2_K, q4_K, q5_K: d, dmin), its fields of one byte (q4_K, q5_K, q3_K: the 12 bytes of 6-bit
// scales (and minimums); q2_K: 16 bytes of a 4-bit scale and minimum; iq4_xs: its 6 bytes of scales), the
// bytes a row's fifth bits take (q5: 4, q5_K: 32), its chunks of 4 bytes a row, and c: the weights' values
// are the stored unsigned bytes (or nibbles, with their fifth bits; q2_K, q3_K: 2 bits, and the third) - c
// (iq4: kIq4Values[nibble] + 128 - c). at_*: where ggml's block holds the f16 fields, the byte fields, the
// fifth bits and the values (most: in the panels' order; q6_K, q3_K, q2_K: values or scales first; q3_K's
// values: hmask, then qs).
struct Format {
    int block_bytes, values, fields, byte_fields, bits, chunks, offset;
    int at_fields, at_bytes, at_bits, at_values;
};

// a type whose block holds its fields in the panels' order: f16 fields, byte fields, bits, values
constexpr Format in_order(int block_bytes, int values, int fields, int byte_fields, int bits, int chunks, int offset) {
    return Format{block_bytes, values, fields, byte_fields, bits, chunks, offset,
                  0, 2 * fields, 2 * fields + byte_fields, 2 * fields + byte_fields + bits};
}

constexpr Format format_of(ggml_type t) {
    return t == GGML_TYPE_Q8_0     ? in_order(int(sizeof(BlockQ8_0)), 32, 1, 0, 0, 8, 128)
           : t == GGML_TYPE_Q4_0   ? in_order(int(sizeof(BlockQ4_0)), 32, 1, 0, 0, 4, 8)
           : t == GGML_TYPE_Q4_1   ? in_order(int(sizeof(BlockQ4_1)), 32, 2, 0, 0, 4, 0)
           : t == GGML_TYPE_Q5_0   ? in_order(int(sizeof(BlockQ5_0)), 32, 1, 0, 4, 4, 16)
           : t == GGML_TYPE_Q5_1   ? in_order(int(sizeof(BlockQ5_1)), 32, 2, 0, 4, 4, 0)
           : t == GGML_TYPE_Q4_K   ? in_order(int(sizeof(BlockQ4_K)), 256, 2, 12, 0, 32, 0)
           : t == GGML_TYPE_Q5_K   ? in_order(int(sizeof(BlockQ5_K)), 256, 2, 12, 32, 32, 0)
           : t == GGML_TYPE_IQ4_NL ? in_order(int(sizeof(BlockIQ4_NL)), 32, 1, 0, 0, 4, 128)
           : t == GGML_TYPE_IQ4_XS ? in_order(int(sizeof(BlockIQ4_XS)), 256, 1, 6, 0, 32, 128)
           : t == GGML_TYPE_Q2_K   ? Format{int(sizeof(BlockQ2_K)), 256, 2, 16, 0, 16, 0, 80, 0, 16, 16}
           : t == GGML_TYPE_Q3_K   ? Format{int(sizeof(BlockQ3_K)), 256, 1, 12, 0, 24, 4, 108, 96, 0, 0}
                                   : Format{int(sizeof(BlockQ6_K)), 256, 1, 16, 0, 48, 32, 208, 192, 192, 0};
}
static_assert(format_of(GGML_TYPE_Q4_K).block_bytes == 2 * 2 + 12 + 4 * 32, "q4_K: d, dmin, scales, values");
static_assert(format_of(GGML_TYPE_Q5_K).block_bytes == 2 * 2 + 12 + 32 + 4 * 32, "q5_K: d, dmin, scales, qh, values");
static_assert(format_of(GGML_TYPE_IQ4_XS).block_bytes == 2 + 6 + 4 * 32, "iq4_xs: d, scales_h, scales_l, values");
static_assert(format_of(GGML_TYPE_Q6_K).block_bytes == 128 + 64 + 16 + 2, "q6_K: ql, qh, scales, d");
static_assert(format_of(GGML_TYPE_Q2_K).at_fields == offsetof(BlockQ2_K, d) &&
                  format_of(GGML_TYPE_Q2_K).at_values == offsetof(BlockQ2_K, qs),
              "q2_K: scales, qs, d, dmin");
static_assert(format_of(GGML_TYPE_Q3_K).at_fields == offsetof(BlockQ3_K, d) &&
                  format_of(GGML_TYPE_Q3_K).at_bytes == offsetof(BlockQ3_K, scales) &&
                  format_of(GGML_TYPE_Q3_K).at_values == offsetof(BlockQ3_K, hmask),
              "q3_K: hmask, qs, scales, d");
static_assert(format_of(GGML_TYPE_Q6_K).at_fields == offsetof(BlockQ6_K, d) &&
                  format_of(GGML_TYPE_Q6_K).at_bytes == offsetof(BlockQ6_K, scales),
              "q6_K: ql, qh, scales, d");

// Byte offsets in a block of a panel `w` rows wide: field f's w values, the byte fields' (field t's w
// bytes at byte_field_offset + t w), the fifth bits, then chunk q's.
inline size_t field_offset(int64_t w, int f) { return size_t(w) * 2 * size_t(f); }
inline size_t byte_field_offset(const Format& fm, int64_t w) { return size_t(w) * 2 * size_t(fm.fields); }
inline size_t bits_offset(const Format& fm, int64_t w) { return size_t(w) * (2 * size_t(fm.fields) + size_t(fm.byte_fields)); }
inline size_t chunk_offset(const Format& fm, int64_t w, int q) {
    return size_t(w) * (2 * size_t(fm.fields) + size_t(fm.byte_fields) + size_t(fm.bits) + 4 * size_t(q));
}

// q5: the fifth bits of chunk q's low (h = 0) or high (h = 1) nibbles are group g = 2 q + h of the
// area at bits_offset: row j's 4 bits (values 4 q + i, or 16 + 4 q + i; i < 4) are the area's bits
// 4 (g w + j) + i, so 16 rows' bits are the 64 bits a vector of 64 bytes (4 a row) takes as a mask.
inline size_t fifth_bit(int64_t w, int g, int64_t j, int i) { return 4 * (size_t(g) * size_t(w) + size_t(j)) + size_t(i); }

// n <= 64 bits of `area` from bit `at` on (bit 0 the lowest of byte 0), in the low n bits; reads
// only the bytes that hold them.
inline uint64_t read_bits(const uint8_t* area, size_t at, int n) {
    if (n <= 0) return 0;
    const size_t first = at / 8, last = (at + size_t(n) - 1) / 8;
    uint8_t b[9] = {};
    std::memcpy(b, area + first, last - first + 1);
    const int s = int(at % 8);
    uint64_t lo, v;
    std::memcpy(&lo, b, 8);
    v = s ? (lo >> s) | (uint64_t(b[8]) << (64 - s)) : lo;
    return n == 64 ? v : v & ((uint64_t(1) << n) - 1);
}

// C[m, j] for m < M, j < w = one panel (w rows wide, nb blocks of 32 values) of `type` times M
// activation rows rounded to blocks (act: row m's nb blocks at act[m * nb]; corr[m * nb + b] =
// -offset times block b's sum of values). Every variant sums the same integers exactly and then takes
// the same f32 steps per block of 32, in the same order: acc = fma(float(sum), d_w * d_a, acc), and for
// q4_1 and q5_1 acc = fma(m_w, s_a, acc); for q4_K's group j, d_w = d * float(sc_j) and
// acc = fma(-(dmin * float(m_j)), s_a, acc) (both products exact: 11 by 6 bits); for q6_K the sum is
// its two groups' integer sums times their int8 scales; so all give the same bits.
// The portable variant writes only the first `cols` columns.
void panel_portable(ggml_type type, int64_t M, int64_t nb, const ActBlock* act, const int32_t* corr,
                    const uint8_t* panel, int64_t w, int64_t cols, float* C, int64_t ldc);

// panel_portable for q4_K and q5_K (quant_panels_q45k.cpp, with its vector variants)
void panel_q45k_portable(ggml_type type, int64_t M, int64_t nb, const ActBlock* act, const uint8_t* panel, int64_t w,
                         int64_t cols, float* C, int64_t ldc);
// panel_portable for iq4_nl and iq4_xs (quant_panels_iq4.cpp)
void panel_iq4_portable(ggml_type type, int64_t M, int64_t nb, const ActBlock* act, const uint8_t* panel, int64_t w,
                        int64_t cols, float* C, int64_t ldc);
// panel_portable for q6_K (quant_panels_q6k.cpp); half[m * nb + b]: the sum of block b's first 16 values
void panel_q6k_portable(int64_t M, int64_t nb, const ActBlock* act, const int32_t* corr, const int32_t* half,
                        const uint8_t* panel, int64_t w, int64_t cols, float* C, int64_t ldc);
// panel_portable for q2_K and q3_K (quant_panels_q23k.cpp); sum[m * nb + b], half[m * nb + b]: the sums of
// block b's 32 and first 16 values
void panel_q23k_portable(ggml_type type, int64_t M, int64_t nb, const ActBlock* act, const int32_t* sum,
                         const int32_t* half, const uint8_t* panel, int64_t w, int64_t cols, float* C, int64_t ldc);
// q2_K's and q3_K's values (ggml's values of row j's super-block: q2_K qs, 64 bytes; q3_K hmask and qs, 96)
// to and from its chunks in a panel `w` rows wide (chunks: the super-block's first)
void q23k_values_to_panel(ggml_type type, const uint8_t* values, uint8_t* chunks, int64_t w, int64_t j);
void q23k_values_from_panel(ggml_type type, const uint8_t* chunks, int64_t w, int64_t j, uint8_t* values);
// q6_K's values (ggml's ql and qh of row j's super-block, 192 bytes) to and from its chunks in a panel
// `w` rows wide (chunks: the super-block's first chunk)
void q6k_values_to_panel(const uint8_t* q, uint8_t* chunks, int64_t w, int64_t j);
void q6k_values_from_panel(const uint8_t* chunks, int64_t w, int64_t j, uint8_t* q);

// R::run<T, Full>(args...) for the panel's type, one of Ts, and for a full (32-row) or a narrower last
// panel: the one switch the vector variants share.
template <class R, ggml_type... Ts, class... Args>
void by_type_and_width(ggml_type type, bool full, Args... args) {
    auto one = [&](auto t) {
        if (type != decltype(t)::value) return false;
        if (full) R::template run<decltype(t)::value, true>(args...);
        else R::template run<decltype(t)::value, false>(args...);
        return true;
    };
    (one(std::integral_constant<ggml_type, Ts>{}) || ...);
}

// tile(std::integral_constant<int, r>{}, m) for the rows [m, m + r) of M: tiles of R rows, then one of
// the 1..R-1 rows left; the loop over the activation rows every vector variant runs.
template <int R, class Tile>
void row_tiles(int64_t M, const Tile& tile) {
    int64_t m = 0;
    for (; m + R <= M; m += R) tile(std::integral_constant<int, R>{}, m);
    if constexpr (R > 1)
        if (m < M) row_tiles<R - 1>(M - m, [&](auto r, int64_t i) { tile(r, m + i); });
}

#if defined(__GNUC__) && defined(__x86_64__)
#define DG_QUANT_PANELS_X86 1
// AVX-512 VNNI (kernel_isa() >= avx512vnni).
void panel_vnni(ggml_type type, int64_t M, int64_t nb, const ActBlock* act, const int32_t* corr,
                const uint8_t* panel, int64_t w, float* C, int64_t ldc);
// AVX2 (kernel_isa() >= avx2): vpmaddubsw's 16-bit sums.
void panel_avx2(ggml_type type, int64_t M, int64_t nb, const ActBlock* act, const int32_t* corr,
                const uint8_t* panel, int64_t w, float* C, int64_t ldc);
// q4_K and q5_K (quant_panels_q45k.cpp)
void panel_q45k_vnni(ggml_type type, int64_t M, int64_t nb, const ActBlock* act, const uint8_t* panel, int64_t w,
                     float* C, int64_t ldc);
void panel_q45k_avx2(ggml_type type, int64_t M, int64_t nb, const ActBlock* act, const uint8_t* panel, int64_t w,
                     float* C, int64_t ldc);
// iq4_nl and iq4_xs (quant_panels_iq4.cpp)
void panel_iq4_vnni(ggml_type type, int64_t M, int64_t nb, const ActBlock* act, const int32_t* corr,
                    const uint8_t* panel, int64_t w, float* C, int64_t ldc);
void panel_iq4_xs_avx2(int64_t M, int64_t nb, const ActBlock* act, const uint8_t* panel, int64_t w, float* C,
                       int64_t ldc);
// q2_K and q3_K (quant_panels_q23k.cpp)
void panel_q23k_vnni(ggml_type type, int64_t M, int64_t nb, const ActBlock* act, const int32_t* sum, const int32_t* half,
                     const uint8_t* panel, int64_t w, float* C, int64_t ldc);
void panel_q23k_avx2(ggml_type type, int64_t M, int64_t nb, const ActBlock* act, const int32_t* sum, const int32_t* half,
                     const uint8_t* panel, int64_t w, float* C, int64_t ldc);
// q6_K (quant_panels_q6k.cpp)
void panel_q6k_vnni(int64_t M, int64_t nb, const ActBlock* act, const int32_t* corr, const int32_t* half,
                    const uint8_t* panel, int64_t w, float* C, int64_t ldc);

#endif

}  // namespace dg::kernels::panels
