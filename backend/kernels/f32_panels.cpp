#include "f32_panels.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "activation.h"
#include "gelu_erf_simd.h"
#include "ggml.h"
#include "isa.h"
#include "vector_clones.h"

#if defined(__GNUC__) && defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#define DG_F32_PANELS_X86 1
#endif

namespace dg::kernels {

namespace {

// (the same for f32 and f16 weights: only the element moves)
template <class Wt>
void pack(int64_t N, int64_t K, const Wt* W, int64_t ldw, Wt* P) {
    const int64_t s = panel_split();
    for (int64_t p0 = 0; p0 < N; p0 += kPanelWidth) {
        const int64_t width = std::min(kPanelWidth, N - p0);
        Wt* panel = P + p0 * K;
        for (int64_t j = 0; j < width; ++j) {
            const Wt* w = W + (p0 + j) * ldw;
            Wt* out = panel + panel_at(K, width, s, 0, j);
            const int64_t step = panel_at(K, width, s, 1, j) - panel_at(K, width, s, 0, j);
            for (int64_t k = 0; k < K; ++k) out[k * step] = w[k];
        }
    }
}

template <class Wt>
void unpack(int64_t N, int64_t K, const Wt* P, Wt* W) {
    const int64_t s = panel_split();
    for (int64_t p0 = 0; p0 < N; p0 += kPanelWidth) {
        const int64_t width = std::min(kPanelWidth, N - p0);
        const Wt* panel = P + p0 * K;
        for (int64_t j = 0; j < width; ++j)
            for (int64_t k = 0; k < K; ++k) W[(p0 + j) * K + k] = panel[panel_at(K, width, s, k, j)];
    }
}

// bf16 pairs (bf16_pair_panels): panel element 2 (t w + j) + e = W[j, 2 t + e] (whole panels: only
// AVX-512's tiles read them)
template <bool ToPanels>
void move_pairs(int64_t N, int64_t K, uint16_t* W, uint16_t* P) {
    for (int64_t p0 = 0; p0 < N; p0 += kPanelWidth) {
        const int64_t width = std::min(kPanelWidth, N - p0);
        uint16_t* panel = P + p0 * K;
        for (int64_t j = 0; j < width; ++j)
            for (int64_t k = 0; k < K; ++k) {
                uint16_t& at = panel[2 * ((k / 2) * width + j) + k % 2];
                uint16_t& w = W[(p0 + j) * K + k];
                if (ToPanels) at = w;
                else w = at;
            }
    }
}

}  // namespace

int64_t panel_split() {
    static const int64_t split = [] {
        const char* v = std::getenv("DYNGRAPH_PANEL_SPLIT");  // (the tests run every kernel over both)
        if (v && std::strcmp(v, "24") == 0) return int64_t(24);
        if (v && std::strcmp(v, "48") == 0) return kPanelWidth;
        return kernel_isa() == Isa::avx2 ? int64_t(24) : kPanelWidth;
    }();
    return split;
}

bool bf16_pair_panels(int64_t K) {
#if defined(__GNUC__) && defined(__x86_64__)
    static const bool has = [] {  // AVX512_BF16: CPUID leaf 7, sub-leaf 1, EAX bit 5 (the OS keeps the
        unsigned a = 0, b = 0, c = 0, d = 0;  // AVX-512 state where kernel_isa() is AVX-512)
        return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 5) & 1;
    }();
    return K % 2 == 0 && has && kernel_isa() >= Isa::avx512;
#else
    (void)K;
    return false;
#endif
}

void pack_bf16_pair_panels(int64_t N, int64_t K, const uint16_t* W, uint16_t* P) {
    move_pairs<true>(N, K, const_cast<uint16_t*>(W), P);  // (W only read)
}
void unpack_bf16_pair_panels(int64_t N, int64_t K, const uint16_t* P, uint16_t* W) {
    move_pairs<false>(N, K, W, const_cast<uint16_t*>(P));  // (P only read)
}

