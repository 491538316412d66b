// Helpers of the portable lowerings: what an op computes off the host CPU
// (an RPC device, a GPU) with ggml's own ops, which every ggml backend has,
// where the host CPU runs one of our kernels. Each takes and returns F32
// tensors, contiguous, and uses only ops ggml-cuda implements for F32
// (checked against its supports_op: unary ABS / STEP on contiguous tensors,
// SCALE, ADD, CONCAT, ARANGE, CPY F32 -> I32, GET_ROWS).
#pragma once

#include "../lowering.h"

namespace dg::portable {

// 1 where x is NaN, else 0: 1 - step(|x| + 1) (every number and infinity gives step 1).
ggml_tensor* is_nan(const LowerCtx& c, ggml_tensor* x);

// 1 where x is -inf, else 0: step(-x - FLT_MAX).
ggml_tensor* is_neg_inf(const LowerCtx& c, ggml_tensor* x);

// Element by element, a where pick is 1 and b where it is 0 (pick, a and b of one shape, pick 0 or 1):
// exact for every value, infinities and NaN included, as a row gather from [a, b] (no arithmetic on
// the values, which x * 0 would turn into NaN for an infinite x). Rows (ne0) of at most 2^23 values.
ggml_tensor* select(const LowerCtx& c, ggml_tensor* pick, ggml_tensor* a, ggml_tensor* b);

// x (any float or I32 ggml type) as a dense F32 tensor.
ggml_tensor* dense_f32(const LowerCtx& c, ggml_tensor* x);

}  // namespace dg::portable
