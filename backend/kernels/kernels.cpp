#include "kernels.h"
#include "../gg.h"

#include "gelu_erf.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace dg::kernels {

namespace {

// Rows of dst (ne1*ne2*ne3), split across threads.
template <class F>
void for_rows(const ggml_tensor* dst, int ith, int nth, F&& f) {
    const int64_t n1 = dst->ne[1], n2 = dst->ne[2], n3 = dst->ne[3];
    const int64_t rows = n1 * n2 * n3;
    const int64_t per = (rows + nth - 1) / nth;
    const int64_t r0 = per * ith, r1 = std::min(rows, r0 + per);
    for (int64_t r = r0; r < r1; ++r) {
        int64_t i1 = r % n1, i2 = (r / n1) % n2, i3 = r / (n1 * n2);
        f(i1, i2, i3);
    }
}

// Element (i0 of the row at i1,i2,i3) of a source broadcast to dst.
template <class T>
inline const T* row_ptr(const ggml_tensor* t, int64_t i1, int64_t i2, int64_t i3) {
    return reinterpret_cast<const T*>(static_cast<const char*>(t->data) + (t->ne[1] == 1 ? 0 : i1) * t->nb[1] +
                                      (t->ne[2] == 1 ? 0 : i2) * t->nb[2] + (t->ne[3] == 1 ? 0 : i3) * t->nb[3]);
}

template <class T>
inline T at(const T* row, const ggml_tensor* t, int64_t i0) {
    return *reinterpret_cast<const T*>(reinterpret_cast<const char*>(row) + (t->ne[0] == 1 ? 0 : i0) * t->nb[0]);
}

template <class T, class Op>
void binary_rows(ggml_tensor* dst, int ith, int nth, Op op) {
    const ggml_tensor* a = dst->src[0];
    const ggml_tensor* b = dst->src[1];
    for_rows(dst, ith, nth, [&](int64_t i1, int64_t i2, int64_t i3) {
        const T* ra = row_ptr<T>(a, i1, i2, i3);
        const T* rb = row_ptr<T>(b, i1, i2, i3);
        T* out = reinterpret_cast<T*>(static_cast<char*>(dst->data) + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3]);
        for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) out[i0] = op(at(ra, a, i0), at(rb, b, i0));
    });
}

// Integer arithmetic goes through uint32_t, where overflow wraps (defined
// behaviour) instead of being undefined as it is on int32_t.
inline float add(float x, float y) { return x + y; }
inline float sub(float x, float y) { return x - y; }
inline float mul(float x, float y) { return x * y; }
inline int32_t add(int32_t x, int32_t y) { return int32_t(uint32_t(x) + uint32_t(y)); }
inline int32_t sub(int32_t x, int32_t y) { return int32_t(uint32_t(x) - uint32_t(y)); }
inline int32_t mul(int32_t x, int32_t y) { return int32_t(uint32_t(x) * uint32_t(y)); }

template <class T>
void binary_typed(ggml_tensor* dst, int ith, int nth, Binary op) {
    switch (op) {
        case Binary::Max: return binary_rows<T>(dst, ith, nth, [](T x, T y) { return x > y || x != x ? x : y; });
        case Binary::Min: return binary_rows<T>(dst, ith, nth, [](T x, T y) { return x < y || x != x ? x : y; });
        case Binary::Add: return binary_rows<T>(dst, ith, nth, [](T x, T y) { return add(x, y); });
        case Binary::Sub: return binary_rows<T>(dst, ith, nth, [](T x, T y) { return sub(x, y); });
        case Binary::Mul: return binary_rows<T>(dst, ith, nth, [](T x, T y) { return mul(x, y); });
    }
}

void binary_kernel(ggml_tensor* dst, int ith, int nth, void* ud) {
    Binary op = Binary(reinterpret_cast<intptr_t>(ud));
    if (dst->type == GGML_TYPE_F32) binary_typed<float>(dst, ith, nth, op);
    else binary_typed<int32_t>(dst, ith, nth, op);
}

template <class F>
void unary_rows(ggml_tensor* dst, int ith, int nth, F f) {
    const ggml_tensor* a = dst->src[0];
    for_rows(dst, ith, nth, [&](int64_t i1, int64_t i2, int64_t i3) {
        const char* row = static_cast<const char*>(a->data) + i1 * a->nb[1] + i2 * a->nb[2] + i3 * a->nb[3];
        float* out = reinterpret_cast<float*>(static_cast<char*>(dst->data) + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3]);
        if (a->nb[0] == sizeof(float)) {  // contiguous rows: a loop the compiler can vectorize
            const float* in = reinterpret_cast<const float*>(row);
            for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) out[i0] = f(in[i0]);
        } else {
            for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) out[i0] = f(*reinterpret_cast<const float*>(row + i0 * a->nb[0]));
        }
    });
}

