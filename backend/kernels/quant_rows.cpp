#include "quant_rows.h"

#include <cstddef>
#include <vector>

#include "isa.h"
#include "quant_dispatch.h"
#include "quant_vnni.h"

namespace dg::kernels {

#ifdef DG_QUANT_X86

namespace {

// weight rows this many rows ahead are prefetched
constexpr int64_t kPrefetchRows = 4;

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

// The weight block's scale d and the offset its values carry per unit of the activations' sum, over
// kOffsetScale: q4_0 d (x -8: its nibbles are values + 8), q4_1 m, q8_0 none.
template <ggml_type T>
constexpr float kOffsetScale = T == GGML_TYPE_Q4_0 ? -8.0f : 1.0f;

template <ggml_type T>
inline void scales(const char* p, float& d, float& offset) {
    if constexpr (T == GGML_TYPE_Q8_0) {
        d = _cvtsh_ss(reinterpret_cast<const BlockQ8_0*>(p)->d);
        offset = 0.0f;
    } else if constexpr (T == GGML_TYPE_Q4_0) {
        d = offset = _cvtsh_ss(reinterpret_cast<const BlockQ4_0*>(p)->d);
    } else {
        d = _cvtsh_ss(reinterpret_cast<const BlockQ4_1*>(p)->d);
        offset = _cvtsh_ss(reinterpret_cast<const BlockQ4_1*>(p)->m);
    }
}

// A q4 block's 16 bytes as the nibbles 0-15 (low) and 16-31 (high), values 0-15.
template <ggml_type T>
inline void nibbles(const char* p, __m128i& low, __m128i& high) {
    const size_t at = T == GGML_TYPE_Q4_0 ? offsetof(BlockQ4_0, qs) : offsetof(BlockQ4_1, qs);
    const __m128i n = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + at));
    low = _mm_and_si128(n, _mm_set1_epi8(0x0F));
    high = _mm_and_si128(_mm_srli_epi16(n, 4), _mm_set1_epi8(0x0F));
}

// Two forms of the block products, the same sums in another order: in 256-bit vectors (Lanes8) and
// in 128-bit ones (Lanes4). On a CPU whose units are 128 bits wide (AMD Zen 1 and Zen+:
// half_width_units(), isa.h) a 256-bit operation issues as two halves, and Lanes8 took a lane insert,
// two halves of the widening multiply-add, a conversion and a multiply-add of 8 lanes per block and
// row; Lanes4 adds the q4 types' two halves of 16-bit products before its one widening multiply-add
// (no overflow: each is at most 2 x 15 x 128 in magnitude) and converts and accumulates 4 lanes.
// On a Zen 1, dg_bench matmul: 1 row q4_0 15-18 -> 19-25 GFLOP/s, 2-7 rows 18-24 -> 25-32 (q8_0 gains
// least, 5-20%: no halves to add; docs/performance.md). llvm-mca's models of 256-bit-unit CPUs give the
// two forms the same cycles at 1 row (within 8%: Haswell) and Lanes4 5-23% more at 2-7 rows on Intel's:
// so Lanes4 runs one row everywhere, 2-7 rows only on half-width units.

// 4 f32 lanes per row; a weight block as two 16-byte halves
struct Lanes4 {
    using F = __m128;
    struct Weights {
        __m128i q0, q1;
        float d, offset;
    };
    template <ggml_type T>
    static Weights load(const char* p) {
        Weights w;
        scales<T>(p, w.d, w.offset);
        if constexpr (T == GGML_TYPE_Q8_0) {
            const auto* b = reinterpret_cast<const BlockQ8_0*>(p);
            w.q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b->qs));
            w.q1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b->qs + 16));
        } else {
            nibbles<T>(p, w.q0, w.q1);
        }
        return w;
    }
    // sum of the block's 32 products w[i] * a[i], as 4 int32 partial sums in f32
    template <ggml_type T>
    static F dot(const Weights& w, const ActBlock& a) {
        const __m128i a0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a.qs));
        const __m128i a1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a.qs + 16));
        const __m128i ones = _mm_set1_epi16(1);
        __m128i s32;
        if constexpr (T == GGML_TYPE_Q8_0) {  // signed x signed: |w| x (a with w's sign)
            const __m128i p0 = _mm_maddubs_epi16(_mm_sign_epi8(w.q0, w.q0), _mm_sign_epi8(a0, w.q0));
            const __m128i p1 = _mm_maddubs_epi16(_mm_sign_epi8(w.q1, w.q1), _mm_sign_epi8(a1, w.q1));
            s32 = _mm_add_epi32(_mm_madd_epi16(p0, ones), _mm_madd_epi16(p1, ones));
        } else {
            s32 = _mm_madd_epi16(_mm_add_epi16(_mm_maddubs_epi16(w.q0, a0), _mm_maddubs_epi16(w.q1, a1)), ones);
        }
        return _mm_cvtepi32_ps(s32);
    }
    static F zero() { return _mm_setzero_ps(); }
    static F fmadd(float s, F v, F acc) { return _mm_fmadd_ps(_mm_set1_ps(s), v, acc); }
    static F add(F a, F b) { return _mm_add_ps(a, b); }
    static float sum(F v) {
        v = _mm_add_ps(v, _mm_movehl_ps(v, v));
        return _mm_cvtss_f32(_mm_add_ss(v, _mm_movehdup_ps(v)));
    }
};

