// The block layouts of ggml's quantized storage types (the GGUF format): 32
// values per block with an f16 scale d (and for q4_1 an f16 minimum m); the
// k-quants' 256.
#pragma once

#include <cstdint>

namespace dg::kernels {

constexpr int kQuantBlock = 32;

struct BlockQ8_0 {
    uint16_t d;
    int8_t qs[32];  // value i = qs[i] * d
};
struct BlockQ4_0 {
    uint16_t d;
    uint8_t qs[16];  // value i = (nibble - 8) * d: low nibbles are values 0-15, high ones 16-31
};
struct BlockQ4_1 {
    uint16_t d, m;
    uint8_t qs[16];  // value i = nibble * d + m, nibbles as in q4_0
};
struct BlockQ5_0 {
    uint16_t d;
    uint8_t qh[4];   // bit i (little-endian 32 bits): value i's fifth bit
    uint8_t qs[16];  // nibbles as in q4_0; value i = (nibble | fifth bit << 4) - 16) * d
};
struct BlockQ5_1 {
    uint16_t d, m;
    uint8_t qh[4];
    uint8_t qs[16];  // value i = (nibble | fifth bit << 4) * d + m
};
// 256 values in 8 groups of 32: value = d * sc[j] * nibble - dmin * m[j] for group j, the 6-bit sc
// and m packed in `scales` (q4_k_scale_min); value 64 g + l (l < 32) the low nibble of qs[32 g + l]
// (group 2 g), value 64 g + 32 + l its high nibble (group 2 g + 1)
struct BlockQ4_K {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qs[128];
};
// group j's 6-bit scale and minimum, from the 12 bytes s(0..11) of a q4_K block (s(t): byte t, or a
// vector of lanes each holding byte t of a row, as a GCC vector of integers)
// (always inlined: its vector instances compile with the caller's target ISA, and no vector is passed
// across a call, whatever -Wpsabi says of the lambda's return)
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
template <class T, class Bytes>
[[gnu::always_inline]] inline void q4_k_scale_min(int j, Bytes s, T& sc, T& m) {
    if (j < 4) {
        sc = s(j) & 63;
        m = s(j + 4) & 63;
    } else {
        sc = (s(j + 4) & 15) | ((s(j - 4) >> 6) << 4);
        m = (s(j + 4) >> 4) | ((s(j) >> 6) << 4);
    }
}
// ls = sub-block ib's 6-bit scale from the 6 bytes s(0..5) of an IQ4_XS block after d (scales_h's two,
// then scales_l's four; s(t): byte t, or lanes each holding byte t of a row; an out-parameter, as above)
template <class T, class Bytes>
[[gnu::always_inline]] inline void iq4_xs_scale(int ib, Bytes s, T& ls) {
    ls = ((s(2 + ib / 2) >> (4 * (ib % 2))) & 15) | (((s(ib / 4) >> (2 * (ib % 4))) & 3) << 4);
}
// 256 values in 16 groups of 16 with 2-bit values: value = d * (scales[g] & 15) * q - dmin * (scales[g] >> 4)
// for group g (q2_K); q of value 128 h + 32 k + l (h < 2, k < 4, l < 32) bits 2 k, 2 k + 1 of qs[32 h + l],
// group 8 h + 2 k + l / 16
struct BlockQ2_K {
    uint8_t scales[16];
    uint8_t qs[64];
    uint16_t d, dmin;
};
// q2_K's 2-bit values with a third bit: value = d * (sc[g] - 32) * (q + 4 bit - 4) for group g (q3_K), q as
// q2_K's, the bit of value v bit v / 32 of hmask[v % 32], sc the 6-bit scales (q3_k_scale) in `scales`
struct BlockQ3_K {
    uint8_t hmask[32];
    uint8_t qs[64];
    uint8_t scales[12];
    uint16_t d;
};
// group j's 6-bit scale (less 32 in the value) from the 12 bytes s(0..11) of a q3_K block: the low 4 bits
// nibble j / 8 of s(j % 8), the top 2 bits bits 2 (j / 4), 2 (j / 4) + 1 of s(8 + j % 4) (lanes as above)
template <class T, class Bytes>
[[gnu::always_inline]] inline void q3_k_scale(int j, Bytes s, T& sc) {
    sc = ((s(j % 8) >> (4 * (j / 8))) & 15) | (((s(8 + j % 4) >> (2 * (j / 4))) & 3) << 4);
}
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
// q4_K with a fifth bit: value 64 g + l = (low nibble of qs[32 g + l] | bit 2 g of qh[l] << 4) for group
// 2 g, value 64 g + 32 + l = (its high nibble | bit 2 g + 1 of qh[l] << 4) for group 2 g + 1
struct BlockQ5_K {
    uint16_t d, dmin;
    uint8_t scales[12];  // as q4_K's
    uint8_t qh[32];
    uint8_t qs[128];
};
// 256 values in 16 groups of 16: value = d * scales[group] * (6 bits - 32), the 6 bits of value
// 128 h + 32 k + l (h < 2, k < 4, l < 32) being nibble k / 2 of ql[64 h + 32 (k % 2) + l] (low for
// k < 2) and bits 2k, 2k + 1 of qh[32 h + l] above it
struct BlockQ6_K {
    uint8_t ql[128];
    uint8_t qh[64];
    int8_t scales[16];
    uint16_t d;
};
// 4-bit indices into a table of 16 int8 values (non-linear, denser near 0): value i = d * kIq4Values[nibble],
// nibbles as in q4_0 (IQ4_NL); 256 values with a 6-bit scale per 32 (IQ4_XS): value = d * (ls - 32) *
// kIq4Values[nibble] for sub-block ib, ls = (nibble ib % 2 of scales_l[ib / 2]) | (bits 2 ib, 2 ib + 1 of
// scales_h) << 4, its 32 values' nibbles in qs[16 ib .. 16 ib + 15] as an IQ4_NL block's
constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
struct BlockIQ4_NL {
    uint16_t d;
    uint8_t qs[16];
};
struct BlockIQ4_XS {
    uint16_t d, scales_h;
    uint8_t scales_l[4];
    uint8_t qs[128];
};
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20, "ggml block sizes");
static_assert(sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24 && sizeof(BlockQ6_K) == 210, "ggml block sizes");
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176, "ggml block sizes");
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110, "ggml block sizes");
static_assert(sizeof(BlockIQ4_NL) == 18 && sizeof(BlockIQ4_XS) == 136, "ggml block sizes");

}  // namespace dg::kernels