void pack_panels(int64_t N, int64_t K, const float* W, int64_t ldw, float* P) { pack(N, K, W, ldw, P); }
void unpack_panels(int64_t N, int64_t K, const float* P, float* W) { unpack(N, K, P, W); }
void pack_half_panels(int64_t N, int64_t K, const uint16_t* W, uint16_t* P) { pack(N, K, W, K, P); }
void unpack_half_panels(int64_t N, int64_t K, const uint16_t* P, uint16_t* W) { unpack(N, K, P, W); }

void panel_row_to_f32(ggml_type type, int64_t N, int64_t K, const void* P, int64_t n, float* row) {
    const int64_t p0 = n / kPanelWidth * kPanelWidth, width = std::min(kPanelWidth, N - p0), j = n - p0;
    const int64_t s = panel_split();
    if (type == GGML_TYPE_F32) {
        const float* panel = static_cast<const float*>(P) + p0 * K;
        for (int64_t k = 0; k < K; ++k) row[k] = panel[panel_at(K, width, s, k, j)];
        return;
    }
    const uint16_t* panel = static_cast<const uint16_t*>(P) + p0 * K;
    const bool pairs = type == GGML_TYPE_BF16 && bf16_pair_panels(K);
    for (int64_t k = 0; k < K; ++k) {
        const uint16_t h = pairs ? panel[2 * ((k / 2) * width + j) + k % 2] : panel[panel_at(K, width, s, k, j)];
        row[k] = type == GGML_TYPE_F16 ? ggml_fp16_to_fp32(h) : ggml_bf16_to_fp32(ggml_bf16_t{h});
    }
}

