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
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20, "ggml block sizes");

}  // namespace dg::kernels
