// oneDNN's Dropout on the host CPU: its mask bit for bit (oneDNN 2026.1's
// Philox4x32-10 layouts, api/dyngraph/reference/philox.py says which) and
// dst = mask ? src * (1 / (1 - p)) : 0 in f32, rounded to dst's type.
#pragma once

#include <cstdint>

#include "ggml.h"

namespace dg::kernels {

// Philox4x32-10 (Salmon et al., SC'11): the block of `counter` under `key`.
void philox4x32_10(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4]);

// oneDNN's draws for the block of 4 elements starting at linear index b
// (b a multiple of 4): out[k] is the draw of element b + k.
void dropout_block(uint64_t seed, uint64_t offset, uint64_t b, uint32_t out[4]);

// The custom ops, both of the contiguous src's shape, reading single values
// from seed, offset (I32, sign-extended to 64 bits) and probability (F32):
// dst (src's type: F32, F16 or BF16) and mask (I8, 0 or 1). A probability
// outside [0, 1] (NaN included) makes the kernel throw (an ExecutionError
// after the compute, see kernel_guard.h).
ggml_tensor* dropout_dst(ggml_context* ctx, ggml_tensor* src, ggml_tensor* seed, ggml_tensor* offset,
                         ggml_tensor* probability);
ggml_tensor* dropout_mask(ggml_context* ctx, ggml_tensor* src, ggml_tensor* seed, ggml_tensor* offset,
                          ggml_tensor* probability);

}  // namespace dg::kernels
