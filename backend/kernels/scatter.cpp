#include "scatter.h"

#include <algorithm>
#include <cstring>

#include "../gg.h"
#include "../lowering.h"
#include "thread_share.h"

namespace dg::kernels {

namespace {

inline int32_t add_i(int32_t a, int32_t b) { return int32_t(uint32_t(a) + uint32_t(b)); }
inline int32_t mul_i(int32_t a, int32_t b) { return int32_t(uint32_t(a) * uint32_t(b)); }

template <class T>
void apply(T* out, const T* in, int64_t n, ScatterReduce r) {
    switch (r) {
        case ScatterReduce::None: std::memcpy(out, in, size_t(n) * sizeof(T)); return;
        case ScatterReduce::Add:
            for (int64_t i = 0; i < n; ++i) {
                if constexpr (std::is_same_v<T, float>) out[i] = out[i] + in[i];
                else out[i] = add_i(out[i], in[i]);
            }
            return;
        case ScatterReduce::Mul:
            for (int64_t i = 0; i < n; ++i) {
                if constexpr (std::is_same_v<T, float>) out[i] = out[i] * in[i];
                else out[i] = mul_i(out[i], in[i]);
            }
            return;
        case ScatterReduce::Max:  // NaN propagates (numpy's maximum)
            for (int64_t i = 0; i < n; ++i) out[i] = (in[i] > out[i] || in[i] != in[i]) ? in[i] : out[i];
            return;
        case ScatterReduce::Min:
            for (int64_t i = 0; i < n; ++i) out[i] = (in[i] < out[i] || in[i] != in[i]) ? in[i] : out[i];
            return;
    }
}

template <class T>
void scatter_typed(ggml_tensor* dst, int ith, int nth, const ScatterParams& p) {
    const ggml_tensor* data = dst->src[0];
    const ggml_tensor* idx = dst->src[1];
    const ggml_tensor* upd = dst->src[2];
    const int64_t S = dst->ne[0], outer = dst->ne[1], T_ = idx->ne[1];
    // this thread's columns of every slice
    const auto [c0, c1] = thread_share(S, ith, nth);
    if (c0 >= c1) return;
    for (int64_t o = 0; o < outer; ++o)
        std::memcpy(static_cast<char*>(dst->data) + o * dst->nb[1] + c0 * sizeof(T),
                    static_cast<const char*>(data->data) + o * data->nb[1] + c0 * sizeof(T), size_t(c1 - c0) * sizeof(T));
    for (int64_t t = 0; t < T_; ++t) {
        const int32_t* ix = reinterpret_cast<const int32_t*>(static_cast<const char*>(idx->data) + t * idx->nb[1]);
        int64_t slice = 0;
        bool ok = true;
        for (int j = 0; j < p.q; ++j) {
            int64_t v = ix[j];
            if (v < -p.dims[j] || v >= p.dims[j]) {
                KernelIndexCheck* chk = p.check[j];
                if (!chk->bad.exchange(true)) chk->value = v;
                ok = false;
                break;
            }
            slice += (v < 0 ? v + p.dims[j] : v) * p.stride[j];
        }
        if (!ok) continue;
        T* out = reinterpret_cast<T*>(static_cast<char*>(dst->data) + slice * dst->nb[1]) + c0;
        const T* in = reinterpret_cast<const T*>(static_cast<const char*>(upd->data) + t * upd->nb[1]) + c0;
        apply(out, in, c1 - c0, p.reduce);
    }
}

void scatter_kernel(ggml_tensor* dst, int ith, int nth, void* ud) {
    const auto& p = *static_cast<const ScatterParams*>(ud);
    if (dst->type == GGML_TYPE_F32) scatter_typed<float>(dst, ith, nth, p);
    else scatter_typed<int32_t>(dst, ith, nth, p);
}

}  // namespace

ggml_tensor* scatter_nd(ggml_context* ctx, ggml_tensor* data, ggml_tensor* idx, ggml_tensor* upd, const ScatterParams* p) {
    const char* fn = "scatter_nd";
    if ((data->type != GGML_TYPE_F32 && data->type != GGML_TYPE_I32) || upd->type != data->type || idx->type != GGML_TYPE_I32)
        fail<gg::Violation>(fn, ": data ", gg::describe(data), ", indices ", gg::describe(idx), ", updates ", gg::describe(upd));
    if (!ggml_is_contiguous(data) || !ggml_is_contiguous(idx) || !ggml_is_contiguous(upd))
        fail<gg::Violation>(fn, ": data, indices and updates must be dense");
    int64_t outer = 1;
    for (int j = 0; j < p->q; ++j) outer *= p->dims[j];
    if (p->q < 1 || p->q > 4 || idx->ne[0] != p->q || data->ne[1] != outer || data->ne[2] != 1 || data->ne[3] != 1 ||
        upd->ne[0] != data->ne[0] || upd->ne[1] != idx->ne[1] || upd->ne[2] != 1 || upd->ne[3] != 1 || idx->ne[2] != 1 ||
        idx->ne[3] != 1)
        fail<gg::Violation>(fn, ": data ", gg::describe(data), ", indices ", gg::describe(idx), ", updates ",
                            gg::describe(upd), " for ", p->q, " index components");
    for (int j = 0; j < p->q; ++j)
        if (!p->check[j]) fail<gg::Violation>(fn, ": no index check for component ", j);
    ggml_tensor* args[3] = {data, idx, upd};
    return gg::custom_4d(ctx, data->type, data->ne[0], data->ne[1], 1, 1, args, 3, scatter_kernel, GGML_N_TASKS_MAX,
                         const_cast<ScatterParams*>(p));
}

}  // namespace dg::kernels
