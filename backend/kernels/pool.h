// Max, average and adaptive average pooling of f32 data as ggml custom ops.
//
// ggml's pool_1d / pool_2d run on one thread, pad both sides alike, have no
// dilation, no ceil rounding and no NXC layout, and average over the whole
// window in 2-D (over the valid part in 1-D); their max loses NaN. These
// kernels take oneDNN Graph's semantics: tasks are channel planes (NCX) or
// output rows (NXC, vectorized over the channels), spread over ggml's threads.
//
// Layouts as in conv.h: src NCX [N, C, H, W] or NXC [N, H, W, C], 1-D with H = 1.
#pragma once

#include <cstdint>

#include "ggml.h"

namespace dg::kernels {

enum class PoolKind { Max, Avg, AdaptiveAvg };

struct PoolShape {
    PoolKind kind = PoolKind::Max;
    int64_t N = 1, C = 1, H = 1, W = 1, OH = 1, OW = 1;
    int64_t KH = 1, KW = 1, sh = 1, sw = 1, dh = 1, dw = 1;
    int64_t ph = 0, pw = 0;          // begin padding
    int64_t ph_end = 0, pw_end = 0;  // end padding (Avg without exclude_pad: the padded extent)
    bool exclude_pad = false;        // Avg: divide by the window's input elements (else its positions in the padded input)
    bool nxc = false;
};

// Max: the largest element of each window (NaN wins). Avg: see exclude_pad.
// AdaptiveAvg: output i of an axis of size L averages inputs
// [floor(i*L/n), ceil((i+1)*L/n)) (kernel, strides and pads unused).
// Every window must hold at least one input element (the shape rules ensure it).
ggml_tensor* pool2d(ggml_context* ctx, ggml_tensor* src, const PoolShape* shape, const int64_t dst_ne[4]);

}  // namespace dg::kernels
