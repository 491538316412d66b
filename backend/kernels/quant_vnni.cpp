#include "quant_vnni.h"

#include <algorithm>
#include <vector>

#include "quant_act_vnni.h"
#include "quant_blocks.h"

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define DG_QUANT_VNNI_X86 1
#endif

namespace dg::kernels::vnni {

#ifdef DG_QUANT_VNNI_X86

namespace {

// 1-7 rows (weights from memory, each read once): the weights this many bytes ahead are prefetched
constexpr size_t kPrefetchBytes = 8192;
// 8+ rows: weight rows per chunk, every tile of activation rows passing over a chunk while it is in L2
constexpr int64_t kChunkRows = 64;
constexpr int kTileRows = 8;     // activation rows per tile (8+ rows)
constexpr int kTileWeights = 2;  // weight rows per tile

template <ggml_type T>
constexpr int block_bytes() {
    return T == GGML_TYPE_Q8_0 ? int(sizeof(BlockQ8_0)) : T == GGML_TYPE_Q4_0 ? int(sizeof(BlockQ4_0)) : int(sizeof(BlockQ4_1));
}

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi,avx2,fma,f16c")
#include "lane_sums_avx512.inc"

inline __mmask64 first_bytes(int n) { return n >= 64 ? ~__mmask64(0) : n <= 0 ? 0 : (__mmask64(1) << n) - 1; }

// A group of 4 weight blocks as vpdpbusd's unsigned operand: lo = the first 16
// values of each block (bytes 16 b..16 b + 15), hi = the last 16; d[l] (and
// for q4_1 m[l]) the scale (and minimum) of block l / 4.
struct WGroup {
    __m512i lo, hi;
    __m512 d, m;
};

// The permutes' indices: byte 16 b + i <- the block's value i; word 4 b + r <- block b's d (or m).
template <ggml_type T>
inline __m512i value_index() {
    constexpr int bs = block_bytes<T>(), off = T == GGML_TYPE_Q4_1 ? 4 : 2;
    alignas(64) static const auto idx = [] {
        struct { int8_t v[64]; } t{};
        for (int b = 0; b < 4; ++b)
            for (int i = 0; i < 16; ++i) t.v[16 * b + i] = int8_t(bs * b + off + i);
        return t;
    }();
    return _mm512_load_si512(&idx);
}

template <ggml_type T>
inline __m512i word_index(int field_offset) {  // field_offset: 0 for d, 2 for m (q4_1)
    constexpr int bs = block_bytes<T>();
    alignas(64) static const auto idx = [] {
        struct { int16_t v[2][32]; } t{};
        for (int f = 0; f < 2; ++f)
            for (int b = 0; b < 4; ++b)
                for (int r = 0; r < 4; ++r) t.v[f][4 * b + r] = int16_t((bs * b + 2 * f) / 2);
        return t;
    }();
    return _mm512_load_si512(idx.v[field_offset / 2]);
}

// `nv` (1..4) blocks of a row from p; the blocks past nv are zeros. Nothing is read past the nv blocks.
template <ggml_type T, bool Full>
inline WGroup load_group(const char* p, int nv) {
    constexpr int bs = block_bytes<T>();
    const int bytes = Full ? 4 * bs : nv * bs;
    const __m512i vidx = value_index<T>();
    WGroup w;
    if constexpr (T == GGML_TYPE_Q8_0) {
        // first halves from the window [p, p + 128), second halves from [p + 16, p + 144): the same index
        const __m512i l0 = Full ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi8(first_bytes(bytes), p);
        const __m512i l1 = _mm512_maskz_loadu_epi8(first_bytes(bytes - 64), p + 64);
        const __m512i h0 = Full ? _mm512_loadu_si512(p + 16) : _mm512_maskz_loadu_epi8(first_bytes(bytes - 16), p + 16);
        const __m512i h1 = _mm512_maskz_loadu_epi8(first_bytes(bytes - 80), p + 80);
        const __m512i bias = _mm512_set1_epi8(char(0x80));  // w + 128 as an unsigned byte
        w.lo = _mm512_xor_si512(_mm512_permutex2var_epi8(l0, vidx, l1), bias);
        w.hi = _mm512_xor_si512(_mm512_permutex2var_epi8(h0, vidx, h1), bias);
        w.d = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutex2var_epi16(l0, word_index<T>(0), l1)));
        w.m = _mm512_setzero_ps();
    } else {
        const __m512i z0 = Full ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi8(first_bytes(bytes), p);
        const __m512i z1 = _mm512_maskz_loadu_epi8(first_bytes(bytes - 64), p + 64);
        const __m512i n = _mm512_permutex2var_epi8(z0, vidx, z1);
        const __m512i mask = _mm512_set1_epi8(0x0F);
        w.lo = _mm512_and_si512(n, mask);
        w.hi = _mm512_and_si512(_mm512_srli_epi16(n, 4), mask);
        w.d = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(word_index<T>(0), z0)));
        w.m = T == GGML_TYPE_Q4_1
                  ? _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(word_index<T>(2), z0)))
                  : _mm512_setzero_ps();
    }
    return w;
}

