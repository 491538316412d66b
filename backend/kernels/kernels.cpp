#include "kernels.h"
#include "../gg.h"

#include "gelu_erf.h"
#include "gelu_tanh.h"
#include "thread_share.h"

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
    const auto [r0, r1] = thread_share(rows, ith, nth);
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

inline float pow_(float x, float y) { return std::pow(x, y); }
inline int32_t pow_(int32_t x, int32_t y) {  // (the op takes floats; integers wrap, a negative power truncates)
    if (y < 0) return x == 1 ? 1 : x == -1 ? (y % 2 ? -1 : 1) : 0;
    uint32_t r = 1, b = uint32_t(x);
    for (uint32_t e = uint32_t(y); e; e >>= 1, b *= b)
        if (e & 1) r *= b;
    return int32_t(r);
}

// numpy's floor_divide: floats through fmod (the floor of the exact quotient,
// not of the rounded a / b), integers toward -inf with x // 0 = 0.
inline float floor_div(float a, float b) {
    if (b == 0.0f) return a / b;
    const float mod = std::fmod(a, b);
    float div = (a - mod) / b;
    if (mod != 0.0f && ((b < 0.0f) != (mod < 0.0f))) div -= 1.0f;
    if (div == 0.0f) return std::copysign(0.0f, a / b);
    float fd = std::floor(div);
    if (div - fd > 0.5f) fd += 1.0f;
    return fd;
}
inline int32_t floor_div(int32_t a, int32_t b) {
    if (b == 0) return 0;
    if (a == INT32_MIN && b == -1) return INT32_MIN;  // wraps, as numpy's int32
    int32_t q = a / b;
    if (a % b != 0 && ((a < 0) != (b < 0))) --q;
    return q;
}

template <class T>
void binary_typed(ggml_tensor* dst, int ith, int nth, Binary op) {
    switch (op) {
        case Binary::Max: return binary_rows<T>(dst, ith, nth, [](T x, T y) { return x > y || x != x ? x : y; });
        case Binary::Min: return binary_rows<T>(dst, ith, nth, [](T x, T y) { return x < y || x != x ? x : y; });
        case Binary::Add: return binary_rows<T>(dst, ith, nth, [](T x, T y) { return add(x, y); });
        case Binary::Sub: return binary_rows<T>(dst, ith, nth, [](T x, T y) { return sub(x, y); });
        case Binary::Mul: return binary_rows<T>(dst, ith, nth, [](T x, T y) { return mul(x, y); });
        case Binary::Pow: return binary_rows<T>(dst, ith, nth, [](T x, T y) { return pow_(x, y); });
        case Binary::SquaredDiff:
            return binary_rows<T>(dst, ith, nth, [](T x, T y) { T d = sub(x, y); return mul(d, d); });
        case Binary::FloorDiv: return binary_rows<T>(dst, ith, nth, [](T x, T y) { return floor_div(x, y); });
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

// A row kernel (gelu_erf_row, gelu_tanh_row) over dst's rows; a row of a with strided elements one value at a time.
void row_kernel_rows(ggml_tensor* dst, int ith, int nth, void (*row_fn)(const float*, float*, int64_t)) {
    const ggml_tensor* a = dst->src[0];
    for_rows(dst, ith, nth, [&](int64_t i1, int64_t i2, int64_t i3) {
        const char* row = static_cast<const char*>(a->data) + i1 * a->nb[1] + i2 * a->nb[2] + i3 * a->nb[3];
        float* out = reinterpret_cast<float*>(static_cast<char*>(dst->data) + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3]);
        if (a->nb[0] == sizeof(float)) return row_fn(reinterpret_cast<const float*>(row), out, dst->ne[0]);
        for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) row_fn(reinterpret_cast<const float*>(row + i0 * a->nb[0]), out + i0, 1);
    });
}

// The two float parameters of a unary kernel, packed into the custom op's userdata pointer.
struct Params {
    float p0, p1;
};
static_assert(sizeof(Params) <= sizeof(void*), "the parameters travel in a pointer");

