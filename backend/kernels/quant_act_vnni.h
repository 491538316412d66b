// Activation rows rounded to 8 bits per 32-value block (the rounding of
// quant_act.h: d = amax / 127 in f32, q = round-to-nearest-even(x * 127 /
// amax), d = NaN for a block holding a NaN or an infinity), laid out for the
// AVX-512 VNNI products (quant_vnni.h): four blocks per group, so that one
// vpdpbusd multiplies the first halves of four blocks and a second one their
// second halves into the same 16 int32 lanes, lane l holding 8 products of
// block l / 4. AVX-512 VNNI + VBMI only (isa.h: avx512vnni).
#pragma once

#include <cstdint>

#include "ggml.h"

namespace dg::kernels {

constexpr int kGroupBlocks = 4;

struct alignas(64) ActGroup {
    int8_t q[128];     // q[16 b + i]: value i of block b; q[64 + 16 b + i]: value 16 + i (b < 4, i < 16)
    float d[16];       // lane l: the scale of block l / 4
    int32_t corr[16];  // lane l: -c * (the sum of the 8 values lane l multiplies), the offset of the weights'
                       // unsigned bytes: c = 128 for q8_0 (bytes w + 128), 8 for q4_0 (nibbles, value - 8), 0 q4_1
    float s[16];       // q4_1 weights only: lane l: d * (the sum of the 8 values lane l multiplies), what m multiplies
};

// One row of nb blocks (32 * nb values) into (nb + 3) / 4 groups, for weights
// of `wtype` (q8_0, q4_0 or q4_1); the blocks past nb in the last group are zeros.
void quantize_act_groups(const float* x, int64_t nb, ggml_type wtype, ActGroup* out);

}  // namespace dg::kernels
