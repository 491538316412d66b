// Sorting along rows (TopK, ArgSort; ops/sort.py), as ggml custom ops: a
// stable sort of each row's indices (equal values keep their order), NaN
// above every number. ggml's own argsort and top_k use std::sort (not
// stable; undefined with NaN) and top_k returns its k in no order.
#pragma once

#include <cstdint>

#include "ggml.h"

namespace dg::kernels {

// I32 [k, rows...]: the indices of each row of `a` (F32 or I32, dense rows of
// ne0) in sorted order, the first k (1 <= k <= a->ne[0]).
ggml_tensor* argsort_rows(ggml_context* ctx, ggml_tensor* a, int64_t k, bool descending);

// out[i, r...] = a[idx[i, r...], r...]: the values at the indices of each row
// (a F32 or I32 with dense rows; idx I32 [k, rows...] in [0, a->ne[0])).
ggml_tensor* take_rows(ggml_context* ctx, ggml_tensor* a, ggml_tensor* idx);

}  // namespace dg::kernels