namespace {

inline float to_f32(float x) { return x; }
inline float to_f32(uint16_t h) { return ggml_fp16_to_fp32(h); }  // (ggml_fp16_t)
inline float to_f32(ggml_bf16_t h) { return ggml_bf16_to_fp32(h); }

// Portable code (other CPUs, DYNGRAPH_KERNEL_ISA=generic): a row's outputs of one panel summed in a
// local array the compiler keeps in vector registers.
template <class Wt>
void gemm_panels_portable(int64_t M, int64_t N, int64_t K, int64_t n0, int64_t n1, const float* A, int64_t lda,
                          const Wt* P, float* C, int64_t ldc, PanelEpilogue epi) {
    const int64_t s = panel_split();
    for (int64_t p0 = n0; p0 < n1; p0 += kPanelWidth) {
        const int64_t width = std::min(kPanelWidth, N - p0), cols = std::min(width, n1 - p0);
        for (int64_t q0 = 0; q0 < cols; q0 += s) {  // each sub-panel: sw columns, sw floats per k
            const int64_t sw = std::min(s, width - q0);
            const Wt* sub = P + (p0 + q0) * K;
            for (int64_t m = 0; m < M; ++m) {
                float acc[kPanelWidth] = {};
                const float* a = A + m * lda;
                for (int64_t k = 0; k < K; ++k) {
                    const Wt* b = sub + k * sw;
                    for (int64_t j = 0; j < sw; ++j) acc[j] += a[k] * to_f32(b[j]);
                }
                std::copy(acc, acc + std::min(sw, cols - q0), C + m * ldc + (p0 - n0) + q0);
            }
        }
    }
    for (int64_t m = 0; m < M; ++m)
        if (epi.bias)
            for (int64_t j = 0; j < n1 - n0; ++j) C[m * ldc + j] += epi.bias[j];
    activate(epi.act, M, n1 - n0, C, ldc);
}

#ifdef DG_F32_PANELS_X86

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx2,fma,f16c")
namespace avx512 {
using V = __m512;
using Mask = __mmask16;
constexpr int kLanes = 16;
constexpr int kTileRows = 8;  // 24 accumulators and 3 panel vectors of 32 registers (the broadcast is an operand)
constexpr int kTileVecs = 3;  // a panel's 48 floats
constexpr int kWideRows = kTileRows;
constexpr int64_t kDepthBlock = 768;  // (a Xeon: docs/design/gemm-choices.md, "Large products on AVX-512")
inline V vzero() { return _mm512_setzero_ps(); }
inline V vloadu(const float* p) { return _mm512_loadu_ps(p); }
inline V vbroadcast(const float* p) { return _mm512_set1_ps(*p); }
inline V vfma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
inline V vadd(V a, V b) { return _mm512_add_ps(a, b); }
inline void vstoreu(float* p, V v) { _mm512_storeu_ps(p, v); }
inline Mask mask_of(int n) { return Mask((1u << n) - 1); }
inline V vload_mask(const float* p, Mask m) { return _mm512_maskz_loadu_ps(m, p); }
inline void vstore_mask(float* p, Mask m, V v) { _mm512_mask_storeu_ps(p, m, v); }
inline V vload_f16(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
inline V vload_bf16(const ggml_bf16_t* p) {  // (a bf16 is the top half of its f32)
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
inline int lanes_in(Mask m) { return __builtin_popcount(unsigned(m)); }
inline V vgelu(V x) { return gelu::avx512::gelu_erf_v(x); }
inline V vrelu(V x) { return _mm512_mask_mov_ps(x, _mm512_cmp_ps_mask(x, vzero(), _CMP_LE_OQ), vzero()); }
#include "f32_panels_types.inc"
}  // namespace avx512
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
namespace avx2 {
using V = __m256;
using Mask = __m256i;
constexpr int kLanes = 8;
constexpr int kTileRows = 4;  // 12 accumulators, 3 panel vectors, the broadcast: of 16 registers
constexpr int kTileVecs = 3;  // half a panel (24 floats) per pass
constexpr int kWideRows = 2;  // 12 accumulators over a whole panel: 1 to 3 rows read it once
constexpr int64_t kDepthBlock = 512;  // (Zen 3: see docs/design/gemm-choices.md, "Large K")
inline V vzero() { return _mm256_setzero_ps(); }
inline V vloadu(const float* p) { return _mm256_loadu_ps(p); }
inline V vbroadcast(const float* p) { return _mm256_broadcast_ss(p); }
inline V vfma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
inline V vadd(V a, V b) { return _mm256_add_ps(a, b); }
inline void vstoreu(float* p, V v) { _mm256_storeu_ps(p, v); }
inline Mask mask_of(int n) { return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)); }
inline V vload_mask(const float* p, Mask m) { return _mm256_maskload_ps(p, m); }
inline void vstore_mask(float* p, Mask m, V v) { _mm256_maskstore_ps(p, m, v); }
inline V vload_f16(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline V vload_bf16(const ggml_bf16_t* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
inline int lanes_in(Mask m) { return __builtin_popcount(unsigned(_mm256_movemask_ps(_mm256_castsi256_ps(m)))); }
inline V vgelu(V x) { return gelu::avx2::gelu_erf_v(x); }
inline V vrelu(V x) { return _mm256_blendv_ps(x, vzero(), _mm256_cmp_ps(x, vzero(), _CMP_LE_OQ)); }
#include "f32_panels_types.inc"
}  // namespace avx2
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bf16,avx2,fma,f16c")
// bf16 weights in pairs of k (bf16_pair_panels) by vdpbf16ps: the tiles of the f32 panels with a pair of
// k as their k, the activations' pairs (rounded to bf16) broadcast as one 32-bit lane, and two products
// a lane summed into each f32 accumulator
namespace avx512bf16 {
// (AVX-512's tile shape and stores)
using avx512::kLanes, avx512::kTileRows, avx512::kTileVecs, avx512::kWideRows, avx512::kDepthBlock, avx512::Mask,
    avx512::V;
using avx512::mask_of, avx512::vadd, avx512::vgelu, avx512::vload_mask, avx512::vloadu, avx512::vrelu,
    avx512::vstore_mask, avx512::vstoreu, avx512::vzero;
inline V vbroadcast(const float* p) {  // (a pair of bf16 where the tiles see a float: its bits, copied)
    uint32_t pair;
    std::memcpy(&pair, p, sizeof pair);
    return _mm512_castsi512_ps(_mm512_set1_epi32(int32_t(pair)));
}
inline V vfma(V a, V b, V c) { return _mm512_dpbf16_ps(c, (__m512bh)a, (__m512bh)b); }
using Wt = uint32_t;  // (a pair of bf16)
inline V vloadw(const uint32_t* p) { return _mm512_castsi512_ps(_mm512_loadu_si512(p)); }
inline V vloadw_mask(const uint32_t* p, Mask m) { return _mm512_castsi512_ps(_mm512_maskz_loadu_epi32(m, p)); }
#include "f32_panels_impl.inc"

// A's M rows (K even) rounded to bf16 (nearest, ties to even), row after row
void round_rows(int64_t M, int64_t K, const float* A, int64_t lda, uint16_t* out) {
    for (int64_t m = 0; m < M; ++m, out += K) {
        const float* a = A + m * lda;
        int64_t k = 0;
        for (; k + 16 <= K; k += 16)
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + k), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(a + k)));
        for (; k < K; ++k) out[k] = ggml_fp32_to_bf16(a[k]).bits;
    }
}
}  // namespace avx512bf16
#pragma GCC pop_options

