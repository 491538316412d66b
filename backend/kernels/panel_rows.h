// A Gather of a table whose rows a compiled partition laid out in panels
// (f32_panels.h, quant_panels.h) because a MatMul reads it too: a tied
// embedding and its output layer, the largest weight of many small language
// models, whose product then runs over the panels at every row count. Each
// row read is put back together: f32, f16 and bf16 elements converted to f32
// (exact), quantized rows back into ggml's blocks and converted by ggml's own
// to_float, so a Gather gives the very values ggml_get_rows gives on the rows.
#pragma once

#include "ggml.h"

namespace dg::kernels {

// F32 [K, n]: rows idx[0..n) (I32, each in [0, N): checked by the caller) of `table` ([K, N], in panels).
ggml_tensor* gather_panel_rows(ggml_context* ctx, ggml_tensor* table, ggml_tensor* idx);

}  // namespace dg::kernels