// C[MR, NR] (ldc apart) = MR activation rows (act, rows ng groups apart) times
// NR weight rows (W, ldw bytes apart) over ng groups, the last holding nv_last blocks.
template <ggml_type T, int MR, int NR>
void tile(int64_t ng, int nv_last, const ActGroup* act, const char* W, size_t ldw, float* C, int64_t ldc) {
    constexpr size_t group_bytes = size_t(kGroupBlocks) * block_bytes<T>();
    __m512 acc[MR][NR];
    for (int m = 0; m < MR; ++m)
        for (int j = 0; j < NR; ++j) acc[m][j] = _mm512_setzero_ps();
    for (int64_t g = 0; g < ng; ++g) {
        WGroup w[NR];
        const char* p = W + size_t(g) * group_bytes;
        if (g + 1 < ng || nv_last == kGroupBlocks) {
            for (int j = 0; j < NR; ++j) w[j] = load_group<T, true>(p + j * ldw, kGroupBlocks);
        } else {
            for (int j = 0; j < NR; ++j) w[j] = load_group<T, false>(p + j * ldw, nv_last);
        }
        for (int m = 0; m < MR; ++m) {
            const ActGroup& a = act[m * ng + g];
            const __m512i a0 = _mm512_load_si512(a.q), a1 = _mm512_load_si512(a.q + 64);
            const __m512 da = _mm512_load_ps(a.d);
            const __m512i start = T == GGML_TYPE_Q4_1 ? _mm512_setzero_si512() : _mm512_load_si512(a.corr);
            for (int j = 0; j < NR; ++j) {
                const __m512i s = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(start, w[j].lo, a0), w[j].hi, a1);
                acc[m][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(w[j].d, da), acc[m][j]);
                if constexpr (T == GGML_TYPE_Q4_1) acc[m][j] = _mm512_fmadd_ps(w[j].m, _mm512_load_ps(a.s), acc[m][j]);
            }
        }
    }
    store_sums<MR, NR>(acc, C, ldc);
}

template <ggml_type T, int MR>
void rows_kernel(int64_t N, int64_t ng, int nv_last, const ActGroup* act, const char* W, size_t ldw, float* C,
                 int64_t ldc) {
    constexpr int NR = MR <= 4 ? 2 : 1;
    const char* end = W + size_t(N) * ldw;
    int64_t n = 0;
    for (; n + NR <= N; n += NR) {
        const char* ahead = W + size_t(n) * ldw + kPrefetchBytes;
        for (size_t l = 0; l < NR * ldw && ahead + l < end; l += 64) _mm_prefetch(ahead + l, _MM_HINT_T0);
        tile<T, MR, NR>(ng, nv_last, act, W + size_t(n) * ldw, ldw, C + n, ldc);
    }
    for (; n < N; ++n) tile<T, MR, 1>(ng, nv_last, act, W + size_t(n) * ldw, ldw, C + n, ldc);
}

template <ggml_type T>
void rows_of_type(int rows, int64_t N, int64_t ng, int nv_last, const ActGroup* act, const char* W, size_t ldw,
                  float* C, int64_t ldc) {
    switch (rows) {
        case 1: return rows_kernel<T, 1>(N, ng, nv_last, act, W, ldw, C, ldc);
        case 2: return rows_kernel<T, 2>(N, ng, nv_last, act, W, ldw, C, ldc);
        case 3: return rows_kernel<T, 3>(N, ng, nv_last, act, W, ldw, C, ldc);
        case 4: return rows_kernel<T, 4>(N, ng, nv_last, act, W, ldw, C, ldc);
        case 5: return rows_kernel<T, 5>(N, ng, nv_last, act, W, ldw, C, ldc);
        case 6: return rows_kernel<T, 6>(N, ng, nv_last, act, W, ldw, C, ldc);
        default: return rows_kernel<T, 7>(N, ng, nv_last, act, W, ldw, C, ldc);
    }
}