void* pack(float p0, float p1) {
    Params p{p0, p1};
    void* ud = nullptr;
    std::memcpy(&ud, &p, sizeof p);
    return ud;
}

Params unpack(void* ud) {
    Params p;
    std::memcpy(&p, &ud, sizeof p);
    return p;
}

// ln(1 + e^x) without overflow: max(x, 0) + log1p(e^-|x|)
inline float softplus(float x) { return (x > 0.0f ? x : 0.0f) + std::log1p(std::exp(-std::fabs(x))); }

template <Unary OP>
void unary_kernel(ggml_tensor* dst, int ith, int nth, void* ud) {
    const Params p = unpack(ud);
    if constexpr (OP == Unary::Relu) unary_rows(dst, ith, nth, [](float x) { return relu(x); });
    else if constexpr (OP == Unary::GeluTanh) row_kernel_rows(dst, ith, nth, gelu_tanh_row);
    else if constexpr (OP == Unary::GeluErf) row_kernel_rows(dst, ith, nth, gelu_erf_row);
    else if constexpr (OP == Unary::Erf) unary_rows(dst, ith, nth, [](float x) { return std::erf(x); });
    else if constexpr (OP == Unary::Reciprocal) unary_rows(dst, ith, nth, [](float x) { return 1.0f / x; });
    else if constexpr (OP == Unary::Rsqrt) unary_rows(dst, ith, nth, [](float x) { return 1.0f / std::sqrt(x); });
    else if constexpr (OP == Unary::HardSwish)
        unary_rows(dst, ith, nth, [](float x) { return x * std::min(std::max(x + 3.0f, 0.0f), 6.0f) / 6.0f; });
    else if constexpr (OP == Unary::Mish) unary_rows(dst, ith, nth, [](float x) { return x * std::tanh(softplus(x)); });
    else if constexpr (OP == Unary::Round) unary_rows(dst, ith, nth, [](float x) { return std::nearbyint(x); });
    else if constexpr (OP == Unary::Ceil) unary_rows(dst, ith, nth, [](float x) { return std::ceil(x); });
    else if constexpr (OP == Unary::Floor) unary_rows(dst, ith, nth, [](float x) { return std::floor(x); });
    // the float overloads: libm's acosf / asinf / atanf (GCC 12's <cmath> has no std::acosf)
    else if constexpr (OP == Unary::Acos) unary_rows(dst, ith, nth, [](float x) { return std::acos(x); });
    else if constexpr (OP == Unary::Asin) unary_rows(dst, ith, nth, [](float x) { return std::asin(x); });
    else if constexpr (OP == Unary::Atan) unary_rows(dst, ith, nth, [](float x) { return std::atan(x); });
    else if constexpr (OP == Unary::Elu)
        unary_rows(dst, ith, nth, [a = p.p0](float x) { return x >= 0.0f ? x : x < 0.0f ? a * std::expm1(x) : x; });
    else if constexpr (OP == Unary::LeakyRelu) unary_rows(dst, ith, nth, [a = p.p0](float x) { return x >= 0.0f ? x : a * x; });
    else if constexpr (OP == Unary::HardSigmoid)
        unary_rows(dst, ith, nth, [a = p.p0, b = p.p1](float x) {
            const float y = a * x + b;
            return y != y ? y : std::max(0.0f, std::min(1.0f, y));
        });
    else if constexpr (OP == Unary::SoftPlus)
        unary_rows(dst, ith, nth, [b = p.p0](float x) { return b == 1.0f ? softplus(x) : softplus(b * x) / b; });
    else if constexpr (OP == Unary::Clamp)
        unary_rows(dst, ith, nth, [lo = p.p0, hi = p.p1](float x) { return x != x ? x : std::min(std::max(x, lo), hi); });
    else if constexpr (OP == Unary::Pow) unary_rows(dst, ith, nth, [e = p.p0](float x) { return std::pow(x, e); });
}

