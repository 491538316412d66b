// A kernel that makes computed indices safe for ggml_get_rows / ggml_set_rows.
#pragma once

#include "../lowering.h"
#include "ggml.h"

namespace dg::kernels {

// out = clamp(idx, 0, limit-1) (I32); the first value outside [0, limit) is recorded in `check`.
ggml_tensor* clamp_indices(ggml_context* ctx, ggml_tensor* idx, KernelIndexCheck* check);

}  // namespace dg::kernels
