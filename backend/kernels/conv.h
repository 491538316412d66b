// Convolution and transposed convolution of f32 data as ggml custom ops.
//
// ggml's own convolutions materialize the whole im2col matrix as a graph
// tensor (N * OH * OW * C * KH * KW floats: 58 MB for one 3x3 layer of 64
// channels at 56x56 and batch 8), have symmetric padding only, no groups and
// NCHW data only; its direct conv_2d is a scalar loop. Here every (batch
// element, group, tile of output positions) is one task: the tile's columns
// are gathered into a per-thread buffer of about kColumnBytes and multiplied
// with OpenBLAS's sgemm straight into the output in its own layout, the bias
// pre-filled. Special cases skip the gather: 1x1 kernels with stride 1 and no
// padding read the input in place; depthwise convolutions (one input and one
// output channel per group) run a direct loop instead of a product; 3x3
// kernels of stride 1 with enough channels and outputs go to Winograd's
// F(2x2, 3x3) (winograd.h, chosen by conv2d).
//
// The layouts are oneDNN Graph's. 1-D convolutions are 2-D ones with H = 1:
//   src: NCX [N, C, H, W] or NXC [N, H, W, C];  dst likewise with O, OH, OW.
//   Convolution weights: OIX [O, C/g, KH, KW] or XIO [KH, KW, C/g, O].
//   ConvTranspose weights: IOX [C, O/g, KH, KW] or XOI [KH, KW, O/g, C].
// Every tensor is F32 and contiguous; bias (may be null) is F32 [O].
#pragma once

#include <cstdint>

#include "activation.h"
#include "ggml.h"

namespace dg::kernels {

struct ConvShape {
    int64_t N = 1, C = 1, H = 1, W = 1;  // src
    int64_t O = 1, OH = 1, OW = 1;       // dst
    int64_t KH = 1, KW = 1;              // kernel
    int64_t sh = 1, sw = 1, dh = 1, dw = 1, ph = 0, pw = 0;  // strides, dilations, begin paddings
    int64_t groups = 1;
    bool nxc = false;                    // data layout NXC (else NCX)
    bool channels_first_weights = true;  // OIX / IOX (else XIO / XOI)
    // Convolution only, applied to each task's block of dst after the bias: a residual added (an Add's
    // other input, dst's shape and layout: the node's last src), then an activation
    bool residual = false;
    Activation act = Activation::None;
};

// The bias (src[2], or null) and the residual (the last src with shape.residual, or null) of a
// convolution node.
struct ConvExtras {
    const float* bias = nullptr;
    const float* residual = nullptr;
};
inline ConvExtras conv_extras(const ggml_tensor* dst, const ConvShape& s) {
    int n = 2;
    while (n < GGML_MAX_SRC && dst->src[n]) ++n;
    ConvExtras e;
    if (s.residual) e.residual = static_cast<const float*>(dst->src[--n]->data);
    if (n == 3) e.bias = static_cast<const float*>(dst->src[2]->data);
    return e;
}

// Bytes of gathered columns a task works on (in L2 while sgemm packs them).
constexpr int64_t kColumnBytes = 512 << 10;

// dst = act(Convolution(src, weights) + bias + residual) (shape->act; `residual` with shape->residual,
// contiguous f32 of dst_ne). `shape` must outlive the graph (LowerCtx::keep); the caller has checked its
// sizes against the tensors. `winograd_weights`: where winograd_fits(*shape), the weights already
// transformed (winograd.h), if at hand.
ggml_tensor* conv2d(ggml_context* ctx, ggml_tensor* src, ggml_tensor* weights, ggml_tensor* bias, const ConvShape* shape,
                    const int64_t dst_ne[4], ggml_tensor* winograd_weights = nullptr, ggml_tensor* residual = nullptr);

// dst = ConvTranspose(src, weights) + bias (the same conventions).
ggml_tensor* conv_transpose2d(ggml_context* ctx, ggml_tensor* src, ggml_tensor* weights, ggml_tensor* bias,
                              const ConvShape* shape, const int64_t dst_ne[4]);

}  // namespace dg::kernels