ggml_custom_op_t unary_fn(Unary op) {
    switch (op) {
        case Unary::Relu: return unary_kernel<Unary::Relu>;
        case Unary::GeluTanh: return unary_kernel<Unary::GeluTanh>;
        case Unary::GeluErf: return unary_kernel<Unary::GeluErf>;
        case Unary::Erf: return unary_kernel<Unary::Erf>;
        case Unary::Reciprocal: return unary_kernel<Unary::Reciprocal>;
        case Unary::Rsqrt: return unary_kernel<Unary::Rsqrt>;
        case Unary::HardSwish: return unary_kernel<Unary::HardSwish>;
        case Unary::Mish: return unary_kernel<Unary::Mish>;
        case Unary::Round: return unary_kernel<Unary::Round>;
        case Unary::Ceil: return unary_kernel<Unary::Ceil>;
        case Unary::Floor: return unary_kernel<Unary::Floor>;
        case Unary::Acos: return unary_kernel<Unary::Acos>;
        case Unary::Asin: return unary_kernel<Unary::Asin>;
        case Unary::Atan: return unary_kernel<Unary::Atan>;
        case Unary::Elu: return unary_kernel<Unary::Elu>;
        case Unary::LeakyRelu: return unary_kernel<Unary::LeakyRelu>;
        case Unary::HardSigmoid: return unary_kernel<Unary::HardSigmoid>;
        case Unary::SoftPlus: return unary_kernel<Unary::SoftPlus>;
        case Unary::Clamp: return unary_kernel<Unary::Clamp>;
        case Unary::Pow: return unary_kernel<Unary::Pow>;
    }
    return nullptr;
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
                case ReduceRows::Sum: acc = add(acc, x); break;
                case ReduceRows::Prod: acc = mul(acc, x); break;
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

template <class T>
void argmax_typed(ggml_tensor* dst, int ith, int nth) {
    const ggml_tensor* a = dst->src[0];
    for_rows(dst, ith, nth, [&](int64_t i1, int64_t i2, int64_t i3) {
        const char* row = static_cast<const char*>(a->data) + i1 * a->nb[1] + i2 * a->nb[2] + i3 * a->nb[3];
        T best = *reinterpret_cast<const T*>(row);
        int64_t at = 0;
        for (int64_t i0 = 1; i0 < a->ne[0] && best == best; ++i0) {  // the first NaN wins: stop there
            T x = *reinterpret_cast<const T*>(row + i0 * a->nb[0]);
            if (x > best || x != x) {
                best = x;
                at = i0;
            }
        }
        *reinterpret_cast<int32_t*>(static_cast<char*>(dst->data) + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3]) =
            int32_t(at);
    });
}

void argmax_kernel(ggml_tensor* dst, int ith, int nth, void*) {
    if (dst->src[0]->type == GGML_TYPE_F32) argmax_typed<float>(dst, ith, nth);
    else argmax_typed<int32_t>(dst, ith, nth);
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

void copy_strided_kernel(ggml_tensor* dst, int ith, int nth, void* ud) {
    const StridedCopy& p = *static_cast<const StridedCopy*>(ud);
    const size_t elem = ggml_type_size(dst->type);
    const int last = p.rank - 1;
    const int64_t inner = p.rank ? p.ne[last] : 1;
    const int64_t inner_nb = p.rank ? p.nb[last] : 0;
    const int64_t rows = inner ? ggml_nelements(dst) / inner : 0;
    const auto [r0, r1] = thread_share(rows, ith, nth);
    const char* base = static_cast<const char*>(dst->src[0]->data) + p.offset;
    char* out = static_cast<char*>(dst->data);
    for (int64_t r = r0; r < r1; ++r) {
        int64_t off = 0, rest = r;
        for (int a = last - 1; a >= 0; --a) {
            off += (rest % p.ne[a]) * p.nb[a];
            rest /= p.ne[a];
        }
        const char* src = base + off;
        char* dst_row = out + size_t(r * inner) * elem;
        if (inner_nb == int64_t(elem)) {
            std::memcpy(dst_row, src, size_t(inner) * elem);
        } else if (elem == 4) {
            for (int64_t i = 0; i < inner; ++i) std::memcpy(dst_row + 4 * i, src + i * inner_nb, 4);
        } else {
            for (int64_t i = 0; i < inner; ++i) std::memcpy(dst_row + size_t(i) * elem, src + i * inner_nb, elem);
        }
    }
}

void* tag(int v) { return reinterpret_cast<void*>(intptr_t(v)); }

// The broadcasting kernels read each operand where the output has n and it has n or 1 (row_ptr, at):
// anything else would read out of its bounds.
void need_broadcast(const char* fn, std::initializer_list<const ggml_tensor*> ts, const int64_t ne[4]) {
    for (const ggml_tensor* t : ts)
        for (int d = 0; d < 4; ++d)
            if (t->ne[d] != ne[d] && t->ne[d] != 1)
                throw gg::Violation(cat(fn, ": operand ", gg::describe(t), " does not broadcast to [", ne[0], ", ", ne[1],
                                        ", ", ne[2], ", ", ne[3], "]"));
}

}  // namespace

