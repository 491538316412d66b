#include "resize.h"
#include "../gg.h"
#include "thread_share.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace dg::kernels {

int64_t nearest_index(int64_t o, int64_t in, int64_t out, bool half_pixel) {
    const float scale = float(in) / float(out);
    // (the same float arithmetic as PyTorch's upsampling kernels)
    const float src = half_pixel ? float((double(o) + 0.5) * double(scale)) : float(o) * scale;
    return std::min(int64_t(std::floor(src)), in - 1);
}

namespace {

void resize_kernel(ggml_tensor* dst, int ith, int nth, void* ud) {
    const ResizeShape& s = *static_cast<const ResizeShape*>(ud);
    const auto* x = static_cast<const float*>(dst->src[0]->data);
    auto* y = static_cast<float*>(dst->data);
    thread_local std::vector<int64_t> rows, cols;
    rows.resize(size_t(s.OH));
    cols.resize(size_t(s.OW));
    for (int64_t i = 0; i < s.OH; ++i) rows[size_t(i)] = nearest_index(i, s.H, s.OH, s.half_pixel);
    for (int64_t i = 0; i < s.OW; ++i) cols[size_t(i)] = nearest_index(i, s.W, s.OW, s.half_pixel);
    if (!s.nxc) {  // tasks: output rows of every plane
        const int64_t n_rows = s.N * s.C * s.OH;
        const auto [r0, r1] = thread_share(n_rows, ith, nth);
        for (int64_t r = r0; r < r1; ++r) {
            const int64_t plane = r / s.OH, oh = r % s.OH;
            const float* xr = x + (plane * s.H + rows[size_t(oh)]) * s.W;
            float* yr = y + r * s.OW;
            for (int64_t ow = 0; ow < s.OW; ++ow) yr[ow] = xr[cols[size_t(ow)]];
        }
        return;
    }
    const int64_t n_rows = s.N * s.OH;
    const auto [r0, r1] = thread_share(n_rows, ith, nth);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t n = r / s.OH, oh = r % s.OH;
        const float* xr = x + (n * s.H + rows[size_t(oh)]) * s.W * s.C;
        float* yr = y + r * s.OW * s.C;
        for (int64_t ow = 0; ow < s.OW; ++ow)
            std::memcpy(yr + ow * s.C, xr + cols[size_t(ow)] * s.C, size_t(s.C) * sizeof(float));
    }
}

}  // namespace

ggml_tensor* resize_nearest(ggml_context* ctx, ggml_tensor* src, const ResizeShape* shape, const int64_t dst_ne[4]) {
    ggml_tensor* args[1] = {src};
    return gg::custom_4d(ctx, GGML_TYPE_F32, dst_ne[0], dst_ne[1], dst_ne[2], dst_ne[3], args, 1, resize_kernel,
                         GGML_N_TASKS_MAX, const_cast<ResizeShape*>(shape));
}

}  // namespace dg::kernels
