#include "pool.h"
#include "../gg.h"
#include "thread_share.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace dg::kernels {

namespace {

// The input elements one output reads along an axis: first, first + step, ... (count of them),
// and the divisor of an average over that axis.
struct Window {
    int64_t first = 0, step = 1, count = 0, divisor = 1;
};

Window window(const PoolShape& s, bool w_axis, int64_t o) {
    const int64_t L = w_axis ? s.W : s.H, n = w_axis ? s.OW : s.OH;
    Window r;
    if (s.kind == PoolKind::AdaptiveAvg) {
        r.first = o * L / n;
        const int64_t end = ((o + 1) * L + n - 1) / n;
        r.count = r.divisor = end - r.first;
        return r;
    }
    const int64_t K = w_axis ? s.KW : s.KH, stride = w_axis ? s.sw : s.sh, d = w_axis ? s.dw : s.dh;
    const int64_t pad = w_axis ? s.pw : s.ph, pad_end = w_axis ? s.pw_end : s.ph_end;
    const int64_t start = o * stride - pad;
    const int64_t k0 = start >= 0 ? 0 : (-start + d - 1) / d;
    const int64_t k1 = std::min(K, L - 1 - start < 0 ? int64_t(0) : (L - 1 - start) / d + 1);
    r.first = start + k0 * d;
    r.step = d;
    r.count = std::max<int64_t>(0, k1 - k0);
    // positions inside the padded input [-pad, L + pad_end) (start >= -pad always)
    r.divisor = s.exclude_pad ? r.count : std::max<int64_t>(1, std::min(K, L + pad_end - start));
    return r;
}

inline float max_nan(float acc, float v) { return (v > acc || v != v) ? v : acc; }

void pool_kernel(ggml_tensor* dst, int ith, int nth, void* ud) {
    const PoolShape& s = *static_cast<const PoolShape*>(ud);
    const auto* x = static_cast<const float*>(dst->src[0]->data);
    auto* y = static_cast<float*>(dst->data);
    const bool is_max = s.kind == PoolKind::Max;
    thread_local std::vector<Window> cols;  // the windows along W, the same for every row
    cols.resize(size_t(s.OW));
    for (int64_t ow = 0; ow < s.OW; ++ow) cols[size_t(ow)] = window(s, true, ow);
    const float lowest = -std::numeric_limits<float>::infinity();

    if (!s.nxc) {  // tasks: channel planes
        const int64_t planes = s.N * s.C;
        const auto [t0, t1] = thread_share(planes, ith, nth);
        for (int64_t t = t0; t < t1; ++t) {
            const float* xp = x + t * s.H * s.W;
            float* yp = y + t * s.OH * s.OW;
            for (int64_t oh = 0; oh < s.OH; ++oh) {
                const Window wh = window(s, false, oh);
                for (int64_t ow = 0; ow < s.OW; ++ow) {
                    const Window& ww = cols[size_t(ow)];
                    float acc = is_max ? lowest : 0.0f;
                    for (int64_t i = 0; i < wh.count; ++i) {
                        const float* xr = xp + (wh.first + i * wh.step) * s.W + ww.first;
                        if (is_max)
                            for (int64_t j = 0; j < ww.count; ++j) acc = max_nan(acc, xr[j * ww.step]);
                        else
                            for (int64_t j = 0; j < ww.count; ++j) acc += xr[j * ww.step];
                    }
                    yp[oh * s.OW + ow] = is_max ? acc : acc / float(wh.divisor * ww.divisor);
                }
            }
        }
        return;
    }
    // NXC: tasks are output rows, each output a vector of C channels
    const int64_t rows = s.N * s.OH, C = s.C;
    const auto [t0, t1] = thread_share(rows, ith, nth);
    for (int64_t t = t0; t < t1; ++t) {
        const int64_t n = t / s.OH, oh = t % s.OH;
        const Window wh = window(s, false, oh);
        for (int64_t ow = 0; ow < s.OW; ++ow) {
            const Window& ww = cols[size_t(ow)];
            float* acc = y + ((n * s.OH + oh) * s.OW + ow) * C;
            std::fill(acc, acc + C, is_max ? lowest : 0.0f);
            for (int64_t i = 0; i < wh.count; ++i)
                for (int64_t j = 0; j < ww.count; ++j) {
                    const float* xr = x + ((n * s.H + wh.first + i * wh.step) * s.W + ww.first + j * ww.step) * C;
                    if (is_max)
                        for (int64_t c = 0; c < C; ++c) acc[c] = max_nan(acc[c], xr[c]);
                    else
                        for (int64_t c = 0; c < C; ++c) acc[c] += xr[c];
                }
            if (!is_max) {
                const float div = float(wh.divisor * ww.divisor);
                for (int64_t c = 0; c < C; ++c) acc[c] /= div;
            }
        }
    }
}

}  // namespace

ggml_tensor* pool2d(ggml_context* ctx, ggml_tensor* src, const PoolShape* shape, const int64_t dst_ne[4]) {
    ggml_tensor* args[1] = {src};
    return gg::custom_4d(ctx, GGML_TYPE_F32, dst_ne[0], dst_ne[1], dst_ne[2], dst_ne[3], args, 1, pool_kernel,
                         GGML_N_TASKS_MAX, const_cast<PoolShape*>(shape));
}

}  // namespace dg::kernels
