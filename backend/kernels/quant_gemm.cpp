#include "quant_gemm.h"

#include <cblas.h>

#include <algorithm>
#include <vector>

#include "amx.h"
#include "quant_amx.h"
#include "quant_dispatch.h"
#include "quant_vnni.h"

namespace dg::kernels {

#ifdef DG_QUANT_X86

namespace {

// Weight rows per chunk: the tiles of a chunk, then the chunk's offsets (q4 types) with one sgemm.
constexpr int64_t kChunkRows = 128;

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

// A weight block for maddubs (whose first operand is unsigned): q8_0 as |w|
// with the signs kept apart (moved onto the activations), the q4 types as their
// nibbles 0..15 in value order.
struct WBlock {
    __m256i q, sign;
    float d;
};

template <ggml_type T>
inline WBlock load_w(const char* p) {
    WBlock w;
    if constexpr (T == GGML_TYPE_Q8_0) {
        const auto* b = reinterpret_cast<const BlockQ8_0*>(p);
        w.sign = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs));
        w.q = _mm256_sign_epi8(w.sign, w.sign);
        w.d = _cvtsh_ss(b->d);
    } else {
        const auto* b = reinterpret_cast<const BlockQ4_0*>(p);  // q4_1: the same d and qs after its m
        const uint8_t* qs = T == GGML_TYPE_Q4_0 ? b->qs : reinterpret_cast<const BlockQ4_1*>(p)->qs;
        w.d = _cvtsh_ss(b->d);
        const __m128i n = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
        const __m128i mask = _mm_set1_epi8(0x0F);
        w.q = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(n, 4), mask), _mm_and_si128(n, mask));
        w.sign = w.q;  // unused
    }
    return w;
}

// C[MR, NR] (ldc apart) = the integer part of MR activation rows (act, rows
// act_stride blocks apart) times NR weight rows (W, ldw bytes apart), nb blocks.
template <ggml_type T, int MR, int NR>
void tile(int64_t nb, const ActBlock* act, int64_t act_stride, const char* W, size_t ldw, float* C, int64_t ldc) {
    __m256 acc[MR][NR];
    for (int m = 0; m < MR; ++m)
        for (int j = 0; j < NR; ++j) acc[m][j] = _mm256_setzero_ps();
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t b = 0; b < nb; ++b) {
        WBlock w[NR];
        __m256 wd[NR];  // each weight block's scale in every lane
        for (int j = 0; j < NR; ++j) {
            w[j] = load_w<T>(W + size_t(j) * ldw + size_t(b) * block_bytes<T>());
            wd[j] = _mm256_set1_ps(w[j].d);
        }
        for (int m = 0; m < MR; ++m) {
            const ActBlock& a = act[m * act_stride + b];
            const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs));
            // the product of the two scales as a vector multiply (the same float as the scalar one): a
            // broadcast load per row and one multiply per pair, where a scalar multiply and a broadcast
            // per pair took two of the vector pipes' slots
            const __m256 ad = _mm256_broadcast_ss(&a.d);
            for (int j = 0; j < NR; ++j) {
                const __m256i p16 = T == GGML_TYPE_Q8_0 ? _mm256_maddubs_epi16(w[j].q, _mm256_sign_epi8(av, w[j].sign))
                                                        : _mm256_maddubs_epi16(w[j].q, av);
                const __m256 dot = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones));
                acc[m][j] = _mm256_fmadd_ps(_mm256_mul_ps(wd[j], ad), dot, acc[m][j]);
            }
        }
    }
    for (int m = 0; m < MR; ++m)
        for (int j = 0; j < NR; ++j) C[m * ldc + j] = hsum(acc[m][j]);
}

