#include "index_check.h"
#include "../gg.h"
#include "thread_share.h"

namespace dg::kernels {

namespace {

void clamp_kernel(ggml_tensor* dst, int ith, int nth, void* ud) {
    auto* chk = static_cast<KernelIndexCheck*>(ud);
    const ggml_tensor* src = dst->src[0];
    const int64_t n = ggml_nelements(dst);
    const auto [i0, i1] = thread_share(n, ith, nth);
    const int32_t* in = static_cast<const int32_t*>(src->data);
    int32_t* out = static_cast<int32_t*>(dst->data);
    for (int64_t i = i0; i < i1; ++i) {
        int32_t v = in[i];
        if (v < 0 || v >= chk->limit) {
            if (!chk->bad.exchange(true)) chk->value = v;
            v = v < 0 ? 0 : int32_t(chk->limit - 1);
        }
        out[i] = v;
    }
}

}  // namespace

ggml_tensor* clamp_indices(ggml_context* ctx, ggml_tensor* idx, KernelIndexCheck* check) {
    ggml_tensor* args[1] = {idx};
    return gg::custom_4d(ctx, GGML_TYPE_I32, idx->ne[0], idx->ne[1], idx->ne[2], idx->ne[3], args, 1, clamp_kernel,
                          GGML_N_TASKS_MAX, check);
}

}  // namespace dg::kernels
