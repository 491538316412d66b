#include "pool.h"
#include "../gg.h"
#include "thread_share.h"
#include "vector_clones.h"

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

inline float max_nan(float acc, float v) { return (v > acc) | (v != v) ? v : acc; }

// acc[i] = max_nan(acc[i], x[i]): one more input row of a window, over a whole row
DG_VECTOR_BODY void max_into_body(float* __restrict acc, const float* __restrict x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) acc[i] = max_nan(acc[i], x[i]);
}
DG_VECTORIZED(void, max_into, (float* acc, const float* x, int64_t n), (acc, x, n))

// y[o] = max_nan(y[o], r[o * stride]) for o < n: one tap of the windows that lie wholly in the row
// (strides 1 and 2 as constants, which the compiler vectorizes)
DG_VECTOR_BODY void max_tap_body(float* __restrict y, const float* __restrict r, int64_t n, int64_t stride) {
    if (stride == 1)
        for (int64_t o = 0; o < n; ++o) y[o] = max_nan(y[o], r[o]);
    else if (stride == 2)
        for (int64_t o = 0; o < n; ++o) y[o] = max_nan(y[o], r[2 * o]);
    else
        for (int64_t o = 0; o < n; ++o) y[o] = max_nan(y[o], r[o * stride]);
}
DG_VECTORIZED(void, max_tap, (float* y, const float* r, int64_t n, int64_t stride), (y, r, n, stride))

// Max pooling of one NCX plane (xp, H x W) into yp (OH x OW): per output row, the window's input rows
// reduced into `row` first, then the windows along it, a vector of outputs per tap where the window
// lies wholly in the row ([lo, hi) of `cols`), one output at a time at the edges.
void max_plane_ncx(const PoolShape& s, const std::vector<Window>& cols, int64_t lo, int64_t hi, const float* xp,
                   float* row, float* yp) {
    const float lowest = -std::numeric_limits<float>::infinity();
    for (int64_t oh = 0; oh < s.OH; ++oh) {
        const Window wh = window(s, false, oh);
        float* yr = yp + oh * s.OW;
        if (wh.count == 0) {
            std::fill(yr, yr + s.OW, lowest);
            continue;
        }
        std::copy(xp + wh.first * s.W, xp + (wh.first + 1) * s.W, row);
        for (int64_t i = 1; i < wh.count; ++i) max_into(row, xp + (wh.first + i * wh.step) * s.W, s.W);
        auto edge = [&](int64_t o0, int64_t o1) {  // one output at a time
            for (int64_t ow = o0; ow < o1; ++ow) {
                const Window& ww = cols[size_t(ow)];
                float acc = lowest;
                for (int64_t j = 0; j < ww.count; ++j) acc = max_nan(acc, row[ww.first + j * ww.step]);
                yr[ow] = acc;
            }
        };
        edge(0, lo);
        edge(hi, s.OW);
        if (hi > lo) {
            const float* r = row + cols[size_t(lo)].first;  // tap j of output lo + o: r[j * dw + o * sw]
            std::fill(yr + lo, yr + hi, lowest);
            for (int64_t j = 0; j < s.KW; ++j) max_tap(yr + lo, r + j * s.dw, hi - lo, s.sw);
        }
    }
}

void pool_kernel(ggml_tensor* dst, int ith, int nth, void* ud) {
    const PoolShape& s = *static_cast<const PoolShape*>(ud);
    const auto* x = static_cast<const float*>(dst->src[0]->data);
    auto* y = static_cast<float*>(dst->data);
    const bool is_max = s.kind == PoolKind::Max;
    thread_local std::vector<Window> cols;  // the windows along W, the same for every row
    cols.resize(size_t(s.OW));
    for (int64_t ow = 0; ow < s.OW; ++ow) cols[size_t(ow)] = window(s, true, ow);
    const float lowest = -std::numeric_limits<float>::infinity();

    if (!s.nxc && is_max) {  // tasks: channel planes
        // the outputs whose window along W is whole (its KW taps in the row): a contiguous range
        int64_t lo = 0, hi = 0;
        while (lo < s.OW && cols[size_t(lo)].count != s.KW) ++lo;
        for (hi = lo; hi < s.OW && cols[size_t(hi)].count == s.KW;) ++hi;
        thread_local std::vector<float> row;
        row.resize(size_t(s.W));
        const auto [t0, t1] = thread_share(s.N * s.C, ith, nth);
        for (int64_t t = t0; t < t1; ++t) max_plane_ncx(s, cols, lo, hi, x + t * s.H * s.W, row.data(), y + t * s.OH * s.OW);
        return;
    }
    if (!s.nxc) {  // average: tasks are channel planes
        const auto [t0, t1] = thread_share(s.N * s.C, ith, nth);
        for (int64_t t = t0; t < t1; ++t) {
            const float* xp = x + t * s.H * s.W;
            float* yp = y + t * s.OH * s.OW;
            for (int64_t oh = 0; oh < s.OH; ++oh) {
                const Window wh = window(s, false, oh);
                for (int64_t ow = 0; ow < s.OW; ++ow) {
                    const Window& ww = cols[size_t(ow)];
                    float acc = 0.0f;
                    for (int64_t i = 0; i < wh.count; ++i) {
                        const float* xr = xp + (wh.first + i * wh.step) * s.W + ww.first;
                        for (int64_t j = 0; j < ww.count; ++j) acc += xr[j * ww.step];
                    }
                    yp[oh * s.OW + ow] = acc / float(wh.divisor * ww.divisor);
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