// 0.5 x (1 + tanh(u)) with u = sqrt(2/pi) (x + 0.044715 x^3), written as
// x * sigmoid(2u): the same value without the cancellation of 1 + tanh(u) for x < 0.
inline float gelu_tanh(float x) {
    constexpr float k2 = 2.0f * 0.7978845608028654f;
    const float u2 = k2 * x * (1.0f + 0.044715f * x * x);
    return x / (1.0f + std::exp(-u2));
}

void gelu_erf_rows(ggml_tensor* dst, int ith, int nth) {
    const ggml_tensor* a = dst->src[0];
    for_rows(dst, ith, nth, [&](int64_t i1, int64_t i2, int64_t i3) {
        const char* row = static_cast<const char*>(a->data) + i1 * a->nb[1] + i2 * a->nb[2] + i3 * a->nb[3];
        float* out = reinterpret_cast<float*>(static_cast<char*>(dst->data) + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3]);
        if (a->nb[0] == sizeof(float)) return gelu_erf_row(reinterpret_cast<const float*>(row), out, dst->ne[0]);
        for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) gelu_erf_row(reinterpret_cast<const float*>(row + i0 * a->nb[0]), out + i0, 1);
    });
}

void unary_kernel(ggml_tensor* dst, int ith, int nth, void* ud) {
    switch (Unary(reinterpret_cast<intptr_t>(ud))) {
        case Unary::Relu: return unary_rows(dst, ith, nth, [](float x) { return !(x <= 0.0f) ? x : 0.0f; });  // NaN stays NaN
        case Unary::GeluTanh: return unary_rows(dst, ith, nth, gelu_tanh);
        case Unary::GeluErf: return gelu_erf_rows(dst, ith, nth);
    }
}

template <class T>
void compare_typed(ggml_tensor* dst, int ith, int nth, Compare op) {
    const ggml_tensor* a = dst->src[0];
    const ggml_tensor* b = dst->src[1];
    for_rows(dst, ith, nth, [&](int64_t i1, int64_t i2, int64_t i3) {
        const T* ra = row_ptr<T>(a, i1, i2, i3);
        const T* rb = row_ptr<T>(b, i1, i2, i3);
        int32_t* out = reinterpret_cast<int32_t*>(static_cast<char*>(dst->data) + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3]);
        for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) {
            T x = at(ra, a, i0), y = at(rb, b, i0);
            bool r = false;
            switch (op) {
                case Compare::Eq: r = x == y; break;
                case Compare::Ne: r = x != y; break;
                case Compare::Gt: r = x > y; break;
                case Compare::Ge: r = x >= y; break;
                case Compare::Lt: r = x < y; break;
                case Compare::Le: r = x <= y; break;
            }
            out[i0] = r ? 1 : 0;
        }
    });
}

void compare_kernel(ggml_tensor* dst, int ith, int nth, void* ud) {
    Compare op = Compare(reinterpret_cast<intptr_t>(ud));
    if (dst->src[0]->type == GGML_TYPE_F32) compare_typed<float>(dst, ith, nth, op);
    else compare_typed<int32_t>(dst, ith, nth, op);
}

template <class T>
void select_typed(ggml_tensor* dst, int ith, int nth) {
    const ggml_tensor* c = dst->src[0];
    const ggml_tensor* a = dst->src[1];
    const ggml_tensor* b = dst->src[2];
    for_rows(dst, ith, nth, [&](int64_t i1, int64_t i2, int64_t i3) {
        const int32_t* rc = row_ptr<int32_t>(c, i1, i2, i3);
        const T* ra = row_ptr<T>(a, i1, i2, i3);
        const T* rb = row_ptr<T>(b, i1, i2, i3);
        T* out = reinterpret_cast<T*>(static_cast<char*>(dst->data) + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3]);
        for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) out[i0] = at(rc, c, i0) ? at(ra, a, i0) : at(rb, b, i0);
    });
}

void select_kernel(ggml_tensor* dst, int ith, int nth, void*) {
    if (dst->type == GGML_TYPE_F32) select_typed<float>(dst, ith, nth);
    else select_typed<int32_t>(dst, ith, nth);
}

