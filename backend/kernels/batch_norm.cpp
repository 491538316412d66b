#include "batch_norm.h"
#include "../gg.h"
#include "thread_share.h"

#include <cmath>
#include <vector>

namespace dg::kernels {

namespace {

void batch_norm_kernel(ggml_tensor* dst, int ith, int nth, void* ud) {
    const BatchNormShape& s = *static_cast<const BatchNormShape*>(ud);
    const auto* x = static_cast<const float*>(dst->src[0]->data);
    const auto* gamma = static_cast<const float*>(dst->src[1]->data);
    const auto* beta = static_cast<const float*>(dst->src[2]->data);
    const auto* mean = static_cast<const float*>(dst->src[3]->data);
    const auto* var = static_cast<const float*>(dst->src[4]->data);
    auto* y = static_cast<float*>(dst->data);
    thread_local std::vector<float> scale, shift;
    scale.resize(size_t(s.C));
    shift.resize(size_t(s.C));
    for (int64_t c = 0; c < s.C; ++c) {
        const double a = double(gamma[c]) / std::sqrt(double(var[c]) + double(s.eps));
        scale[size_t(c)] = float(a);
        shift[size_t(c)] = float(double(beta[c]) - double(mean[c]) * a);
    }
    const float* a = scale.data();
    const float* b = shift.data();
    if (s.inner == 1) {  // NXC: rows of C channels
        const auto [r0, r1] = thread_share(s.outer, ith, nth);
        for (int64_t r = r0; r < r1; ++r) {
            const float* xr = x + r * s.C;
            float* yr = y + r * s.C;
            for (int64_t c = 0; c < s.C; ++c) yr[c] = xr[c] * a[c] + b[c];
        }
        return;
    }
    const int64_t rows = s.outer * s.C;  // NCX: rows of one channel's spatial positions
    const auto [r0, r1] = thread_share(rows, ith, nth);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t c = r % s.C;
        const float* xr = x + r * s.inner;
        float* yr = y + r * s.inner;
        const float ac = a[c], bc = b[c];
        for (int64_t i = 0; i < s.inner; ++i) yr[i] = xr[i] * ac + bc;
    }
}

}  // namespace

ggml_tensor* batch_norm(ggml_context* ctx, ggml_tensor* src, ggml_tensor* gamma, ggml_tensor* beta, ggml_tensor* mean,
                        ggml_tensor* variance, const BatchNormShape* shape) {
    ggml_tensor* args[5] = {src, gamma, beta, mean, variance};
    return gg::custom_4d(ctx, GGML_TYPE_F32, src->ne[0], src->ne[1], src->ne[2], src->ne[3], args, 5, batch_norm_kernel,
                         GGML_N_TASKS_MAX, const_cast<BatchNormShape*>(shape));
}

}  // namespace dg::kernels
