#include "int8_dot.h"

#include <algorithm>
#include <vector>

#include "isa.h"
#include "quantize.h"
#include "vector_clones.h"

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define DG_INT8_X86 1
#endif

namespace dg::kernels {

namespace {

// Products of a's and w's bytes are at most 255 * 128 in magnitude: int32 partial sums of this many
// products per row (in pairs per lane, then the lanes' total) cannot overflow (32768 * 255 * 128 < 2^31).
constexpr int64_t kChunk = 32768;

template <bool U>
inline int32_t byte(char b) { return U ? int32_t(uint8_t(b)) : int32_t(int8_t(b)); }

// -- generic: bytes as they are -------------------------------------------------------------------

// tot[r][c] = sum_k a[r][k] * w[c][k]: R activation rows (lda apart) by C weight rows. WU: w is u8, a s8.
template <int R, int C, bool WU>
void tile_generic(const char* a, int64_t lda, int64_t K, const char* const* w, int64_t tot[4][4]) {
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) {
            const char* ar = a + r * lda;
            int64_t total = 0;
            for (int64_t k0 = 0; k0 < K; k0 += kChunk) {
                const int64_t k1 = std::min(K, k0 + kChunk);
                int32_t s = 0;
                for (int64_t k = k0; k < k1; ++k) s += byte<!WU>(ar[k]) * byte<WU>(w[c][k]);
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

template <bool U>
inline __m256i widen(const char* p) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return U ? _mm256_cvtepu8_epi16(b) : _mm256_cvtepi8_epi16(b);
}

// -- AVX2: the activations widened to 16 bits once per call, weights per 16 values --------------------

// R x C accumulators in registers (R * C + C + 1 <= 16 ymm): each 16-value block of a weight row is widened
// once and multiplied into every activation row with vpmaddwd (exact: pairs of 16-bit products into 32 bits).
// a: 16-bit rows, K apart.
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
            for (int64_t k = K16; k < K; ++k) tot[r][c] += int64_t(a[r * K + k]) * byte<WU>(w[c][k]);
}

#pragma GCC pop_options

// -- AVX-512 VNNI: bytes as they are, 64 per instruction ---------------------------------------------

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vnni,bmi2")

// Every product is at most 255 * 128 in magnitude: the int32 lanes of a chunk of this many bytes per row,
// and their total, stay exact (65536 * 255 * 128 < 2^31).
constexpr int64_t kVnniChunk = 65536;

// The totals of 16 vectors of int32 lanes, in one vector (lane i: the total of v[i]), by a tree of
// interleaving adds (45 instructions, against about 8 per vector reduced alone).
inline __m512i reduce16(const __m512i v[16]) {
    __m512i s[8], t[4];
    for (int i = 0; i < 8; ++i)  // per 128-bit lane: (a, b, a, b) partials of v[2i], v[2i + 1]
        s[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2 * i], v[2 * i + 1]),
                                _mm512_unpackhi_epi32(v[2 * i], v[2 * i + 1]));
    for (int i = 0; i < 4; ++i)  // per 128-bit lane: partials of v[4i .. 4i + 3]
        t[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(s[2 * i], s[2 * i + 1]),
                                _mm512_unpackhi_epi64(s[2 * i], s[2 * i + 1]));
    const __m512i w01 = _mm512_add_epi32(_mm512_shuffle_i32x4(t[0], t[1], 0x88), _mm512_shuffle_i32x4(t[0], t[1], 0xdd));
    const __m512i w23 = _mm512_add_epi32(_mm512_shuffle_i32x4(t[2], t[3], 0x88), _mm512_shuffle_i32x4(t[2], t[3], 0xdd));
    return _mm512_add_epi32(_mm512_shuffle_i32x4(w01, w23, 0x88), _mm512_shuffle_i32x4(w01, w23, 0xdd));
}

