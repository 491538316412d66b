#include "index_kernels.h"
#include "../gg.h"
#include "thread_share.h"

#include <algorithm>
#include <cstring>

namespace dg::index_kernels {

namespace {

static_assert(sizeof(void*) >= sizeof(uint64_t), "kernel parameters are packed into a 64-bit userdata pointer");

void* pack(uint64_t v) { return reinterpret_cast<void*>(uintptr_t(v)); }
uint64_t unpack(void* p) { return uint64_t(reinterpret_cast<uintptr_t>(p)); }

// Calls f(i1, i2, i3, out_row) for this thread's rows of dst (contiguous rows of ne0).
template <class T, class F>
void each_row(ggml_tensor* dst, int ith, int nth, F&& f) {
    const int64_t n1 = dst->ne[1], n2 = dst->ne[2];
    const auto [r0, r1] = kernels::thread_share(n1 * n2 * dst->ne[3], ith, nth);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % n1, i2 = (r / n1) % n2, i3 = r / (n1 * n2);
        T* out = reinterpret_cast<T*>(static_cast<char*>(dst->data) + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3]);
        f(i1, i2, i3, out);
    }
}

// Element i0 of row (i1, i2, i3) of `t` broadcast to dst (dimensions of 1 repeat).
inline int32_t at_i32(const ggml_tensor* t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    const char* p = static_cast<const char*>(t->data) + (t->ne[0] == 1 ? 0 : i0) * t->nb[0] +
                    (t->ne[1] == 1 ? 0 : i1) * t->nb[1] + (t->ne[2] == 1 ? 0 : i2) * t->nb[2] +
                    (t->ne[3] == 1 ? 0 : i3) * t->nb[3];
    int32_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

// userdata: start in the low 32 bits, step in the high 32 bits.
void arange_kernel(ggml_tensor* dst, int ith, int nth, void* ud) {
    const uint64_t u = unpack(ud);
    const int64_t start = int32_t(uint32_t(u)), step = int32_t(uint32_t(u >> 32));
    const auto [lo, hi] = kernels::thread_share(dst->ne[0], ith, nth);
    if (dst->type == GGML_TYPE_F32) {
        float* out = static_cast<float*>(dst->data);
        for (int64_t i = lo; i < hi; ++i) out[i] = float(double(start) + double(i) * double(step));
    } else {
        int32_t* out = static_cast<int32_t*>(dst->data);
        for (int64_t i = lo; i < hi; ++i) out[i] = int32_t(start + i * step);
    }
}

// userdata: the ggml dimension whose index is written.
void gen_index_kernel(ggml_tensor* dst, int ith, int nth, void* ud) {
    const int dim = int(unpack(ud));
    const int64_t n0 = dst->ne[0];
    each_row<int32_t>(dst, ith, nth, [&](int64_t i1, int64_t i2, int64_t i3, int32_t* out) {
        if (dim == 0) {
            for (int64_t i0 = 0; i0 < n0; ++i0) out[i0] = int32_t(i0);
            return;
        }
        const int32_t v = int32_t(dim == 1 ? i1 : dim == 2 ? i2 : i3);
        std::fill(out, out + n0, v);
    });
}

// userdata: the element's bit pattern (4 bytes for F32 / I32, 2 for F16 / BF16).
void fill_kernel(ggml_tensor* dst, int ith, int nth, void* ud) {
    const uint64_t bits = unpack(ud);
    const int64_t n0 = dst->ne[0];
    if (ggml_type_size(dst->type) == 4) {
        const uint32_t v = uint32_t(bits);
        each_row<uint32_t>(dst, ith, nth, [&](int64_t, int64_t, int64_t, uint32_t* out) { std::fill(out, out + n0, v); });
    } else {
        const uint16_t v = uint16_t(bits);
        each_row<uint16_t>(dst, ith, nth, [&](int64_t, int64_t, int64_t, uint16_t* out) { std::fill(out, out + n0, v); });
    }
}

void logical_kernel(ggml_tensor* dst, int ith, int nth, void* ud) {
    const Logical op = Logical(unpack(ud));
    const ggml_tensor* a = dst->src[0];
    const ggml_tensor* b = dst->src[1];
    const int64_t n0 = dst->ne[0];
    each_row<int32_t>(dst, ith, nth, [&](int64_t i1, int64_t i2, int64_t i3, int32_t* out) {
        for (int64_t i0 = 0; i0 < n0; ++i0) {
            const bool x = at_i32(a, i0, i1, i2, i3) != 0, y = at_i32(b, i0, i1, i2, i3) != 0;
            out[i0] = (op == Logical::And ? (x && y) : (x || y)) ? 1 : 0;
        }
    });
}

void logical_not_kernel(ggml_tensor* dst, int ith, int nth, void*) {
    const ggml_tensor* a = dst->src[0];
    const int64_t n0 = dst->ne[0];
    each_row<int32_t>(dst, ith, nth, [&](int64_t i1, int64_t i2, int64_t i3, int32_t* out) {
        for (int64_t i0 = 0; i0 < n0; ++i0) out[i0] = at_i32(a, i0, i1, i2, i3) == 0 ? 1 : 0;
    });
}

}  // namespace

