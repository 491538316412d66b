// 3x3 convolutions of stride 1 by Winograd's minimal filtering F(2x2, 3x3)
// (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks", 2015).
//
// Every 2x2 block of outputs (a tile) is computed from the 4x4 input window
// under it: V = B^T d B per input channel, U = G g G^T per (output, input)
// channel pair, then for each of the 16 transformed positions xi a product
// over the channels, M_xi = U_xi . V_xi, and the outputs Y = A^T M A. That is
// 16 multiplications per tile and channel pair where im2col + sgemm does 36:
// 2.25x fewer, the products still OpenBLAS's sgemm (16 of them per task, with
// the transformed windows of a block of tile rows as their columns).
//
// The transforms add and subtract only (B, A: entries 0 and +-1; G: 1 and
// +-1/2, applied in double to the weights), so the result differs from a
// direct sum by rounding alone: each value of V is a sum of 4 inputs, each
// output a sum of 9 values of M, besides the product's sum over C. The
// bound tests/ops/test_winograd.py checks is derived from those sums.
//
// Constant weights are transformed once per compiled partition (16 values per
// 9 weights, held beside them: lower/conv.cpp, derived_constants.h); other
// weights by an op of their own before the convolution, every call, split
// over the threads. Where the tiles are few, the short products (and that
// transform) cost more than the 2.25x saves: winograd_fits() takes this path
// only where the outputs are many, fewer of them where the weights are held
// (docs/design/kernels.md, "Convolutions", has the measurements).
#pragma once

#include <array>
#include <cstdint>

#include "conv.h"
#include "ggml.h"

namespace dg::kernels {

// Whether conv2d computes `s` by winograd_conv3x3: a 3x3 kernel, stride and dilation 1, at least
// kWinogradMinChannels input and output channels per group, at least kWinogradMinOutputs output
// positions over the batch (kWinogradMinOutputsHeld where the partition holds the weights transformed:
// `weights_held`), and a row of tiles whose transformed windows (and products) take at most
// kWinogradMaxRowBytes each (a task's buffers hold one row at least; wider images go to im2col, whose
// buffers are bounded by its tiles).
constexpr int64_t kWinogradMinChannels = 16;
constexpr int64_t kWinogradMinOutputs = 96;
constexpr int64_t kWinogradMinOutputsHeld = 32;
constexpr int64_t kWinogradMaxRowBytes = 16 << 20;
bool winograd_fits(const ConvShape& s, bool weights_held = false);

// The transformed weights U of a shape winograd_fits() takes: ggml ne {Ig * Og, 16, G, 1}, and U computed
// from the weights (in the layout s says) at once, on the calling thread.
std::array<int64_t, 4> winograd_weights_ne(const ConvShape& s);
void winograd_transform_weights(const float* weights, const ConvShape& s, float* u);

// conv2d for a shape winograd_fits() takes; the conventions of conv2d.
// `transformed`: U already computed (winograd_weights_ne), else an op computes it from `weights` every call.
ggml_tensor* winograd_conv3x3(ggml_context* ctx, ggml_tensor* src, ggml_tensor* weights, ggml_tensor* bias,
                              const ConvShape* shape, const int64_t dst_ne[4], ggml_tensor* transformed = nullptr,
                              ggml_tensor* residual = nullptr);

}  // namespace dg::kernels
