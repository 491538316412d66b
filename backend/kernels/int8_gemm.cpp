#include "int8_gemm.h"

#include <algorithm>
#include <cstring>

#include "../gg.h"
#include "isa.h"
#include "quantize.h"

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define DG_INT8_X86 1
#endif

namespace dg::kernels {

namespace {

constexpr int64_t kChunk = 32768;  // k's per 32-bit partial sum: 32768 * 255 * 255 < 2^31
constexpr int64_t kRowBlock = 64;  // activation rows per unit of work
constexpr int64_t kColBlock = 32;  // weight rows (output columns) per unit of work: 32 KB of weights at K = 1024

// The activation rows, widened to 16 bits with the zero point taken out, and their sums (one copy per thread).
struct Rows {
    std::vector<int16_t> a;
    std::vector<int64_t> sum;
};

void widen_rows(Rows& rows, const Int8GemmParams& p, const ggml_tensor* a, int64_t M, int64_t K) {
    rows.a.resize(size_t(M * K));
    rows.sum.assign(size_t(M), 0);
    for (int64_t m = 0; m < M; ++m) {
        const char* row = static_cast<const char*>(a->data) + m * a->nb[1];
        int16_t* dst = rows.a.data() + m * K;
        int64_t s = 0;
        if (p.a_unsigned) {
            for (int64_t k = 0; k < K; ++k) s += dst[k] = int16_t(int32_t(uint8_t(row[k])) - p.a_zp);
        } else {
            for (int64_t k = 0; k < K; ++k) s += dst[k] = int16_t(int32_t(int8_t(row[k])) - p.a_zp);
        }
        rows.sum[size_t(m)] = s;
    }
}

// tot[r][c] = sum_k a[r][k] * w[c][k]: R activation rows (K apart) by C weight rows.
template <int R, int C>
void tile_generic(const int16_t* a, int64_t K, const char* const* w, bool wu, int64_t tot[4][4]) {
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) {
            const int16_t* ar = a + r * K;
            int64_t total = 0;
            for (int64_t k0 = 0; k0 < K; k0 += kChunk) {
                const int64_t k1 = std::min(K, k0 + kChunk);
                int32_t s = 0;
                if (wu) {
                    const auto* wr = reinterpret_cast<const uint8_t*>(w[c]);
                    for (int64_t k = k0; k < k1; ++k) s += int32_t(ar[k]) * int32_t(wr[k]);
                } else {
                    const auto* wr = reinterpret_cast<const int8_t*>(w[c]);
                    for (int64_t k = k0; k < k1; ++k) s += int32_t(ar[k]) * int32_t(wr[k]);
                }
                total += s;
            }
            tot[r][c] = total;
        }
}

#ifdef DG_INT8_X86
#pragma GCC push_options
#pragma GCC target("avx2")

inline int64_t hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return int64_t(_mm_cvtsi128_si32(s));
}

template <bool WU>
inline __m256i widen(const char* p) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return WU ? _mm256_cvtepu8_epi16(b) : _mm256_cvtepi8_epi16(b);
}

// R x C accumulators in registers (R * C + C + 1 <= 16 ymm): each 16-value block of a weight row is widened
// once and multiplied into every activation row with vpmaddwd (exact: pairs of 16-bit products into 32 bits).
template <int R, int C, bool WU>
void tile_avx2(const int16_t* a, int64_t K, const char* const* w, int64_t tot[4][4]) {
    const int64_t K16 = K / 16 * 16;
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) tot[r][c] = 0;
    for (int64_t k0 = 0; k0 < K16; k0 += kChunk) {
        const int64_t k1 = std::min(K16, k0 + kChunk);
        __m256i acc[R][C];
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
            for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_si256();
        for (int64_t k = k0; k < k1; k += 16) {
            __m256i wv[C];
#pragma GCC unroll 4
            for (int c = 0; c < C; ++c) wv[c] = widen<WU>(w[c] + k);
#pragma GCC unroll 4
            for (int r = 0; r < R; ++r) {
                const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + r * K + k));
#pragma GCC unroll 4
                for (int c = 0; c < C; ++c) acc[r][c] = _mm256_add_epi32(acc[r][c], _mm256_madd_epi16(x, wv[c]));
            }
        }
        for (int r = 0; r < R; ++r)
            for (int c = 0; c < C; ++c) tot[r][c] += hsum_epi32(acc[r][c]);
    }
    for (int r = 0; r < R; ++r)  // the last K % 16 values
        for (int c = 0; c < C; ++c)
            for (int64_t k = K16; k < K; ++k)
                tot[r][c] += int64_t(a[r * K + k]) * (WU ? int32_t(uint8_t(w[c][k])) : int32_t(int8_t(w[c][k])));
}

#pragma GCC pop_options
#endif

void store(const Int8GemmParams& p, const ggml_tensor* bias, ggml_tensor* dst, int64_t m, int64_t n, int64_t acc) {
    const size_t ns = p.scale.size() > 1 ? size_t(n) : 0;
    float y = float(acc) * p.scale[ns];
    if (bias) y = y + reinterpret_cast<const float*>(bias->data)[n];
    char* row = static_cast<char*>(dst->data) + m * dst->nb[1];
    if (!p.quantize_out) {
        reinterpret_cast<float*>(row)[n] = y;
        return;
    }
    const int32_t q = quantize_value(y, p.out_inv, p.out_zp, p.out_unsigned ? 0.0f : -128.0f,
                                     p.out_unsigned ? 255.0f : 127.0f);
    row[n] = p.out_unsigned ? char(uint8_t(q)) : char(int8_t(q));
}

using TileFn = void (*)(const int16_t*, int64_t, const char* const*, int64_t (*)[4]);