ggml_tensor* arange(ggml_context* ctx, ggml_type type, int64_t n, int32_t start, int32_t step) {
    const uint64_t u = uint64_t(uint32_t(start)) | (uint64_t(uint32_t(step)) << 32);
    return gg::custom_4d(ctx, type, n, 1, 1, 1, nullptr, 0, arange_kernel, GGML_N_TASKS_MAX, pack(u));
}

ggml_tensor* gen_index(ggml_context* ctx, const int64_t ne[4], int dim) {
    return gg::custom_4d(ctx, GGML_TYPE_I32, ne[0], ne[1], ne[2], ne[3], nullptr, 0, gen_index_kernel, GGML_N_TASKS_MAX,
                          pack(uint64_t(dim)));
}

ggml_tensor* fill_float(ggml_context* ctx, ggml_type type, const int64_t ne[4], float value) {
    uint64_t bits = 0;
    if (type == GGML_TYPE_F32) {
        uint32_t b;
        std::memcpy(&b, &value, sizeof b);
        bits = b;
    } else if (type == GGML_TYPE_F16) {
        ggml_fp16_t h = ggml_fp32_to_fp16(value);
        uint16_t b;
        std::memcpy(&b, &h, sizeof b);
        bits = b;
    } else {  // BF16
        ggml_bf16_t h = ggml_fp32_to_bf16(value);
        uint16_t b;
        std::memcpy(&b, &h, sizeof b);
        bits = b;
    }
    return gg::custom_4d(ctx, type, ne[0], ne[1], ne[2], ne[3], nullptr, 0, fill_kernel, GGML_N_TASKS_MAX, pack(bits));
}

ggml_tensor* fill_int(ggml_context* ctx, const int64_t ne[4], int32_t value) {
    return gg::custom_4d(ctx, GGML_TYPE_I32, ne[0], ne[1], ne[2], ne[3], nullptr, 0, fill_kernel, GGML_N_TASKS_MAX,
                          pack(uint64_t(uint32_t(value))));
}

ggml_tensor* logical(ggml_context* ctx, Logical op, ggml_tensor* a, ggml_tensor* b, const int64_t ne[4]) {
    ggml_tensor* args[2] = {a, b};
    return gg::custom_4d(ctx, GGML_TYPE_I32, ne[0], ne[1], ne[2], ne[3], args, 2, logical_kernel, GGML_N_TASKS_MAX,
                          pack(uint64_t(op)));
}

ggml_tensor* logical_not(ggml_context* ctx, ggml_tensor* a) {
    ggml_tensor* args[1] = {a};
    return gg::custom_4d(ctx, GGML_TYPE_I32, a->ne[0], a->ne[1], a->ne[2], a->ne[3], args, 1, logical_not_kernel,
                          GGML_N_TASKS_MAX, nullptr);
}

}  // namespace dg::index_kernels
