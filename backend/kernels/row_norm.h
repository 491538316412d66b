// LayerNorm and RMSNorm over each row (ne0) of a dense f32 tensor, with gamma
// and beta applied in the same pass: one kernel where ggml runs NORM, then MUL,
// then ADD, each a pass over the whole tensor (2.1-2.8x PyTorch's layer_norm
// on [1024..4096, 384] at one thread, Zen 3; measured in docs/design/kernels.md).
#pragma once

#include "ggml.h"

namespace dg::kernels {

// y[r, :] = (x[r, :] - mean) / sqrt(var + eps) * gamma + beta (rms = false), or
// x[r, :] / sqrt(mean(x^2) + eps) * gamma (rms = true; beta must be null), over
// each row r of x. The sums are taken in double and the mean held in float, as
// ggml's own norm does, so the error bounds of its tests hold unchanged. x: F32,
// dense; gamma, beta: null or F32, dense, ne0 values each. With `addend` (F32,
// dense, x's shape) the rows normalized are those of x + addend, each sum
// rounded to f32 as ggml's ADD rounds it (a residual added just before the
// norm: one pass less, the same bits).
ggml_tensor* row_norm(ggml_context* ctx, ggml_tensor* x, ggml_tensor* gamma, ggml_tensor* beta, float eps, bool rms,
                      ggml_tensor* addend = nullptr);

// Whether row_norm takes these operands (x dense f32; gamma and beta null or
// dense f32 of exactly x->ne[0] values).
bool row_norm_ok(const ggml_tensor* x, const ggml_tensor* gamma, const ggml_tensor* beta);

}  // namespace dg::kernels
