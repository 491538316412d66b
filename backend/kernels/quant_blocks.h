// The block layouts of ggml's quantized storage types (the GGUF format): 32
// values per block with an f16 scale d (and for q4_1 an f16 minimum m).
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
// 256 values in 16 groups of 16: value = d * scales[group] * (6 bits - 32), the 6 bits of value
// 128 h + 32 k + l (h < 2, k < 4, l < 32) being nibble k / 2 of ql[64 h + 32 (k % 2) + l] (low for
// k < 2) and bits 2k, 2k + 1 of qh[32 h + l] above it
struct BlockQ6_K {
    uint8_t ql[128];
    uint8_t qh[64];
    int8_t scales[16];
    uint16_t d;
};
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20, "ggml block sizes");
static_assert(sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24 && sizeof(BlockQ6_K) == 210, "ggml block sizes");

}  // namespace dg::kernels
