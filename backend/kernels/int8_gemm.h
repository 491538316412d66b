// The int8 matrix product of QuantizedMatMul (ops/quantize.py), in exact
// integer arithmetic (the parameters, dot products and epilogue of
// int8_dot.h): blocks of activation rows x weight rows through int8_dot,
// the zero points taken out with the rows' and columns' sums.
#pragma once

#include "ggml.h"
#include "int8_dot.h"

namespace dg::kernels {

// out [N, M] (ggml ne: N innermost) = the product of a [K, M] and w [K, N]
// (ggml ne; both I8, dense rows), plus bias (F32 [N], or null). out is F32,
// or I8 when p->quantize_out.
ggml_tensor* int8_matmul(ggml_context* ctx, ggml_tensor* a, ggml_tensor* w, ggml_tensor* bias, const Int8Params* p);

}  // namespace dg::kernels
