// The int8 convolution of QuantizedConvolution (ops/conv.py), in exact
// integer arithmetic: the parameters, dot products and epilogue of
// int8_dot.h, with the tasks and column gathering of the f32 convolution
// (conv_gather.h). Every (batch element, group, tile of output positions)
// is one task: the tile's windows are gathered as rows of bytes, as
// int8_dot takes them, a position in the padding holding the zero point (the
// dequantized padding is 0: its products drop out with the zero points),
// then multiplied with the group's weight rows by int8_dot. Depthwise
// convolutions (one input and one output channel per group) run a direct
// loop over the taps instead, on values with their zero points taken out,
// summed in f32, which is exact up to 258 taps (every partial sum an integer
// below 2^24); 64-bit integer sums for larger kernels.
//
// Layouts: src NXC [N, H, W, C] (the lowering transposes NCX src first with
// int8_ncx_to_nxc, except for depthwise convolutions, which read NCX planes
// as they are); weights OXI [O, KH, KW, C/g] (each output channel's window as
// one row, in the order the columns are gathered: kh, kw, c); dst NCX or NXC
// as shape.nxc says, F32 or I8 (q.quantize_out). 1-D convolutions are 2-D
// ones with H = 1. bias: F32 [O], or null.
//
// This file is compiled with -ffp-contract=off (CMakeLists.txt).
#pragma once

#include "conv.h"
#include "ggml.h"
#include "int8_dot.h"

namespace dg::kernels {

struct Int8ConvParams {
    ConvShape shape;      // shape.channels_first_weights must be false (OXI); shape.nxc: dst's layout
    Int8Params q;         // one scale / zero point, or one per output channel
    bool src_nxc = true;  // src's layout: NXC, or NCX (depthwise convolutions only)
};

// The bytes of an NCX tensor [N, C, H, W] (dense I8) as NXC [N, H, W, C].
ggml_tensor* int8_ncx_to_nxc(ggml_context* ctx, ggml_tensor* src, int64_t N, int64_t C, int64_t H, int64_t W);

// `p` must outlive the graph (LowerCtx::keep); the caller has checked its sizes against the tensors.
ggml_tensor* int8_conv2d(ggml_context* ctx, ggml_tensor* src, ggml_tensor* weights, ggml_tensor* bias,
                         const Int8ConvParams* p, const int64_t dst_ne[4]);

}  // namespace dg::kernels
