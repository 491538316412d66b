#include "sort.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "../gg.h"
#include "thread_share.h"

namespace dg::kernels {

namespace {

// This thread's rows (i1, i2, i3) of a tensor with ne like t's.
template <class F>
void for_rows(const ggml_tensor* t, int ith, int nth, F&& f) {
    const int64_t n1 = t->ne[1], n2 = t->ne[2];
    const int64_t rows = n1 * n2 * t->ne[3];
    const auto [r0, r1] = thread_share(rows, ith, nth);
    for (int64_t r = r0; r < r1; ++r) f(r % n1, (r / n1) % n2, r / (n1 * n2));
}

template <class T>
const T* row_of(const ggml_tensor* t, int64_t i1, int64_t i2, int64_t i3) {
    return reinterpret_cast<const T*>(static_cast<const char*>(t->data) + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3]);
}

template <class T>
T* row_of(ggml_tensor* t, int64_t i1, int64_t i2, int64_t i3) {
    return reinterpret_cast<T*>(static_cast<char*>(t->data) + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3]);
}

template <class T>
inline bool is_nan(T v) {
    if constexpr (std::is_floating_point_v<T>) return v != v;
    return false;
}

template <class T>
void sort_row(const T* x, int64_t n, bool descending, std::vector<int32_t>& order) {
    order.resize(size_t(n));
    for (int64_t i = 0; i < n; ++i) order[size_t(i)] = int32_t(i);
    if (descending)  // NaN first, then larger values
        std::stable_sort(order.begin(), order.end(), [x](int32_t a, int32_t b) {
            return !is_nan(x[b]) && (is_nan(x[a]) || x[a] > x[b]);
        });
    else  // smaller values first, NaN last
        std::stable_sort(order.begin(), order.end(), [x](int32_t a, int32_t b) {
            return !is_nan(x[a]) && (is_nan(x[b]) || x[a] < x[b]);
        });
}

// userdata: k << 1 | descending
void argsort_kernel(ggml_tensor* dst, int ith, int nth, void* ud) {
    const uint64_t u = uint64_t(reinterpret_cast<uintptr_t>(ud));
    const bool descending = u & 1;
    const int64_t k = int64_t(u >> 1);
    const ggml_tensor* a = dst->src[0];
    thread_local std::vector<int32_t> order;
    for_rows(dst, ith, nth, [&](int64_t i1, int64_t i2, int64_t i3) {
        if (a->type == GGML_TYPE_F32) sort_row(row_of<float>(a, i1, i2, i3), a->ne[0], descending, order);
        else sort_row(row_of<int32_t>(a, i1, i2, i3), a->ne[0], descending, order);
        std::copy(order.begin(), order.begin() + k, row_of<int32_t>(dst, i1, i2, i3));
    });
}

template <class T>
void take_typed(ggml_tensor* dst, int ith, int nth) {
    const ggml_tensor* a = dst->src[0];
    const ggml_tensor* idx = dst->src[1];
    for_rows(dst, ith, nth, [&](int64_t i1, int64_t i2, int64_t i3) {
        const T* in = row_of<T>(a, i1, i2, i3);
        const int32_t* ix = row_of<int32_t>(idx, i1, i2, i3);
        T* out = row_of<T>(dst, i1, i2, i3);
        for (int64_t i = 0; i < dst->ne[0]; ++i) out[i] = in[ix[i]];  // (argsort_rows made them, in range)
    });
}

void take_kernel(ggml_tensor* dst, int ith, int nth, void*) {
    if (dst->type == GGML_TYPE_F32) take_typed<float>(dst, ith, nth);
    else take_typed<int32_t>(dst, ith, nth);
}

void need_rows(const char* fn, const ggml_tensor* a) {
    if ((a->type != GGML_TYPE_F32 && a->type != GGML_TYPE_I32) || a->nb[0] != ggml_type_size(a->type))
        fail<gg::Violation>(fn, ": ", gg::describe(a), " must be F32 or I32 with dense rows");
}

}  // namespace

ggml_tensor* argsort_rows(ggml_context* ctx, ggml_tensor* a, int64_t k, bool descending) {
    need_rows("argsort_rows", a);
    if (k < 1 || k > a->ne[0] || a->ne[0] > INT32_MAX)
        fail<gg::Violation>("argsort_rows: k = ", k, " for rows of ", a->ne[0]);
    ggml_tensor* args[1] = {a};
    void* ud = reinterpret_cast<void*>(uintptr_t((uint64_t(k) << 1) | (descending ? 1u : 0u)));
    return gg::custom_4d(ctx, GGML_TYPE_I32, k, a->ne[1], a->ne[2], a->ne[3], args, 1, argsort_kernel, GGML_N_TASKS_MAX, ud);
}

ggml_tensor* take_rows(ggml_context* ctx, ggml_tensor* a, ggml_tensor* idx) {
    need_rows("take_rows", a);
    if (idx->type != GGML_TYPE_I32 || idx->ne[1] != a->ne[1] || idx->ne[2] != a->ne[2] || idx->ne[3] != a->ne[3] ||
        idx->nb[0] != sizeof(int32_t))
        fail<gg::Violation>("take_rows: indices ", gg::describe(idx), " for rows of ", gg::describe(a));
    ggml_tensor* args[2] = {a, idx};
    return gg::custom_4d(ctx, a->type, idx->ne[0], a->ne[1], a->ne[2], a->ne[3], args, 2, take_kernel, GGML_N_TASKS_MAX,
                         nullptr);
}

}  // namespace dg::kernels