#endif

}  // namespace

void f32_gemm_panels(int64_t M, int64_t N, int64_t K, int64_t n0, int64_t n1, const float* A, int64_t lda,
                     const float* P, float* C, int64_t ldc, PanelEpilogue epi) {
#ifdef DG_F32_PANELS_X86
    // (AVX-512's tiles need whole panels: sub-panels of 24, packed where the process began at AVX2, go
    // to AVX2's tiles, which take either)
    const int64_t split = panel_split();
    if (kernel_isa() >= Isa::avx512 && split == kPanelWidth)
        return avx512::f32::gemm_panels(M, N, K, n0, n1, A, lda, P, split, C, ldc, epi);
    if (kernel_isa() >= Isa::avx2) return avx2::f32::gemm_panels(M, N, K, n0, n1, A, lda, P, split, C, ldc, epi);
#endif
    gemm_panels_portable(M, N, K, n0, n1, A, lda, P, C, ldc, epi);
}

void half_gemm_panels(ggml_type type, int64_t M, int64_t N, int64_t K, int64_t n0, int64_t n1, const float* A,
                      int64_t lda, const uint16_t* P, float* C, int64_t ldc, PanelEpilogue epi) {
    const auto* B = reinterpret_cast<const ggml_bf16_t*>(P);  // (bf16: ggml's struct of its 16 bits)
#ifdef DG_F32_PANELS_X86
    if (type == GGML_TYPE_BF16 && bf16_pair_panels(K)) {
        thread_local std::vector<uint16_t> rows;  // A rounded to bf16: the pairs the tiles broadcast
        if (rows.size() < size_t(M * K)) rows.resize(size_t(M * K));
        avx512bf16::round_rows(M, K, A, lda, rows.data());
        return avx512bf16::gemm_panels(M, N, K / 2, n0, n1, reinterpret_cast<const float*>(rows.data()), K / 2,
                                       reinterpret_cast<const uint32_t*>(P), kPanelWidth, C, ldc, epi);
    }
    if (kernel_isa() >= Isa::avx512 && panel_split() == kPanelWidth)
        return type == GGML_TYPE_F16 ? avx512::f16::gemm_panels(M, N, K, n0, n1, A, lda, P, kPanelWidth, C, ldc, epi)
                                     : avx512::bf16::gemm_panels(M, N, K, n0, n1, A, lda, B, kPanelWidth, C, ldc, epi);
    if (kernel_isa() >= Isa::avx2)
        return type == GGML_TYPE_F16 ? avx2::f16::gemm_panels(M, N, K, n0, n1, A, lda, P, panel_split(), C, ldc, epi)
                                     : avx2::bf16::gemm_panels(M, N, K, n0, n1, A, lda, B, panel_split(), C, ldc, epi);
#endif
    if (type == GGML_TYPE_F16) gemm_panels_portable(M, N, K, n0, n1, A, lda, P, C, ldc, epi);
    else gemm_panels_portable(M, N, K, n0, n1, A, lda, B, C, ldc, epi);
}

}  // namespace dg::kernels