template <ggml_type T, int NR>
void tiles_of_rows(int64_t M, int64_t nb, const ActBlock* act, const char* W, size_t ldw, float* C, int64_t ldc) {
    int64_t m = 0;
    for (; m + 4 <= M; m += 4) tile<T, 4, NR>(nb, act + m * nb, nb, W, ldw, C + m * ldc, ldc);
    switch (M - m) {
        case 3: return tile<T, 3, NR>(nb, act + m * nb, nb, W, ldw, C + m * ldc, ldc);
        case 2: return tile<T, 2, NR>(nb, act + m * nb, nb, W, ldw, C + m * ldc, ldc);
        case 1: return tile<T, 1, NR>(nb, act + m * nb, nb, W, ldw, C + m * ldc, ldc);
        default: return;
    }
}

// the offset each block's values carry per unit of the activations' sum: q4_0 -8 d, q4_1 m
template <ggml_type T>
inline float block_offset(const char* p) {
    if constexpr (T == GGML_TYPE_Q4_0) return -8.0f * _cvtsh_ss(reinterpret_cast<const BlockQ4_0*>(p)->d);
    else return _cvtsh_ss(reinterpret_cast<const BlockQ4_1*>(p)->m);
}

template <ggml_type T>
void gemm(int64_t M, int64_t N, int64_t nb, const ActBlock* act, const char* W, size_t ldw, float* C, int64_t ldc) {
    thread_local std::vector<float> sums, offsets;  // M x nb activation sums, chunk x nb weight offsets
    if constexpr (T != GGML_TYPE_Q8_0) {
        if (sums.size() < size_t(M * nb)) sums.resize(size_t(M * nb));
        for (int64_t i = 0; i < M * nb; ++i) sums[size_t(i)] = act[i].s;
        if (offsets.size() < size_t(kChunkRows * nb)) offsets.resize(size_t(kChunkRows * nb));
    }
    for (int64_t c = 0; c < N; c += kChunkRows) {
        const int64_t nc = std::min(kChunkRows, N - c);
        const char* Wc = W + size_t(c) * ldw;
        int64_t n = 0;
        for (; n + 2 <= nc; n += 2) tiles_of_rows<T, 2>(M, nb, act, Wc + size_t(n) * ldw, ldw, C + c + n, ldc);
        if (n < nc) tiles_of_rows<T, 1>(M, nb, act, Wc + size_t(n) * ldw, ldw, C + c + n, ldc);
        if constexpr (T != GGML_TYPE_Q8_0) {
            for (int64_t r = 0; r < nc; ++r)
                for (int64_t b = 0; b < nb; ++b)
                    offsets[size_t(r * nb + b)] = block_offset<T>(Wc + size_t(r) * ldw + size_t(b) * block_bytes<T>());
            // C[:, chunk] += sums[M, nb] . offsets[nc, nb]^T
            scipy_cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(M), int(nc), int(nb), 1.0f, sums.data(),
                              int(nb), offsets.data(), int(nb), 1.0f, C + c, int(ldc));
        }
    }
}

#pragma GCC pop_options

}  // namespace

void quant_gemm_nt(ggml_type type, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const char* W,
                   size_t ldw, float* C, int64_t ldc) {
    // prefill on AMX tiles where the OS enabled them (amx.h; kernel_isa() checked again for
    // set_kernel_isa_for_benchmark). Never taken on a CPU without AMX, such as the one this was
    // written and tested on: tests/ops/test_amx.py runs the same algorithm on emulated tiles.
    if (M >= amx::kMinRows && amx::supports(type) && amx_int8() && kernel_isa() >= Isa::avx512vnni)
        return amx::quant_gemm_nt(type, M, N, K, A, lda, W, ldw, C, ldc);
    quant_product(
        type, M, K, A, lda, [&] { vnni::quant_gemm_nt(type, M, N, K, A, lda, W, ldw, C, ldc); },
        [&](auto t, const ActBlock* act, int64_t nb) {
            constexpr ggml_type T = decltype(t)::value;
            gemm<T>(M, N, nb, act, W, ldw, C, ldc);
        });
}

#else  // not x86-64: never chosen (quant_product_supports)

void quant_gemm_nt(ggml_type, int64_t, int64_t, int64_t, const float*, int64_t, const char*, size_t, float*, int64_t) {}

#endif

bool quant_gemm_supports(ggml_type type) { return quant_product_supports(type); }

}  // namespace dg::kernels