// R x 4 accumulators (R * 4 + 4 + 1 <= 32 zmm); the last K % 64 bytes through masked (zero-filling) loads.
template <int R, bool WU>
void tile_vnni(const char* a, int64_t lda, int64_t K, const char* const* w, int64_t tot[4][4]) {
    constexpr int C = 4;
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) tot[r][c] = 0;
    for (int64_t k0 = 0; k0 < K; k0 += kVnniChunk) {
        const int64_t k1 = std::min(K, k0 + kVnniChunk);
        __m512i acc[16];
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_si512();
        for (int64_t k = k0; k < k1; k += 64) {
            const __mmask64 m = k1 - k >= 64 ? ~__mmask64(0) : __mmask64(_bzhi_u64(~0ULL, unsigned(k1 - k)));
            __m512i wv[C];
#pragma GCC unroll 4
            for (int c = 0; c < C; ++c) wv[c] = _mm512_maskz_loadu_epi8(m, w[c] + k);
#pragma GCC unroll 4
            for (int r = 0; r < R; ++r) {
                const __m512i x = _mm512_maskz_loadu_epi8(m, a + r * lda + k);
#pragma GCC unroll 4
                for (int c = 0; c < C; ++c)  // (the u8 operand first)
                    acc[r * C + c] = WU ? _mm512_dpbusd_epi32(acc[r * C + c], wv[c], x)
                                        : _mm512_dpbusd_epi32(acc[r * C + c], x, wv[c]);
            }
        }
        alignas(64) int32_t sums[16];
        _mm512_store_si512(sums, reduce16(acc));
        for (int r = 0; r < R; ++r)
            for (int c = 0; c < C; ++c) tot[r][c] += sums[r * C + c];
    }
}

#pragma GCC pop_options
#endif

enum class Path { generic, avx2, vnni };

Path pick_path() {
#ifdef DG_INT8_X86
    const Isa isa = kernel_isa();
    // (the avx512vnni level has AVX-512BW and VNNI; at the avx512 level the 8-bit products run their AVX2
    // variant, as the quantized-weight products do: isa.h)
    if (isa >= Isa::avx512vnni && __builtin_cpu_supports("bmi2")) return Path::vnni;
    if (isa != Isa::generic) return Path::avx2;
#endif
    return Path::generic;
}

// The kernels on bytes (generic, VNNI), by the number of rows left: R x 4 (the 4 x 4 tile keeps 16 zmm
// accumulators) or R x 2..4 generic.
using ByteTile = void (*)(const char*, int64_t, int64_t, const char* const*, int64_t (*)[4]);
using WideTile = void (*)(const int16_t*, int64_t, const char* const*, int64_t (*)[4]);

struct Kernels {
    Path path;
    ByteTile bytes[5] = {};
    WideTile wide[5] = {};
    int cols[5] = {};

    template <bool WU>
    static Kernels make(Path path) {
        Kernels k;
        k.path = path;
#ifdef DG_INT8_X86
        if (path == Path::vnni) {
            k.bytes[1] = tile_vnni<1, WU>, k.bytes[2] = tile_vnni<2, WU>;
            k.bytes[3] = tile_vnni<3, WU>, k.bytes[4] = tile_vnni<4, WU>;
            for (int r = 1; r <= 4; ++r) k.cols[r] = 4;
            return k;
        }
        if (path == Path::avx2) {  // 4 x 2, else 3 x 3, 2 x 4, 1 x 4 (registers for R * C + C + 1 ymm)
            k.wide[1] = tile_avx2<1, 4, WU>, k.cols[1] = 4;
            k.wide[2] = tile_avx2<2, 4, WU>, k.cols[2] = 4;
            k.wide[3] = tile_avx2<3, 3, WU>, k.cols[3] = 3;
            k.wide[4] = tile_avx2<4, 2, WU>, k.cols[4] = 2;
            return k;
        }
#endif
        k.bytes[1] = tile_generic<1, 4, WU>, k.bytes[2] = tile_generic<2, 4, WU>;
        k.bytes[3] = tile_generic<3, 3, WU>, k.bytes[4] = tile_generic<4, 2, WU>;
        k.cols[1] = 4, k.cols[2] = 4, k.cols[3] = 3, k.cols[4] = 2;
        return k;
    }
};

}  // namespace

