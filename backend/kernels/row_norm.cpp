#include "row_norm.h"

#include <cmath>
#include <cstring>

#include "../gg.h"
#include "vector_clones.h"

namespace dg::kernels {

namespace {

typedef float Vec4f __attribute__((vector_size(16)));
typedef double Vec4d __attribute__((vector_size(32)));

// (by reference: a vector passed or returned by value warns that the baseline variant's ABI differs)
static inline __attribute__((always_inline)) void add_widened(Vec4d& acc, const float* p) {
    Vec4f f;
    std::memcpy(&f, p, sizeof f);
    acc += __builtin_convertvector(f, Vec4d);
}

static inline __attribute__((always_inline)) double lanes(const Vec4d& v) { return (v[0] + v[1]) + (v[2] + v[3]); }

// sum of x[j] (squares = false) or of (x[j] - shift)^2 (true), in double: four
// accumulators of four lanes, so the adds do not wait on each other.
DG_VECTOR_BODY double row_sum_body(const float* x, int64_t n, float shift, bool squares) {
    Vec4d a0 = {}, a1 = {}, a2 = {}, a3 = {};
    int64_t j = 0;
    if (squares) {
        // the difference rounds to float once, as ggml's (x - mean) does; its square is exact in double
        for (; j + 16 <= n; j += 16) {
            Vec4f f0, f1, f2, f3;
            std::memcpy(&f0, x + j, 16), std::memcpy(&f1, x + j + 4, 16);
            std::memcpy(&f2, x + j + 8, 16), std::memcpy(&f3, x + j + 12, 16);
            const Vec4f sf = {shift, shift, shift, shift};
            const Vec4d d0 = __builtin_convertvector(f0 - sf, Vec4d), d1 = __builtin_convertvector(f1 - sf, Vec4d);
            const Vec4d d2 = __builtin_convertvector(f2 - sf, Vec4d), d3 = __builtin_convertvector(f3 - sf, Vec4d);
            a0 += d0 * d0, a1 += d1 * d1, a2 += d2 * d2, a3 += d3 * d3;
        }
    } else {
        for (; j + 16 <= n; j += 16) {
            add_widened(a0, x + j), add_widened(a1, x + j + 4);
            add_widened(a2, x + j + 8), add_widened(a3, x + j + 12);
        }
    }
    const Vec4d all = (a0 + a1) + (a2 + a3);
    double sum = lanes(all);
    for (; j < n; ++j) {
        const double d = squares ? double(x[j] - shift) : double(x[j]);
        sum += squares ? d * d : d;
    }
    return sum;
}
DG_VECTORIZED(double, row_sum, (const float* x, int64_t n, float shift, bool squares), (x, n, shift, squares))

// y[j] = (x[j] - shift) * scale * g[j] + b[j], g and b optional
DG_VECTOR_BODY void row_scale_body(const float* x, float* y, int64_t n, float shift, float scale, const float* g,
                                   const float* b) {
    if (g && b)
        for (int64_t j = 0; j < n; ++j) y[j] = (x[j] - shift) * scale * g[j] + b[j];
    else if (g)
        for (int64_t j = 0; j < n; ++j) y[j] = (x[j] - shift) * scale * g[j];
    else if (b)
        for (int64_t j = 0; j < n; ++j) y[j] = (x[j] - shift) * scale + b[j];
    else
        for (int64_t j = 0; j < n; ++j) y[j] = (x[j] - shift) * scale;
}
DG_VECTORIZED(void, row_scale, (const float* x, float* y, int64_t n, float shift, float scale, const float* g,
                                const float* b),
              (x, y, n, shift, scale, g, b))

// y[j] = x[j] + a[j]
DG_VECTOR_BODY void row_add_body(const float* x, const float* a, float* y, int64_t n) {
    for (int64_t j = 0; j < n; ++j) y[j] = x[j] + a[j];
}
DG_VECTORIZED(void, row_add, (const float* x, const float* a, float* y, int64_t n), (x, a, y, n))

struct Params {
    float eps;
    bool rms, add, gamma, beta;  // which of the addend, gamma and beta follow x in the sources, in that order
};
static_assert(sizeof(Params) <= sizeof(void*), "the parameters travel in a pointer");

void row_norm_kernel(ggml_tensor* dst, int ith, int nth, void* ud) {
    Params p;
    std::memcpy(&p, &ud, sizeof p);
    const ggml_tensor* x = dst->src[0];
    int src = 1;
    const float* a = p.add ? static_cast<const float*>(dst->src[src++]->data) : nullptr;
    const float* g = p.gamma ? static_cast<const float*>(dst->src[src++]->data) : nullptr;
    const float* b = p.beta ? static_cast<const float*>(dst->src[src++]->data) : nullptr;
    const int64_t n = x->ne[0], rows = x->ne[1] * x->ne[2] * x->ne[3];
    const int64_t r0 = rows * ith / nth, r1 = rows * (ith + 1) / nth;
    for (int64_t r = r0; r < r1; ++r) {
        const float* xr = static_cast<const float*>(x->data) + r * n;
        float* yr = static_cast<float*>(dst->data) + r * n;
        if (a) {  // the row of x + a, written to the output and normalized there in place
            row_add(xr, a + r * n, yr, n);
            xr = yr;
        }
        float mean = 0.0f;
        if (!p.rms) mean = float(row_sum(xr, n, 0.0f, false) / double(n));
        const double var = row_sum(xr, n, mean, true) / double(n);
        const float scale = float(1.0 / std::sqrt(var + double(p.eps)));
        row_scale(xr, yr, n, mean, scale, g, b);
    }
}

bool dense_f32(const ggml_tensor* t) { return t->type == GGML_TYPE_F32 && ggml_is_contiguous(t); }

}  // namespace

bool row_norm_ok(const ggml_tensor* x, const ggml_tensor* gamma, const ggml_tensor* beta) {
    if (!dense_f32(x)) return false;
    for (const ggml_tensor* p : {gamma, beta})
        if (p && (!dense_f32(p) || ggml_nelements(p) != x->ne[0])) return false;
    return true;
}

ggml_tensor* row_norm(ggml_context* ctx, ggml_tensor* x, ggml_tensor* gamma, ggml_tensor* beta, float eps, bool rms,
                      ggml_tensor* addend) {
    Params p{eps, rms, addend != nullptr, gamma != nullptr, beta != nullptr};
    void* ud = nullptr;
    std::memcpy(&ud, &p, sizeof p);
    ggml_tensor* args[4] = {x, nullptr, nullptr, nullptr};
    int n_args = 1;
    if (addend) args[n_args++] = addend;
    if (gamma) args[n_args++] = gamma;
    if (beta) args[n_args++] = beta;
    return gg::custom_4d(ctx, GGML_TYPE_F32, x->ne[0], x->ne[1], x->ne[2], x->ne[3], args, n_args, row_norm_kernel,
                         GGML_N_TASKS_MAX, ud);
}

}  // namespace dg::kernels
