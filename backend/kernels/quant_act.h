// Activations rounded to 8 bits per 32-value block, the input of our integer
// products with q8_0 / q4_0 / q4_1 weights (quant_rows.h: 1-7 rows; from 8
// rows only the VNNI variant rounds, quant_act_vnni.h): value i ~ qs[i] * d with d = amax / 127 in
// f32 (ggml stores an f16 d), q = round-to-nearest-even(x * 127 / amax). A
// block holding a NaN or an infinity gets d = NaN, so the outputs it feeds
// are NaN rather than finite numbers. AVX2 (isa.h): call only where
// kernel_isa() is not generic.
#pragma once

#include <cstdint>

namespace dg::kernels {

struct ActBlock {
    float d, s;  // s = d * sum(qs): what the q4 types' offsets multiply
    int8_t qs[32];
};

// One row of n values (n a multiple of 32) into n / 32 blocks.
void quantize_act_row(const float* x, int64_t nb, ActBlock* out);

}  // namespace dg::kernels