template <int R, int C>
TileFn pick_tile(bool avx2, bool wu) {
#ifdef DG_INT8_X86
    if (avx2) return wu ? tile_avx2<R, C, true> : tile_avx2<R, C, false>;
#endif
    (void)avx2;
    return wu ? [](const int16_t* a, int64_t K, const char* const* w, int64_t (*t)[4]) { tile_generic<R, C>(a, K, w, true, t); }
              : [](const int16_t* a, int64_t K, const char* const* w, int64_t (*t)[4]) { tile_generic<R, C>(a, K, w, false, t); };
}

// Tiles by the number of rows left: 4 x 2, else 3 x 3, 2 x 4, 1 x 4 (registers for R * C + C + 1 vectors).
struct Tiles {
    TileFn fn[5];
    int cols[5];
    Tiles(bool avx2, bool wu) {
        fn[1] = pick_tile<1, 4>(avx2, wu), cols[1] = 4;
        fn[2] = pick_tile<2, 4>(avx2, wu), cols[2] = 4;
        fn[3] = pick_tile<3, 3>(avx2, wu), cols[3] = 3;
        fn[4] = pick_tile<4, 2>(avx2, wu), cols[4] = 2;
        fn[0] = nullptr, cols[0] = 0;
    }
};

// Units of work: blocks of kRowBlock rows x kColBlock columns, column block by column block, so that a
// thread's consecutive units share their weights (read from cache); every thread widens all rows once.
void int8_kernel(ggml_tensor* dst, int ith, int nth, void* ud) {
    const auto& p = *static_cast<const Int8GemmParams*>(ud);
    const ggml_tensor* a = dst->src[0];
    const ggml_tensor* w = dst->src[1];
    const ggml_tensor* bias = dst->src[2];
    const int64_t K = a->ne[0], M = a->ne[1], N = w->ne[1];
    const int64_t mb = (M + kRowBlock - 1) / kRowBlock, nb = (N + kColBlock - 1) / kColBlock;
    const int64_t units = mb * nb, per = (units + nth - 1) / nth;
    const int64_t u0 = std::min(units, per * ith), u1 = std::min(units, u0 + per);
    if (u0 >= u1) return;
    static const Tiles tiles_by_isa[2][2] = {{Tiles(false, false), Tiles(false, true)}, {Tiles(true, false), Tiles(true, true)}};
    const Tiles& tiles = tiles_by_isa[kernel_isa() != Isa::generic][p.w_unsigned];
    thread_local Rows rows;
    widen_rows(rows, p, a, M, K);
    for (int64_t u = u0; u < u1; ++u) {
        const int64_t n0 = (u / mb) * kColBlock, n1 = std::min(N, n0 + kColBlock);
        const int64_t mr0 = (u % mb) * kRowBlock, mr1 = std::min(M, mr0 + kRowBlock);
        for (int64_t m0 = mr0; m0 < mr1; m0 += 4) {
            const int R = int(std::min<int64_t>(4, mr1 - m0));
            const int C = tiles.cols[R];
            for (int64_t n = n0; n < n1; n += C) {
                const char* wr[4];
                for (int c = 0; c < C; ++c)  // (past the last column: the last row again, its sums unused)
                    wr[c] = static_cast<const char*>(w->data) + std::min(n + c, N - 1) * w->nb[1];
                int64_t tot[4][4];
                tiles.fn[R](rows.a.data() + m0 * K, K, wr, tot);
                for (int r = 0; r < R; ++r)
                    for (int c = 0; c < C && n + c < n1; ++c) {
                        const size_t nz = p.w_zp.size() > 1 ? size_t(n + c) : 0;
                        const int64_t zw = p.w_zp.empty() ? 0 : p.w_zp[nz];
                        store(p, bias, dst, m0 + r, n + c, tot[r][c] - zw * rows.sum[size_t(m0 + r)]);
                    }
            }
        }
    }
}

}  // namespace

ggml_tensor* int8_matmul(ggml_context* ctx, ggml_tensor* a, ggml_tensor* w, ggml_tensor* bias, const Int8GemmParams* p) {
    if (a->type != GGML_TYPE_I8 || w->type != GGML_TYPE_I8 || a->ne[0] != w->ne[0] || a->ne[2] != 1 || a->ne[3] != 1 ||
        w->ne[2] != 1 || w->ne[3] != 1 || a->nb[0] != 1 || w->nb[0] != 1)
        fail<gg::Violation>("int8_matmul: a ", gg::describe(a), " and w ", gg::describe(w),
                            " must be dense I8 matrices of one row length");
    if (bias && (bias->type != GGML_TYPE_F32 || bias->ne[0] != w->ne[1] || ggml_nelements(bias) != w->ne[1] ||
                 !ggml_is_contiguous(bias)))
        fail<gg::Violation>("int8_matmul: bias ", gg::describe(bias), " must be F32 [", w->ne[1], "]");
    const size_t n = size_t(w->ne[1]);
    if (p->scale.empty() || (p->scale.size() > 1 && p->scale.size() != n) || (p->w_zp.size() > 1 && p->w_zp.size() != n))
        fail<gg::Violation>("int8_matmul: ", p->scale.size(), " scales and ", p->w_zp.size(), " zero points for ", n,
                            " columns");
    ggml_tensor* args[3] = {a, w, bias};
    return gg::custom_4d(ctx, p->quantize_out ? GGML_TYPE_I8 : GGML_TYPE_F32, w->ne[1], a->ne[1], 1, 1, args,
                         bias ? 3 : 2, int8_kernel, GGML_N_TASKS_MAX, const_cast<Int8GemmParams*>(p));
}

}  // namespace dg::kernels
