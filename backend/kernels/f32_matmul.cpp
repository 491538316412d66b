#include "f32_matmul.h"

#include <cblas.h>

#include <algorithm>
#include <mutex>

#include "small_gemm.h"

namespace dg::kernels {

namespace {

// Column blocks handed to one thread are multiples of this (whole cache lines of C).
constexpr int64_t kColumnAlign = 16;

void f32_matmul_kernel(ggml_tensor* dst, int ith, int nth, void*) {
    const ggml_tensor* x = dst->src[0];
    const ggml_tensor* y = dst->src[1];
    const int64_t K = x->ne[0], N = x->ne[1], M = y->ne[1];
    const int64_t batches = dst->ne[2] * dst->ne[3];
    const int64_t r2 = y->ne[2] / x->ne[2], r3 = y->ne[3] / x->ne[3];
    const int lda = int(y->nb[1] / sizeof(float)), ldb = int(x->nb[1] / sizeof(float));
    const int ldc = int(dst->nb[1] / sizeof(float));

    // whole batches per thread when there are enough of them, else a share of every batch's columns
    const bool by_batch = batches >= nth;
    int64_t n0 = 0, n1 = N;
    if (!by_batch) {
        const int64_t per = ((N + nth - 1) / nth + kColumnAlign - 1) / kColumnAlign * kColumnAlign;
        n0 = std::min(N, per * ith);
        n1 = std::min(N, n0 + per);
        if (n0 >= n1) return;
    }
    for (int64_t b = by_batch ? ith : 0; b < batches; b += by_batch ? nth : 1) {
        const int64_t i2 = b % dst->ne[2], i3 = b / dst->ne[2];
        const auto* A = reinterpret_cast<const float*>(static_cast<const char*>(y->data) + i2 * y->nb[2] + i3 * y->nb[3]);
        const auto* B = reinterpret_cast<const float*>(static_cast<const char*>(x->data) + (i2 / r2) * x->nb[2] +
                                                       (i3 / r3) * x->nb[3]);
        auto* C = reinterpret_cast<float*>(static_cast<char*>(dst->data) + i2 * dst->nb[2] + i3 * dst->nb[3]);
        // C[M, N] = A[M, K] . B[N, K]^T, row-major
        if (M < kSgemmRows) {
            small_gemm_nt(int(M), n1 - n0, K, A, lda, B + n0 * ldb, ldb, C + n0, ldc);
        } else {
            scipy_cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(M), int(n1 - n0), int(K), 1.0f, A, lda,
                              B + n0 * ldb, ldb, 0.0f, C + n0, ldc);
        }
    }
}

bool rows_contiguous(const ggml_tensor* t) {
    return t->nb[0] == sizeof(float) && t->nb[1] % sizeof(float) == 0 && t->nb[1] >= size_t(t->ne[0]) * sizeof(float);
}

}  // namespace

bool f32_matmul_applies(const ggml_tensor* x, const ggml_tensor* y, int64_t min_rows) {
    return x->type == GGML_TYPE_F32 && y->type == GGML_TYPE_F32 && x->ne[0] == y->ne[0] && y->ne[1] >= min_rows &&
           y->ne[2] % x->ne[2] == 0 && y->ne[3] % x->ne[3] == 0 && rows_contiguous(x) && rows_contiguous(y) &&
           x->ne[0] < (int64_t(1) << 31) && x->ne[1] < (int64_t(1) << 31) && y->ne[1] < (int64_t(1) << 31);
}

ggml_tensor* f32_mul_mat(ggml_context* ctx, ggml_tensor* x, ggml_tensor* y) {
    // every call runs in one of ggml's threads: OpenBLAS must not start its own
    static std::once_flag once;
    std::call_once(once, [] { scipy_openblas_set_num_threads(1); });
    ggml_tensor* args[2] = {x, y};
    return ggml_custom_4d(ctx, GGML_TYPE_F32, x->ne[1], y->ne[1], y->ne[2], y->ne[3], args, 2, f32_matmul_kernel,
                          GGML_N_TASKS_MAX, nullptr);
}

ggml_tensor* mul_mat(ggml_context* ctx, ggml_tensor* x, ggml_tensor* y) {
    return f32_matmul_applies(x, y, kF32KernelMinRows) ? f32_mul_mat(ctx, x, y) : ggml_mul_mat(ctx, x, y);
}

}  // namespace dg::kernels