void int8_dot(const char* a, int64_t lda, int64_t M, int64_t K, const char* w, int64_t ldw, int64_t N, bool w_unsigned,
              int64_t* tot, int64_t ldt) {
    static const Path path = pick_path();
    static const Kernels by_sign[2] = {Kernels::make<false>(path), Kernels::make<true>(path)};
    const Kernels& ks = by_sign[w_unsigned];
    thread_local std::vector<int16_t> wide;
    if (ks.path == Path::avx2) {  // the activations as 16-bit rows, K apart
        wide.resize(size_t(M * K));
        for (int64_t m = 0; m < M; ++m) {
            const char* row = a + m * lda;
            int16_t* d = wide.data() + m * K;
            if (w_unsigned)
                for (int64_t k = 0; k < K; ++k) d[k] = int16_t(int8_t(row[k]));
            else
                for (int64_t k = 0; k < K; ++k) d[k] = int16_t(uint8_t(row[k]));
        }
    }
    for (int64_t m0 = 0; m0 < M; m0 += 4) {
        const int R = int(std::min<int64_t>(4, M - m0));
        const int C = ks.cols[R];
        for (int64_t n = 0; n < N; n += C) {
            const char* wr[4];
            for (int c = 0; c < C; ++c)  // (past the last row: the last row again, its sums unused)
                wr[c] = w + std::min(n + c, N - 1) * ldw;
            int64_t t[4][4];
            if (ks.path == Path::avx2) ks.wide[R](wide.data() + m0 * K, K, wr, t);
            else ks.bytes[R](a + m0 * lda, lda, K, wr, t);
            for (int r = 0; r < R; ++r)
                for (int c = 0; c < C && n + c < N; ++c) tot[(m0 + r) * ldt + n + c] = t[r][c];
        }
    }
}

void int8_correct_row(const Int8Params& p, const Int8Act& act, int64_t K, int64_t row_sum, const int64_t* col_sum,
                      int64_t n0, int64_t n, int64_t* acc) {
    if (!p.w_zp.empty()) {
        const int64_t r = row_sum - K * act.zp;
        if (p.w_zp.size() > 1)
            for (int64_t j = 0; j < n; ++j) acc[j] -= int64_t(p.w_zp[size_t(n0 + j)]) * r;
        else
            for (int64_t j = 0; j < n; ++j) acc[j] -= int64_t(p.w_zp[0]) * r;
    }
    if (act.zp != 0)
        for (int64_t j = 0; j < n; ++j) acc[j] -= int64_t(act.zp) * col_sum[j];
}

void int8_correct_column(const Int8Params& p, const Int8Act& act, int64_t K, const int64_t* row_sum, int64_t col_sum,
                         int64_t c, int64_t n, int64_t* acc) {
    const int64_t zw = p.w_zp.empty() ? 0 : p.w_zp[p.w_zp.size() > 1 ? size_t(c) : 0];
    const int64_t base = zw * K * act.zp - int64_t(act.zp) * col_sum;
    if (zw != 0)
        for (int64_t j = 0; j < n; ++j) acc[j] += base - zw * row_sum[j];
    else
        for (int64_t j = 0; j < n; ++j) acc[j] += base;
}

