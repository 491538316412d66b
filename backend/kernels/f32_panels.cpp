#include "f32_panels.h"

#include <algorithm>

#include "isa.h"

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define DG_F32_PANELS_X86 1
#endif

namespace dg::kernels {

void pack_panels(int64_t N, int64_t K, const float* W, int64_t ldw, float* P) {
    for (int64_t p0 = 0; p0 < N; p0 += kPanelWidth) {
        const int64_t width = std::min(kPanelWidth, N - p0);
        float* panel = P + p0 * K;
        for (int64_t j = 0; j < width; ++j) {
            const float* w = W + (p0 + j) * ldw;
            for (int64_t k = 0; k < K; ++k) panel[k * width + j] = w[k];
        }
    }
}

void unpack_panels(int64_t N, int64_t K, const float* P, float* W) {
    for (int64_t p0 = 0; p0 < N; p0 += kPanelWidth) {
        const int64_t width = std::min(kPanelWidth, N - p0);
        const float* panel = P + p0 * K;
        for (int64_t j = 0; j < width; ++j)
            for (int64_t k = 0; k < K; ++k) W[(p0 + j) * K + k] = panel[k * width + j];
    }
}

namespace {

// Portable code (other CPUs, DYNGRAPH_KERNEL_ISA=generic): a row's outputs of one panel summed in a
// local array the compiler keeps in vector registers.
void gemm_panels_portable(int64_t M, int64_t N, int64_t K, int64_t n0, int64_t n1, const float* A, int64_t lda,
                          const float* P, float* C, int64_t ldc) {
    for (int64_t p0 = n0; p0 < n1; p0 += kPanelWidth) {
        const int64_t width = std::min(kPanelWidth, N - p0), cols = std::min(width, n1 - p0);
        const float* panel = P + p0 * K;
        for (int64_t m = 0; m < M; ++m) {
            float acc[kPanelWidth] = {};
            const float* a = A + m * lda;
            for (int64_t k = 0; k < K; ++k) {
                const float* b = panel + k * width;
                for (int64_t j = 0; j < width; ++j) acc[j] += a[k] * b[j];
            }
            std::copy(acc, acc + cols, C + m * ldc + (p0 - n0));
        }
    }
}

#ifdef DG_F32_PANELS_X86

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx2,fma")
namespace avx512 {
using V = __m512;
using Mask = __mmask16;
constexpr int kLanes = 16;
constexpr int kTileRows = 8;  // 24 accumulators and 3 panel vectors of 32 registers (the broadcast is an operand)
constexpr int kTileVecs = 3;  // a panel's 48 floats
constexpr int kWideRows = kTileRows;
inline V vzero() { return _mm512_setzero_ps(); }
inline V vloadu(const float* p) { return _mm512_loadu_ps(p); }
inline V vbroadcast(const float* p) { return _mm512_set1_ps(*p); }
inline V vfma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
inline void vstoreu(float* p, V v) { _mm512_storeu_ps(p, v); }
inline Mask mask_of(int n) { return Mask((1u << n) - 1); }
inline V vload_mask(const float* p, Mask m) { return _mm512_maskz_loadu_ps(m, p); }
inline void vstore_mask(float* p, Mask m, V v) { _mm512_mask_storeu_ps(p, m, v); }
#include "f32_panels_impl.inc"
}  // namespace avx512
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace avx2 {
using V = __m256;
using Mask = __m256i;
constexpr int kLanes = 8;
constexpr int kTileRows = 4;  // 12 accumulators, 3 panel vectors, the broadcast: of 16 registers
constexpr int kTileVecs = 3;  // half a panel (24 floats) per pass
constexpr int kWideRows = 2;  // 12 accumulators over a whole panel: 1 to 3 rows read it once
inline V vzero() { return _mm256_setzero_ps(); }
inline V vloadu(const float* p) { return _mm256_loadu_ps(p); }
inline V vbroadcast(const float* p) { return _mm256_broadcast_ss(p); }
inline V vfma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
inline void vstoreu(float* p, V v) { _mm256_storeu_ps(p, v); }
inline Mask mask_of(int n) { return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)); }
inline V vload_mask(const float* p, Mask m) { return _mm256_maskload_ps(p, m); }
inline void vstore_mask(float* p, Mask m, V v) { _mm256_maskstore_ps(p, m, v); }
#include "f32_panels_impl.inc"
}  // namespace avx2
#pragma GCC pop_options

#endif

}  // namespace

void f32_gemm_panels(int64_t M, int64_t N, int64_t K, int64_t n0, int64_t n1, const float* A, int64_t lda,
                     const float* P, float* C, int64_t ldc) {
#ifdef DG_F32_PANELS_X86
    if (kernel_isa() >= Isa::avx512) return avx512::gemm_panels(M, N, K, n0, n1, A, lda, P, C, ldc);
    if (kernel_isa() >= Isa::avx2) return avx2::gemm_panels(M, N, K, n0, n1, A, lda, P, C, ldc);
#endif
    gemm_panels_portable(M, N, K, n0, n1, A, lda, P, C, ldc);
}

}  // namespace dg::kernels