// M rows (at most kTileRows) times NR weight rows: one tile of the right height
template <ggml_type T, int NR, int R = kTileRows>
inline void tiles_of_rows(int64_t M, int64_t ng, int nv_last, const ActGroup* act, const char* W, size_t ldw, float* C,
                          int64_t ldc) {
    if constexpr (R > 0) {
        if (M == R) return tile<T, R, NR>(ng, nv_last, act, W, ldw, C, ldc);
        tiles_of_rows<T, NR, R - 1>(M, ng, nv_last, act, W, ldw, C, ldc);
    }
}

template <ggml_type T>
void gemm(int64_t M, int64_t N, int64_t ng, int nv_last, const ActGroup* act, const char* W, size_t ldw, float* C,
          int64_t ldc) {
    for (int64_t c = 0; c < N; c += kChunkRows) {
        const int64_t nc = std::min(kChunkRows, N - c);
        const char* Wc = W + size_t(c) * ldw;
        // the chunk's weights come from memory for the first tile of rows, from L2 for the others
        for (int64_t m = 0; m < M; m += kTileRows) {
            const int64_t mr = std::min<int64_t>(kTileRows, M - m);
            int64_t n = 0;
            for (; n + kTileWeights <= nc; n += kTileWeights)
                tiles_of_rows<T, kTileWeights>(mr, ng, nv_last, act + m * ng, Wc + size_t(n) * ldw, ldw,
                                               C + m * ldc + c + n, ldc);
            for (; n < nc; ++n)
                tiles_of_rows<T, 1>(mr, ng, nv_last, act + m * ng, Wc + size_t(n) * ldw, ldw, C + m * ldc + c + n, ldc);
        }
    }
}

#pragma GCC pop_options

const ActGroup* quantize_rows(ggml_type type, int64_t M, int64_t K, const float* A, int64_t lda, int64_t& ng,
                              int& nv_last) {
    const int64_t nb = K / kQuantBlock;
    ng = (nb + kGroupBlocks - 1) / kGroupBlocks;
    nv_last = int(nb - (ng - 1) * kGroupBlocks);
    thread_local std::vector<ActGroup> act;  // grows to the largest M * ng seen by this thread
    if (act.size() < size_t(M * ng)) act.resize(size_t(M * ng));
    for (int64_t m = 0; m < M; ++m) quantize_act_groups(A + m * lda, nb, type, act.data() + m * ng);
    return act.data();
}

}  // namespace

void quant_rows_nt(ggml_type type, int rows, int64_t N, int64_t K, const float* A, int64_t lda, const char* W,
                   size_t ldw, float* C, int64_t ldc) {
    int64_t ng;
    int nv;
    const ActGroup* act = quantize_rows(type, rows, K, A, lda, ng, nv);
    if (type == GGML_TYPE_Q8_0) return rows_of_type<GGML_TYPE_Q8_0>(rows, N, ng, nv, act, W, ldw, C, ldc);
    if (type == GGML_TYPE_Q4_0) return rows_of_type<GGML_TYPE_Q4_0>(rows, N, ng, nv, act, W, ldw, C, ldc);
    rows_of_type<GGML_TYPE_Q4_1>(rows, N, ng, nv, act, W, ldw, C, ldc);
}

void quant_gemm_nt(ggml_type type, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const char* W,
                   size_t ldw, float* C, int64_t ldc) {
    int64_t ng;
    int nv;
    const ActGroup* act = quantize_rows(type, M, K, A, lda, ng, nv);
    if (type == GGML_TYPE_Q8_0) return gemm<GGML_TYPE_Q8_0>(M, N, ng, nv, act, W, ldw, C, ldc);
    if (type == GGML_TYPE_Q4_0) return gemm<GGML_TYPE_Q4_0>(M, N, ng, nv, act, W, ldw, C, ldc);
    gemm<GGML_TYPE_Q4_1>(M, N, ng, nv, act, W, ldw, C, ldc);
}

#else  // not x86-64: never chosen (isa.h)

void quant_rows_nt(ggml_type, int, int64_t, int64_t, const float*, int64_t, const char*, size_t, float*, int64_t) {}

void quant_gemm_nt(ggml_type, int64_t, int64_t, int64_t, const float*, int64_t, const char*, size_t, float*, int64_t) {}

#endif

}  // namespace dg::kernels::vnni
