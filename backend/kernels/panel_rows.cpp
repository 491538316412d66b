#include "panel_rows.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "../gg.h"
#include "f32_panels.h"
#include "quant_panels.h"

namespace dg::kernels {

namespace {

void gather_kernel(ggml_tensor* dst, int ith, int nth, void*) {
    const ggml_tensor* table = dst->src[0];
    const ggml_tensor* idx = dst->src[1];
    const ggml_type type = table->type;
    const int64_t K = table->ne[0], N = table->ne[1], n = idx->ne[0];
    const int64_t nb = K / ggml_blck_size(type);
    const bool floats = type == GGML_TYPE_F32 || type == GGML_TYPE_F16 || type == GGML_TYPE_BF16;
    const auto to_float = ggml_get_type_traits(type)->to_float;
    thread_local std::vector<uint8_t> row;
    row.resize(ggml_row_size(type, K));
    const int64_t per = (n + nth - 1) / nth, i0 = std::min(n, per * ith), i1 = std::min(n, i0 + per);
    for (int64_t i = i0; i < i1; ++i) {
        const int64_t r = static_cast<const int32_t*>(idx->data)[i];
        float* out = reinterpret_cast<float*>(static_cast<char*>(dst->data) + i * dst->nb[1]);
        if (floats) {
            panel_row_to_f32(type, N, K, table->data, r, out);
            continue;
        }
        unpack_quant_panel_row(type, N, nb, static_cast<const uint8_t*>(table->data), r, row.data());
        to_float(row.data(), out, K);
    }
}

}  // namespace

ggml_tensor* gather_panel_rows(ggml_context* ctx, ggml_tensor* table, ggml_tensor* idx) {
    ggml_tensor* args[2] = {table, idx};
    return gg::custom_4d(ctx, GGML_TYPE_F32, table->ne[0], idx->ne[0], 1, 1, args, 2, gather_kernel, GGML_N_TASKS_MAX,
                         nullptr);
}

}  // namespace dg::kernels
