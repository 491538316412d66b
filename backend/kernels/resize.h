// Nearest-neighbour resizing of f32 data as a ggml custom op. ggml's upscale
// finds a source index by dividing by a float ratio, which rounds the other
// way than PyTorch's product at exact multiples (4762 output indices differ
// over the sizes 1..199 -> 1..199), and has no half-pixel rule; this kernel computes
// indices as PyTorch does: floor((o + 0.5) * in / out) (half_pixel, oneDNN's
// nearest and torch's nearest-exact) or floor(o * in / out) (asymmetric,
// torch's nearest), in float, clamped to the input.
//
// Layouts as in conv.h: NCX [N, C, H, W] or NXC [N, H, W, C], 1-D with H = 1.
#pragma once

#include <cstdint>

#include "ggml.h"

namespace dg::kernels {

struct ResizeShape {
    int64_t N = 1, C = 1, H = 1, W = 1, OH = 1, OW = 1;
    bool half_pixel = true;  // else asymmetric
    bool nxc = false;
};

// The source index of output o along an axis of `in` inputs and `out` outputs.
int64_t nearest_index(int64_t o, int64_t in, int64_t out, bool half_pixel);

ggml_tensor* resize_nearest(ggml_context* ctx, ggml_tensor* src, const ResizeShape* shape, const int64_t dst_ne[4]);

}  // namespace dg::kernels
