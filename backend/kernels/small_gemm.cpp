#include "small_gemm.h"

#include <cstddef>
#include <vector>

#include "isa.h"

#if defined(__GNUC__) && defined(__x86_64__)
#define DG_SMALL_GEMM_X86 1
#endif

namespace dg::kernels {

#ifdef DG_SMALL_GEMM_X86
#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace avx2 {
constexpr int kVectorRegs = 16;
#include "small_gemm_impl.inc"
}  // namespace avx2
#pragma GCC pop_options
// AVX-512VL: the same 8-float vectors, with 32 registers for wider blocks
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx2,fma")
namespace avx512 {
constexpr int kVectorRegs = 32;
#include "small_gemm_impl.inc"
}  // namespace avx512
#pragma GCC pop_options
#endif

namespace generic {
constexpr int kVectorRegs = 16;
#include "small_gemm_impl.inc"
}  // namespace generic

void small_gemm_nt(int rows, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
                   int64_t ldc) {
    thread_local std::vector<float> packed;  // grows to the largest rows * K seen by this thread
    if (packed.size() < std::size_t(rows) * std::size_t(K)) packed.resize(std::size_t(rows) * std::size_t(K));
    float* Ap = packed.data();
#ifdef DG_SMALL_GEMM_X86
    const Isa chosen = kernel_isa();
    if (chosen >= Isa::avx512) return avx512::small_gemm_rows(rows, N, K, Ap, A, lda, B, ldb, C, ldc);
    if (chosen == Isa::avx2) return avx2::small_gemm_rows(rows, N, K, Ap, A, lda, B, ldb, C, ldc);
#endif
    generic::small_gemm_rows(rows, N, K, Ap, A, lda, B, ldb, C, ldc);
}

}  // namespace dg::kernels
