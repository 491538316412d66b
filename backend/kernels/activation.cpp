#include "activation.h"

#include "gelu_erf.h"
#include "kernels.h"
#include "vector_clones.h"

namespace dg::kernels {

namespace {

DG_VECTOR_BODY void relu_rows_body(int64_t M, int64_t n, float* C, int64_t ldc) {
    for (int64_t m = 0; m < M; ++m) {
        float* c = C + m * ldc;
        for (int64_t j = 0; j < n; ++j) c[j] = relu(c[j]);
    }
}
DG_VECTORIZED(void, relu_rows, (int64_t M, int64_t n, float* C, int64_t ldc), (M, n, C, ldc))

DG_VECTOR_BODY void add_rows_body(const float* R, int64_t M, int64_t n, float* C, int64_t ldc) {
    for (int64_t m = 0; m < M; ++m) {
        float* __restrict c = C + m * ldc;
        const float* __restrict r = R + m * ldc;
        for (int64_t j = 0; j < n; ++j) c[j] += r[j];
    }
}
DG_VECTORIZED(void, add_rows, (const float* R, int64_t M, int64_t n, float* C, int64_t ldc), (R, M, n, C, ldc))

}  // namespace

void activate(Activation act, int64_t M, int64_t n, float* C, int64_t ldc) {
    if (act == Activation::Relu) return relu_rows(M, n, C, ldc);
    if (act == Activation::GeluErf)
        for (int64_t m = 0; m < M; ++m) gelu_erf_row(C + m * ldc, C + m * ldc, n);
}

void epilogue(Activation act, const float* R, int64_t M, int64_t n, float* C, int64_t ldc) {
    if (R) add_rows(R, M, n, C, ldc);
    activate(act, M, n, C, ldc);
}

}  // namespace dg::kernels