// 8 f32 lanes per row; a weight block as one 32-byte vector
struct Lanes8 {
    using F = __m256;
    struct Weights {
        __m256i q;
        float d, offset;
    };
    template <ggml_type T>
    static Weights load(const char* p) {  // (not from Lanes4::load: GCC does not join its two loads into one)
        Weights w;
        scales<T>(p, w.d, w.offset);
        if constexpr (T == GGML_TYPE_Q8_0) {
            w.q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(reinterpret_cast<const BlockQ8_0*>(p)->qs));
        } else {
            __m128i low, high;
            nibbles<T>(p, low, high);
            w.q = _mm256_set_m128i(high, low);
        }
        return w;
    }
    // sum of the block's 32 products w[i] * a[i], as 8 int32 partial sums in f32
    template <ggml_type T>
    static F dot(const Weights& w, const ActBlock& a) {
        const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs));
        __m256i p16;
        if constexpr (T == GGML_TYPE_Q8_0)  // signed x signed: |w| x (a with w's sign)
            p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(w.q, w.q), _mm256_sign_epi8(av, w.q));
        else
            p16 = _mm256_maddubs_epi16(w.q, av);
        return _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
    }
    static F zero() { return _mm256_setzero_ps(); }
    static F fmadd(float s, F v, F acc) { return _mm256_fmadd_ps(_mm256_set1_ps(s), v, acc); }
    static F add(F a, F b) { return _mm256_add_ps(a, b); }
    static float sum(F v) { return hsum(v); }
};

template <ggml_type T, int M, typename L>
void rows_kernel(int64_t N, int64_t nb, const ActBlock* act, const char* W, size_t ldw, float* C, int64_t ldc) {
    constexpr int A = M <= 2 ? 2 : 1;  // accumulators per row: two chains when there are few rows
    const size_t lines = (ldw + 63) / 64;
    for (int64_t n = 0; n < N; ++n) {
        const char* row = W + size_t(n) * ldw;
        if (n + kPrefetchRows < N)
            for (size_t l = 0; l < lines; ++l) _mm_prefetch(row + kPrefetchRows * ldw + 64 * l, _MM_HINT_T0);
        typename L::F acc[M][A];
        float offset[M][A];
        for (int m = 0; m < M; ++m)
            for (int a = 0; a < A; ++a) {
                acc[m][a] = L::zero();
                offset[m][a] = 0.0f;
            }
        // block b into the accumulators `slot` (a constant once unrolled: no array in memory)
        auto step = [&](int64_t b, int slot) __attribute__((always_inline)) {
            const typename L::Weights w = L::template load<T>(row + size_t(b) * block_bytes<T>());
            for (int m = 0; m < M; ++m) {
                const ActBlock& a = act[m * nb + b];
                acc[m][slot] = L::fmadd(w.d * a.d, L::template dot<T>(w, a), acc[m][slot]);
                if constexpr (T != GGML_TYPE_Q8_0) offset[m][slot] += w.offset * a.s;
            }
        };
        int64_t b = 0;
        for (; b + A <= nb; b += A)
#pragma GCC unroll 2
            for (int a = 0; a < A; ++a) step(b + a, a);
        for (; b < nb; ++b) step(b, 0);
        for (int m = 0; m < M; ++m) {
            typename L::F s = acc[m][0];
            float o = offset[m][0];
            if constexpr (A == 2) {
                s = L::add(s, acc[m][1]);
                o += offset[m][1];
            }
            C[m * ldc + n] = L::sum(s) + kOffsetScale<T> * o;
        }
    }
}

#pragma GCC pop_options

template <ggml_type T, typename L>
void rows_of_width(int rows, int64_t N, int64_t nb, const ActBlock* act, const char* W, size_t ldw, float* C,
                   int64_t ldc) {
    switch (rows) {
        case 1: return rows_kernel<T, 1, L>(N, nb, act, W, ldw, C, ldc);
        case 2: return rows_kernel<T, 2, L>(N, nb, act, W, ldw, C, ldc);
        case 3: return rows_kernel<T, 3, L>(N, nb, act, W, ldw, C, ldc);
        case 4: return rows_kernel<T, 4, L>(N, nb, act, W, ldw, C, ldc);
        case 5: return rows_kernel<T, 5, L>(N, nb, act, W, ldw, C, ldc);
        case 6: return rows_kernel<T, 6, L>(N, nb, act, W, ldw, C, ldc);
        default: return rows_kernel<T, 7, L>(N, nb, act, W, ldw, C, ldc);
    }
}

template <ggml_type T>
void rows_of_type(int rows, int64_t N, int64_t nb, const ActBlock* act, const char* W, size_t ldw, float* C,
                  int64_t ldc) {
    if (rows == 1) return rows_kernel<T, 1, Lanes4>(N, nb, act, W, ldw, C, ldc);
    if (half_width_units()) return rows_of_width<T, Lanes4>(rows, N, nb, act, W, ldw, C, ldc);
    rows_of_width<T, Lanes8>(rows, N, nb, act, W, ldw, C, ldc);
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
