// BatchNormInference of f32 data as a ggml custom op: one pass,
// dst = src * scale[c] + shift[c] with scale = gamma / sqrt(variance + eps)
// and shift = beta - mean * scale (computed in double per call; C values).
// ggml would need six ops and passes for it.
#pragma once

#include <cstdint>

#include "ggml.h"

namespace dg::kernels {

struct BatchNormShape {
    int64_t outer = 1;  // NCX: N; NXC: N * spatial size
    int64_t C = 1;
    int64_t inner = 1;  // NCX: spatial size; NXC: 1
    float eps = 0.0f;
};

// src: F32 contiguous [outer, C, inner]; gamma, beta, mean, variance: F32 [C].
ggml_tensor* batch_norm(ggml_context* ctx, ggml_tensor* src, ggml_tensor* gamma, ggml_tensor* beta, ggml_tensor* mean,
                        ggml_tensor* variance, const BatchNormShape* shape);

}  // namespace dg::kernels
