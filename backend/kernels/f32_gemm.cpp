#include "f32_gemm.h"

#include <algorithm>
#include <vector>

#include "dequantize.h"
#include "isa.h"

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define DG_F32_GEMM_X86 1
#endif

namespace dg::kernels {

#ifdef DG_F32_GEMM_X86

namespace {

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx2,fma")
// The AVX-512 vector operations, shared by its two tile shapes
#define DG_AVX512_VECTORS                                                                                    \
    using V = __m512;                                                                                        \
    constexpr int kLanes = 16;                                                                               \
    inline V vzero() { return _mm512_setzero_ps(); }                                                         \
    inline V vload(const float* p) { return _mm512_load_ps(p); }                                             \
    inline V vloadu(const float* p) { return _mm512_loadu_ps(p); }                                           \
    inline V vload_first(const float* p, int n) { return _mm512_maskz_loadu_ps(__mmask16((1u << n) - 1), p); } \
    inline V vfma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }                                         \
    inline void vstore(float* p, V v) { _mm512_store_ps(p, v); }
namespace avx512 {
DG_AVX512_VECTORS
constexpr int kTileRows = 8;     // 24 accumulators, 3 weight vectors, 1 activation vector: of 32 registers
constexpr int kTileWeights = 3;
constexpr int64_t kKBlock = 512;  // a tile's 8 activation rows of a block: 16 KiB
#include "lane_sums_avx512.inc"
#include "f32_gemm_impl.inc"
}  // namespace avx512
// Where 512-bit operations issue as two 256-bit halves (split_512_units: Zen 4), tiles of 4 rows x 6
// weights, K in blocks of 1024: the same 24 accumulators, 10 loads per 24 multiply-adds instead of
// 11. On a Zen 4 (dg_bench matmul, SmolLM2's shapes, f32, speed against the AVX2 variant's in the
// same run, 32 rows, three alternated runs) 0.80-0.94x with 8 x 3 tiles, 1.03-1.26x with these;
// tried at 16-48 rows: 8 x 3 with K blocks of 1024 0.85-0.89x, 4 x 6 with blocks of 512 0.96-1.08x,
// 6 x 4 with 1024 1.10-1.16x. Not measured where 512-bit operations run at full width.
namespace avx512_split {
DG_AVX512_VECTORS
constexpr int kTileRows = 4;       // 24 accumulators, 6 weight vectors, 1 activation vector: of 32 registers
constexpr int kTileWeights = 6;
constexpr int64_t kKBlock = 1024;  // a tile's 4 activation rows of a block: 16 KiB
#include "lane_sums_avx512.inc"
#include "f32_gemm_impl.inc"
}  // namespace avx512_split
#undef DG_AVX512_VECTORS
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace avx2 {
using V = __m256;
constexpr int kLanes = 8;
constexpr int kTileRows = 4;  // 12 accumulators, 3 weight vectors, 1 activation vector: of 16 registers
constexpr int kTileWeights = 3;
constexpr int64_t kKBlock = 1024;  // a tile's 4 activation rows of a block: 16 KiB
inline V vzero() { return _mm256_setzero_ps(); }
inline V vload(const float* p) { return _mm256_load_ps(p); }
inline V vloadu(const float* p) { return _mm256_loadu_ps(p); }
inline V vload_first(const float* p, int n) {
    return _mm256_maskload_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
}
inline V vfma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
inline void vstore(float* p, V v) { _mm256_store_ps(p, v); }

// the lane sums of v[0..3], in the first four floats
inline __m128 sums4(const V v[4]) {
    const V h = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

template <int MR, int NR>
inline void store_sums(const V (&acc)[MR][NR], float* C, int64_t ldc) {
    constexpr int R = MR * NR;
    float out[R + 4];
#pragma GCC unroll 8
    for (int base = 0; base < R; base += 4) {
        V v[4];
#pragma GCC unroll 4
        for (int i = 0; i < 4; ++i) v[i] = base + i < R ? acc[(base + i) / NR][(base + i) % NR] : _mm256_setzero_ps();
        _mm_storeu_ps(out + base, sums4(v));
    }
#pragma GCC unroll 32
    for (int i = 0; i < R; ++i) C[i / NR * ldc + i % NR] = out[i];
}
#include "f32_gemm_impl.inc"
}  // namespace avx2
#pragma GCC pop_options

}  // namespace

void f32_gemm_nt(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* W, int64_t ldw, float* C,
                 int64_t ldc) {
    if (kernel_isa() >= Isa::avx512 && split_512_units()) return avx512_split::gemm_nt(M, N, K, A, lda, W, ldw, C, ldc);
    if (kernel_isa() >= Isa::avx512) return avx512::gemm_nt(M, N, K, A, lda, W, ldw, C, ldc);
    avx2::gemm_nt(M, N, K, A, lda, W, ldw, C, ldc);
}

void f32_gemm_nt_dequant(ggml_type type, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const char* W,
                         size_t ldw, float* C, int64_t ldc) {
    if (kernel_isa() >= Isa::avx512 && split_512_units())
        return avx512_split::gemm_nt_dequant(type, M, N, K, A, lda, W, ldw, C, ldc);
    if (kernel_isa() >= Isa::avx512) return avx512::gemm_nt_dequant(type, M, N, K, A, lda, W, ldw, C, ldc);
    avx2::gemm_nt_dequant(type, M, N, K, A, lda, W, ldw, C, ldc);
}

#else  // not x86-64: never called (isa.h)

void f32_gemm_nt(int64_t, int64_t, int64_t, const float*, int64_t, const float*, int64_t, float*, int64_t) {}
void f32_gemm_nt_dequant(ggml_type, int64_t, int64_t, int64_t, const float*, int64_t, const char*, size_t, float*,
                         int64_t) {}

#endif

}  // namespace dg::kernels