namespace {

// The epilogue of up to kPiece outputs: y = f32(acc) * scale (+ bias), per output (PerOut: scale[j], bias[j])
// or one scale and bias for all; then stored, or quantized and stored, at out[j * stride].
constexpr int64_t kPiece = 64;

template <bool PerOut>
inline void finish_piece(const Int8Params& p, const float* scale, const float* bias, int64_t m, const int64_t* a,
                         void* out, int64_t stride) {
    float y[kPiece];
    if (PerOut)
        for (int64_t j = 0; j < m; ++j) y[j] = float(a[j]) * scale[j];
    else
        for (int64_t j = 0; j < m; ++j) y[j] = float(a[j]) * scale[0];
    if (bias) {
        if (PerOut)
            for (int64_t j = 0; j < m; ++j) y[j] = y[j] + bias[j];
        else
            for (int64_t j = 0; j < m; ++j) y[j] = y[j] + bias[0];
    }
    if (!p.quantize_out) {
        float* o = static_cast<float*>(out);
        if (stride == 1)
            for (int64_t j = 0; j < m; ++j) o[j] = y[j];
        else
            for (int64_t j = 0; j < m; ++j) o[j * stride] = y[j];
        return;
    }
    const float lo = p.out_unsigned ? 0.0f : -128.0f, hi = p.out_unsigned ? 255.0f : 127.0f;
    int32_t q[kPiece];
    for (int64_t j = 0; j < m; ++j) q[j] = quantize_value(y[j], p.out_inv, p.out_zp, lo, hi);
    char* o = static_cast<char*>(out);
    if (stride == 1)
        for (int64_t j = 0; j < m; ++j) o[j] = char(q[j]);
    else
        for (int64_t j = 0; j < m; ++j) o[j * stride] = char(q[j]);
}

inline void* element(const Int8Params& p, void* out, int64_t i) {
    return p.quantize_out ? static_cast<void*>(static_cast<char*>(out) + i) : static_cast<void*>(static_cast<float*>(out) + i);
}

}  // namespace

// (this file is compiled with -ffp-contract=off: each product and sum rounds once, in every variant)
DG_VECTOR_BODY void int8_finish_row_body(const Int8Params& p, const float* bias, int64_t n0, int64_t n,
                                         const int64_t* acc, void* out, int64_t i0, int64_t stride) {
    const bool per_column = p.scale.size() > 1;
    for (int64_t j0 = 0; j0 < n; j0 += kPiece) {
        const int64_t m = std::min(kPiece, n - j0), c0 = n0 + j0;
        const float* b = bias ? bias + c0 : nullptr;
        void* o = element(p, out, i0 + j0 * stride);
        if (per_column) finish_piece<true>(p, p.scale.data() + c0, b, m, acc + j0, o, stride);
        else if (b) {  // one scale, a bias per column
            float s[kPiece];
            std::fill(s, s + m, p.scale[0]);
            finish_piece<true>(p, s, b, m, acc + j0, o, stride);
        } else
            finish_piece<false>(p, p.scale.data(), nullptr, m, acc + j0, o, stride);
    }
}
DG_VECTORIZED(void, int8_finish_row, (const Int8Params& p, const float* bias, int64_t n0, int64_t n,
                                      const int64_t* acc, void* out, int64_t i0, int64_t stride),
              (p, bias, n0, n, acc, out, i0, stride))

DG_VECTOR_BODY void int8_finish_column_body(const Int8Params& p, const float* bias, int64_t c, int64_t n,
                                            const int64_t* acc, void* out, int64_t i0) {
    const float* scale = p.scale.data() + (p.scale.size() > 1 ? c : 0);
    for (int64_t j0 = 0; j0 < n; j0 += kPiece)
        finish_piece<false>(p, scale, bias ? bias + c : nullptr, std::min(kPiece, n - j0), acc + j0,
                            element(p, out, i0 + j0), 1);
}
DG_VECTORIZED(void, int8_finish_column, (const Int8Params& p, const float* bias, int64_t c, int64_t n,
                                         const int64_t* acc, void* out, int64_t i0),
              (p, bias, c, n, acc, out, i0))

int64_t int8_sum(const char* v, int64_t n, bool is_unsigned) {
    int64_t s = 0;
    if (is_unsigned)
        for (int64_t i = 0; i < n; ++i) s += uint8_t(v[i]);
    else
        for (int64_t i = 0; i < n; ++i) s += int8_t(v[i]);
    return s;
}

}  // namespace dg::kernels
