// CPU kernels of the ops that generate index tensors and masks (Arange,
// GenIndex, Full) and of the logical ops, run as ggml custom ops. Their
// parameters travel in the custom op's userdata pointer (no storage to keep
// alive), so each is a plain function of the shape it is given.
#pragma once

#include <cstdint>

#include "ggml.h"

namespace dg::index_kernels {

enum class Logical { And, Or };

// out[i] = start + i * step, i < n (ne = {n, 1, 1, 1}); type F32 or I32.
// The caller checks that every value fits the type (I32).
ggml_tensor* arange(ggml_context* ctx, ggml_type type, int64_t n, int32_t start, int32_t step);

// out (I32, shape ne) = each element's index along ggml dimension `dim` (0..3).
ggml_tensor* gen_index(ggml_context* ctx, const int64_t ne[4], int dim);

// out (shape ne) with every element `value`: type F32, F16 or BF16.
ggml_tensor* fill_float(ggml_context* ctx, ggml_type type, const int64_t ne[4], float value);
// out (I32, shape ne) with every element `value`.
ggml_tensor* fill_int(ggml_context* ctx, const int64_t ne[4], int32_t value);

// out (I32, 0/1) = (a != 0) and/or (b != 0), numpy broadcasting (each of a, b
// may have 1 where out has n); a, b: I32.
ggml_tensor* logical(ggml_context* ctx, Logical op, ggml_tensor* a, ggml_tensor* b, const int64_t ne[4]);

// out (I32, 0/1) = (a == 0); a: I32.
ggml_tensor* logical_not(ggml_context* ctx, ggml_tensor* a);

}  // namespace dg::index_kernels