template <class T>
void reduce_typed(ggml_tensor* dst, int ith, int nth, ReduceRows op) {
    const ggml_tensor* a = dst->src[0];
    for_rows(dst, ith, nth, [&](int64_t i1, int64_t i2, int64_t i3) {
        const char* row = static_cast<const char*>(a->data) + i1 * a->nb[1] + i2 * a->nb[2] + i3 * a->nb[3];
        T acc = *reinterpret_cast<const T*>(row);
        for (int64_t i0 = 1; i0 < a->ne[0]; ++i0) {
            T x = *reinterpret_cast<const T*>(row + i0 * a->nb[0]);
            switch (op) {
                case ReduceRows::Max: acc = (x > acc || x != x) ? x : acc; break;
                case ReduceRows::Min: acc = (x < acc || x != x) ? x : acc; break;
                case ReduceRows::Sum: acc = T(acc + x); break;
            }
        }
        *reinterpret_cast<T*>(static_cast<char*>(dst->data) + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3]) = acc;
    });
}

void reduce_kernel(ggml_tensor* dst, int ith, int nth, void* ud) {
    ReduceRows op = ReduceRows(reinterpret_cast<intptr_t>(ud));
    if (dst->type == GGML_TYPE_F32) reduce_typed<float>(dst, ith, nth, op);
    else reduce_typed<int32_t>(dst, ith, nth, op);
}

void nonzero_kernel(ggml_tensor* dst, int ith, int nth, void*) {
    const ggml_tensor* a = dst->src[0];
    for_rows(dst, ith, nth, [&](int64_t i1, int64_t i2, int64_t i3) {
        const char* row = static_cast<const char*>(a->data) + i1 * a->nb[1] + i2 * a->nb[2] + i3 * a->nb[3];
        int32_t* out = reinterpret_cast<int32_t*>(static_cast<char*>(dst->data) + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3]);
        for (int64_t i0 = 0; i0 < a->ne[0]; ++i0) {
            const char* p = row + i0 * a->nb[0];
            out[i0] = a->type == GGML_TYPE_F32 ? (*reinterpret_cast<const float*>(p) != 0.0f)
                                               : (*reinterpret_cast<const int32_t*>(p) != 0);
        }
    });
}

void* tag(int v) { return reinterpret_cast<void*>(intptr_t(v)); }

}  // namespace

ggml_tensor* binary(ggml_context* ctx, Binary op, ggml_tensor* a, ggml_tensor* b, const int64_t ne[4]) {
    ggml_tensor* args[2] = {a, b};
    return gg::custom_4d(ctx, a->type, ne[0], ne[1], ne[2], ne[3], args, 2, binary_kernel, GGML_N_TASKS_MAX, tag(int(op)));
}

ggml_tensor* unary(ggml_context* ctx, Unary op, ggml_tensor* a) {
    ggml_tensor* args[1] = {a};
    return gg::custom_4d(ctx, GGML_TYPE_F32, a->ne[0], a->ne[1], a->ne[2], a->ne[3], args, 1, unary_kernel, GGML_N_TASKS_MAX,
                          tag(int(op)));
}

ggml_tensor* compare(ggml_context* ctx, Compare op, ggml_tensor* a, ggml_tensor* b, const int64_t ne[4]) {
    ggml_tensor* args[2] = {a, b};
    return gg::custom_4d(ctx, GGML_TYPE_I32, ne[0], ne[1], ne[2], ne[3], args, 2, compare_kernel, GGML_N_TASKS_MAX, tag(int(op)));
}

ggml_tensor* select(ggml_context* ctx, ggml_tensor* cond, ggml_tensor* a, ggml_tensor* b, const int64_t ne[4]) {
    ggml_tensor* args[3] = {cond, a, b};
    return gg::custom_4d(ctx, a->type, ne[0], ne[1], ne[2], ne[3], args, 3, select_kernel, GGML_N_TASKS_MAX, nullptr);
}

ggml_tensor* reduce_rows(ggml_context* ctx, ReduceRows op, ggml_tensor* a) {
    ggml_tensor* args[1] = {a};
    return gg::custom_4d(ctx, a->type, 1, a->ne[1], a->ne[2], a->ne[3], args, 1, reduce_kernel, GGML_N_TASKS_MAX, tag(int(op)));
}

ggml_tensor* nonzero(ggml_context* ctx, ggml_tensor* a) {
    ggml_tensor* args[1] = {a};
    return gg::custom_4d(ctx, GGML_TYPE_I32, a->ne[0], a->ne[1], a->ne[2], a->ne[3], args, 1, nonzero_kernel, GGML_N_TASKS_MAX,
                          nullptr);
}

}  // namespace dg::kernels
