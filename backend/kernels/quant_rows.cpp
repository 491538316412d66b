#include "quant_rows.h"

#include <cstring>
#include <vector>

#include "quant_dispatch.h"
#include "quant_vnni.h"

namespace dg::kernels {

#ifdef DG_QUANT_X86

namespace {

// weight rows this many rows ahead are prefetched
constexpr int64_t kPrefetchRows = 4;

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

// A weight block as 32 8-bit values (signed for q8_0, the unsigned nibbles for
// the q4 types), its scale, and the offset its values carry per unit of the
// activations' sum: q4_0 -8 d, q4_1 m.
struct Weights {
    __m256i q;
    float d, offset;
};

template <ggml_type T>
inline Weights load_block(const char* p) {
    Weights w;
    if constexpr (T == GGML_TYPE_Q8_0) {
        const auto* b = reinterpret_cast<const BlockQ8_0*>(p);
        w.q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs));
        w.d = _cvtsh_ss(b->d);
        w.offset = 0.0f;
    } else {
        const uint8_t* qs;
        if constexpr (T == GGML_TYPE_Q4_0) {
            const auto* b = reinterpret_cast<const BlockQ4_0*>(p);
            qs = b->qs;
            w.d = _cvtsh_ss(b->d);
            w.offset = -8.0f * w.d;
        } else {
            const auto* b = reinterpret_cast<const BlockQ4_1*>(p);
            qs = b->qs;
            w.d = _cvtsh_ss(b->d);
            w.offset = _cvtsh_ss(b->m);
        }
        __m128i n;
        std::memcpy(&n, qs, 16);
        const __m128i low = _mm_and_si128(n, _mm_set1_epi8(0x0F));
        const __m128i high = _mm_and_si128(_mm_srli_epi16(n, 4), _mm_set1_epi8(0x0F));
        w.q = _mm256_set_m128i(high, low);  // values 0-15, then 16-31
    }
    return w;
}

// sum of w.q[i] * a[i] over the block, as 8 int32 partial sums in f32
template <ggml_type T>
inline __m256 dot(const Weights& w, const ActBlock& a) {
    const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs));
    __m256i p16;
    if constexpr (T == GGML_TYPE_Q8_0)  // signed x signed: |w| x (a with w's sign)
        p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(w.q, w.q), _mm256_sign_epi8(av, w.q));
    else
        p16 = _mm256_maddubs_epi16(w.q, av);
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
}

template <ggml_type T, int M>
void rows_kernel(int64_t N, int64_t nb, const ActBlock* act, const char* W, size_t ldw, float* C, int64_t ldc) {
    constexpr int A = M <= 2 ? 2 : 1;  // accumulators per row: two chains when there are few rows
    const size_t lines = (ldw + 63) / 64;
    for (int64_t n = 0; n < N; ++n) {
        const char* row = W + size_t(n) * ldw;
        if (n + kPrefetchRows < N)
            for (size_t l = 0; l < lines; ++l) _mm_prefetch(row + kPrefetchRows * ldw + 64 * l, _MM_HINT_T0);
        __m256 acc[M][A];
        float offset[M];
        for (int m = 0; m < M; ++m) {
            for (int a = 0; a < A; ++a) acc[m][a] = _mm256_setzero_ps();
            offset[m] = 0.0f;
        }
        // block b into the accumulators `slot` (a constant once unrolled: no array in memory)
        auto step = [&](int64_t b, int slot) __attribute__((always_inline)) {
            const Weights w = load_block<T>(row + size_t(b) * block_bytes<T>());
            for (int m = 0; m < M; ++m) {
                const ActBlock& a = act[m * nb + b];
                acc[m][slot] = _mm256_fmadd_ps(_mm256_set1_ps(w.d * a.d), dot<T>(w, a), acc[m][slot]);
                if constexpr (T != GGML_TYPE_Q8_0) offset[m] += w.offset * a.s;
            }
        };
        int64_t b = 0;
        for (; b + A <= nb; b += A)
#pragma GCC unroll 2
            for (int a = 0; a < A; ++a) step(b + a, a);
        for (; b < nb; ++b) step(b, 0);
        for (int m = 0; m < M; ++m) {
            __m256 s = acc[m][0];
            if constexpr (A == 2) s = _mm256_add_ps(s, acc[m][1]);
            C[m * ldc + n] = hsum(s) + offset[m];
        }
    }
}

#pragma GCC pop_options

template <ggml_type T>
void rows_of_type(int rows, int64_t N, int64_t nb, const ActBlock* act, const char* W, size_t ldw, float* C,
                  int64_t ldc) {
    switch (rows) {
        case 1: return rows_kernel<T, 1>(N, nb, act, W, ldw, C, ldc);
        case 2: return rows_kernel<T, 2>(N, nb, act, W, ldw, C, ldc);
        case 3: return rows_kernel<T, 3>(N, nb, act, W, ldw, C, ldc);
        case 4: return rows_kernel<T, 4>(N, nb, act, W, ldw, C, ldc);
        case 5: return rows_kernel<T, 5>(N, nb, act, W, ldw, C, ldc);
        case 6: return rows_kernel<T, 6>(N, nb, act, W, ldw, C, ldc);
        default: return rows_kernel<T, 7>(N, nb, act, W, ldw, C, ldc);
    }
}

}  // namespace

void quant_rows_nt(ggml_type type, int rows, int64_t N, int64_t K, const float* A, int64_t lda, const char* W,
                   size_t ldw, float* C, int64_t ldc) {
    quant_product(
        type, rows, K, A, lda, [&] { vnni::quant_rows_nt(type, rows, N, K, A, lda, W, ldw, C, ldc); },
        [&](auto t, const ActBlock* act, int64_t nb) {
            constexpr ggml_type T = decltype(t)::value;
            rows_of_type<T>(rows, N, nb, act, W, ldw, C, ldc);
        });
}

#else  // not x86-64: never chosen (quant_product_supports)

void quant_rows_nt(ggml_type, int, int64_t, int64_t, const float*, int64_t, const char*, size_t, float*, int64_t) {}

#endif

bool quant_rows_supports(ggml_type type) { return quant_product_supports(type); }

}  // namespace dg::kernels
