#include "small_gemm.h"

#if defined(__GNUC__) && defined(__x86_64__)
#define DG_SMALL_GEMM_AVX2 1
#endif

namespace dg::kernels {

#ifdef DG_SMALL_GEMM_AVX2
#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace avx2 {
#include "small_gemm_impl.inc"
}  // namespace avx2
#pragma GCC pop_options
#endif

namespace generic {
#include "small_gemm_impl.inc"
}  // namespace generic

void small_gemm_nt(int rows, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
                   int64_t ldc) {
#ifdef DG_SMALL_GEMM_AVX2
    static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (avx2) return avx2::small_gemm_rows(rows, N, K, A, lda, B, ldb, C, ldc);
#endif
    generic::small_gemm_rows(rows, N, K, A, lda, B, ldb, C, ldc);
}

}  // namespace dg::kernels