ggml_tensor* binary(ggml_context* ctx, Binary op, ggml_tensor* a, ggml_tensor* b, const int64_t ne[4]) {
    need_broadcast("binary kernel", {a, b}, ne);
    ggml_tensor* args[2] = {a, b};
    return gg::custom_4d(ctx, a->type, ne[0], ne[1], ne[2], ne[3], args, 2, binary_kernel, GGML_N_TASKS_MAX, tag(int(op)));
}

ggml_tensor* unary(ggml_context* ctx, Unary op, ggml_tensor* a, float p0, float p1) {
    ggml_tensor* args[1] = {a};
    return gg::custom_4d(ctx, GGML_TYPE_F32, a->ne[0], a->ne[1], a->ne[2], a->ne[3], args, 1, unary_fn(op), GGML_N_TASKS_MAX,
                          pack(p0, p1));
}

ggml_tensor* compare(ggml_context* ctx, Compare op, ggml_tensor* a, ggml_tensor* b, const int64_t ne[4]) {
    need_broadcast("compare kernel", {a, b}, ne);
    ggml_tensor* args[2] = {a, b};
    return gg::custom_4d(ctx, GGML_TYPE_I32, ne[0], ne[1], ne[2], ne[3], args, 2, compare_kernel, GGML_N_TASKS_MAX, tag(int(op)));
}

ggml_tensor* select(ggml_context* ctx, ggml_tensor* cond, ggml_tensor* a, ggml_tensor* b, const int64_t ne[4]) {
    need_broadcast("select kernel", {cond, a, b}, ne);
    ggml_tensor* args[3] = {cond, a, b};
    return gg::custom_4d(ctx, a->type, ne[0], ne[1], ne[2], ne[3], args, 3, select_kernel, GGML_N_TASKS_MAX, nullptr);
}

ggml_tensor* reduce_rows(ggml_context* ctx, ReduceRows op, ggml_tensor* a) {
    ggml_tensor* args[1] = {a};
    return gg::custom_4d(ctx, a->type, 1, a->ne[1], a->ne[2], a->ne[3], args, 1, reduce_kernel, GGML_N_TASKS_MAX, tag(int(op)));
}

ggml_tensor* argmax_rows(ggml_context* ctx, ggml_tensor* a) {
    ggml_tensor* args[1] = {a};
    return gg::custom_4d(ctx, GGML_TYPE_I32, 1, a->ne[1], a->ne[2], a->ne[3], args, 1, argmax_kernel, GGML_N_TASKS_MAX, nullptr);
}

ggml_tensor* copy_strided(ggml_context* ctx, ggml_tensor* src, const StridedCopy* p, const int64_t ne[4]) {
    ggml_tensor* args[1] = {src};
    return gg::custom_4d(ctx, src->type, ne[0], ne[1], ne[2], ne[3], args, 1, copy_strided_kernel, GGML_N_TASKS_MAX,
                          const_cast<StridedCopy*>(p));
}

ggml_tensor* nonzero(ggml_context* ctx, ggml_tensor* a) {
    ggml_tensor* args[1] = {a};
    return gg::custom_4d(ctx, GGML_TYPE_I32, a->ne[0], a->ne[1], a->ne[2], a->ne[3], args, 1, nonzero_kernel, GGML_N_TASKS_MAX,
                          nullptr);
}

}  // namespace dg::kernels
