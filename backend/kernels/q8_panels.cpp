#include "q8_panels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "ggml.h"
#include "isa.h"
#include "quant_act.h"
#include "quant_blocks.h"

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define DG_Q8_PANELS_X86 1
#endif

namespace dg::kernels {

namespace {

constexpr int64_t kW = kQ8PanelWidth;
constexpr int kGroups = kQuantBlock / 4;  // groups of 4 values a block

// Byte offsets in a block of a panel `w` rows wide: the scales first, then the groups.
inline size_t block_bytes(int64_t w) { return size_t(w) * sizeof(BlockQ8_0); }
inline size_t group_offset(int64_t w, int q) { return size_t(w) * (2 + 4 * size_t(q)); }

}  // namespace

void pack_q8_panels(int64_t N, int64_t nb, const uint8_t* W, uint8_t* P) {
    const size_t row_bytes = size_t(nb) * sizeof(BlockQ8_0);
    for (int64_t p0 = 0; p0 < N; p0 += kW) {
        const int64_t w = std::min(kW, N - p0);
        uint8_t* panel = P + size_t(p0) * row_bytes;
        for (int64_t j = 0; j < w; ++j) {
            const uint8_t* row = W + size_t(p0 + j) * row_bytes;
            for (int64_t b = 0; b < nb; ++b) {
                BlockQ8_0 blk;
                std::memcpy(&blk, row + size_t(b) * sizeof(BlockQ8_0), sizeof blk);
                uint8_t* out = panel + size_t(b) * block_bytes(w);
                std::memcpy(out + 2 * j, &blk.d, 2);
                for (int q = 0; q < kGroups; ++q)
                    for (int i = 0; i < 4; ++i)
                        out[group_offset(w, q) + 4 * size_t(j) + i] = uint8_t(blk.qs[4 * q + i]) ^ 0x80;
            }
        }
    }
}

void unpack_q8_panels(int64_t N, int64_t nb, const uint8_t* P, uint8_t* W) {
    const size_t row_bytes = size_t(nb) * sizeof(BlockQ8_0);
    for (int64_t p0 = 0; p0 < N; p0 += kW) {
        const int64_t w = std::min(kW, N - p0);
        const uint8_t* panel = P + size_t(p0) * row_bytes;
        for (int64_t j = 0; j < w; ++j) {
            uint8_t* row = W + size_t(p0 + j) * row_bytes;
            for (int64_t b = 0; b < nb; ++b) {
                const uint8_t* in = panel + size_t(b) * block_bytes(w);
                BlockQ8_0 blk;
                std::memcpy(&blk.d, in + 2 * j, 2);
                for (int q = 0; q < kGroups; ++q)
                    for (int i = 0; i < 4; ++i)
                        blk.qs[4 * q + i] = int8_t(in[group_offset(w, q) + 4 * size_t(j) + i] ^ 0x80);
                std::memcpy(row + size_t(b) * sizeof(BlockQ8_0), &blk, sizeof blk);
            }
        }
    }
}

namespace {

// An activation row's block rounded to 8 bits (quant_act.h), and -128 times the sum of its
// values: what the weights' offset of 128 adds to the block's integer sum.
struct RowBlocks {
    std::vector<ActBlock> blocks;
    std::vector<int32_t> corr;
};

// quant_act.h's rounding, in portable code (the same f32 operations: the same blocks)
void round_row_portable(const float* x, int64_t nb, ActBlock* out) {
    for (int64_t b = 0; b < nb; ++b, x += kQuantBlock) {
        float amax = 0.0f;
        bool finite = true;
        for (int i = 0; i < kQuantBlock; ++i) {
            finite = finite && std::isfinite(x[i]);
            amax = std::max(amax, std::fabs(x[i]));
        }
        finite = finite && amax <= 3.4e38f;
        const float d = finite ? amax / 127.0f : NAN;
        const float id = finite && amax > 0.0f ? 127.0f / amax : 0.0f;
        int32_t sum = 0;
        for (int i = 0; i < kQuantBlock; ++i) {
            // nearest, ties to even (the default rounding mode), clamped as the vector packs saturate
            const float r = std::nearbyint(x[i] * id);
            const int32_t q = std::isnan(r) ? 0 : int32_t(std::min(127.0f, std::max(-128.0f, r)));
            out[b].qs[i] = int8_t(q);
            sum += q;
        }
        out[b].d = d;
        out[b].s = d * float(sum);
    }
}

const RowBlocks& round_rows(int64_t M, int64_t K, const float* A, int64_t lda) {
    const int64_t nb = K / kQuantBlock;
    thread_local RowBlocks rows;  // grows to the largest M * nb seen by this thread
    if (rows.blocks.size() < size_t(M * nb)) {
        rows.blocks.resize(size_t(M * nb));
        rows.corr.resize(size_t(M * nb));
    }
    for (int64_t m = 0; m < M; ++m) {
        ActBlock* out = rows.blocks.data() + m * nb;
        if (kernel_isa() != Isa::generic) quantize_act_row(A + m * lda, nb, out);
        else round_row_portable(A + m * lda, nb, out);
        for (int64_t b = 0; b < nb; ++b) {
            int32_t sum = 0;
            for (int i = 0; i < kQuantBlock; ++i) sum += out[b].qs[i];
            rows.corr[size_t(m * nb + b)] = -128 * sum;
        }
    }
    return rows;
}

// One panel (w rows wide) for every row: the integer sum of each block, then its scales.
void panel_portable(int64_t M, int64_t nb, const RowBlocks& act, const uint8_t* panel, int64_t w, int64_t cols,
                    float* C, int64_t ldc) {
    for (int64_t m = 0; m < M; ++m) {
        float acc[kW] = {};
        for (int64_t b = 0; b < nb; ++b) {
            const ActBlock& a = act.blocks[size_t(m * nb + b)];
            const uint8_t* blk = panel + size_t(b) * block_bytes(w);
            for (int64_t j = 0; j < w; ++j) {
                int32_t s = act.corr[size_t(m * nb + b)];
                for (int q = 0; q < kGroups; ++q)
                    for (int i = 0; i < 4; ++i) s += int32_t(blk[group_offset(w, q) + 4 * size_t(j) + i]) * a.qs[4 * q + i];
                uint16_t h;
                std::memcpy(&h, blk + 2 * j, 2);
                acc[j] = std::fma(float(s), ggml_fp16_to_fp32(h) * a.d, acc[j]);
            }
        }
        std::copy(acc, acc + cols, C + m * ldc);
    }
}

#ifdef DG_Q8_PANELS_X86

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")

constexpr int kTileRows = 6;  // 12 sums and 12 accumulators of 32 registers

// (the maskz forms: the plain ones' undefined first operand draws -Wmaybe-uninitialized from GCC 12)
inline __m512 cvtph(__m256i h) { return _mm512_maskz_cvtph_ps(__mmask16(0xFFFF), h); }
inline __m512 cvtepi32(__m512i v) { return _mm512_maskz_cvtepi32_ps(__mmask16(0xFFFF), v); }

inline __mmask16 lanes(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1); }

// C[MR rows, w] += one panel times MR activation rows (act, corr: rows nb apart). Full: w = 32.
// With one row the sums of each half alternate between two registers (vpdpbusd's latency).
template <int MR, bool Full>
void tile(int64_t nb, const ActBlock* act, const int32_t* corr, const uint8_t* panel, int64_t w, float* C,
          int64_t ldc) {
    constexpr int CH = MR == 1 ? 2 : 1;
    const int64_t width = Full ? kW : w;
    const size_t bs = block_bytes(width), g0 = group_offset(width, 0), gs = 4 * size_t(width);
    const __mmask16 lo = Full ? __mmask16(0xFFFF) : lanes(w), hi = Full ? __mmask16(0xFFFF) : lanes(w - 16);
    __m512 f[MR][2];
    for (int m = 0; m < MR; ++m) f[m][0] = f[m][1] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* blk = panel + size_t(b) * bs;
        __m512i s[MR][2][CH];
        for (int m = 0; m < MR; ++m) {
            const __m512i c = _mm512_set1_epi32(corr[m * nb + b]);
            for (int h = 0; h < 2; ++h) {
                s[m][h][0] = c;
                if constexpr (CH == 2) s[m][h][CH - 1] = _mm512_setzero_si512();
            }
        }
#pragma GCC unroll 8
        for (int q = 0; q < kGroups; ++q) {
            const uint8_t* g = blk + g0 + q * gs;
            const __m512i w0 = Full ? _mm512_loadu_si512(g) : _mm512_maskz_loadu_epi32(lo, g);
            const __m512i w1 = Full ? _mm512_loadu_si512(g + 64) : _mm512_maskz_loadu_epi32(hi, g + 64);
            for (int m = 0; m < MR; ++m) {
                int32_t a4;
                std::memcpy(&a4, act[m * nb + b].qs + 4 * q, 4);
                const __m512i a = _mm512_set1_epi32(a4);
                s[m][0][q % CH] = _mm512_dpbusd_epi32(s[m][0][q % CH], w0, a);
                s[m][1][q % CH] = _mm512_dpbusd_epi32(s[m][1][q % CH], w1, a);
            }
        }
        const __m512 d0 = cvtph(Full ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk))
                                               : _mm256_maskz_loadu_epi16(lo, blk));
        const __m512 d1 = cvtph(Full ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 32))
                                               : _mm256_maskz_loadu_epi16(hi, blk + 32));
        for (int m = 0; m < MR; ++m) {
            const __m512 da = _mm512_set1_ps(act[m * nb + b].d);
            __m512i s0 = s[m][0][0], s1 = s[m][1][0];
            if constexpr (CH == 2) {
                s0 = _mm512_add_epi32(s0, s[m][0][1]);
                s1 = _mm512_add_epi32(s1, s[m][1][1]);
            }
            f[m][0] = _mm512_fmadd_ps(cvtepi32(s0), _mm512_mul_ps(d0, da), f[m][0]);
            f[m][1] = _mm512_fmadd_ps(cvtepi32(s1), _mm512_mul_ps(d1, da), f[m][1]);
        }
    }
    for (int m = 0; m < MR; ++m) {
        _mm512_mask_storeu_ps(C + m * ldc, lo, f[m][0]);
        _mm512_mask_storeu_ps(C + m * ldc + 16, hi, f[m][1]);
    }
}

template <bool Full>
void rows_of_panel(int64_t M, int64_t nb, const RowBlocks& act, const uint8_t* panel, int64_t w, float* C,
                   int64_t ldc) {
    const ActBlock* a = act.blocks.data();
    const int32_t* c = act.corr.data();
    int64_t m = 0;
    for (; m + kTileRows <= M; m += kTileRows)
        tile<kTileRows, Full>(nb, a + m * nb, c + m * nb, panel, w, C + m * ldc, ldc);
    switch (M - m) {
        case 1: return tile<1, Full>(nb, a + m * nb, c + m * nb, panel, w, C + m * ldc, ldc);
        case 2: return tile<2, Full>(nb, a + m * nb, c + m * nb, panel, w, C + m * ldc, ldc);
        case 3: return tile<3, Full>(nb, a + m * nb, c + m * nb, panel, w, C + m * ldc, ldc);
        case 4: return tile<4, Full>(nb, a + m * nb, c + m * nb, panel, w, C + m * ldc, ldc);
        case 5: return tile<5, Full>(nb, a + m * nb, c + m * nb, panel, w, C + m * ldc, ldc);
        default: return;
    }
}

#pragma GCC pop_options

#endif

}  // namespace

void q8_gemm_panels(int64_t M, int64_t N, int64_t K, int64_t n0, int64_t n1, const float* A, int64_t lda,
                    const uint8_t* P, float* C, int64_t ldc) {
    const int64_t nb = K / kQuantBlock;
    const RowBlocks& act = round_rows(M, K, A, lda);
    const size_t row_bytes = size_t(nb) * sizeof(BlockQ8_0);
    for (int64_t p0 = n0; p0 < n1; p0 += kW) {
        const int64_t w = std::min(kW, N - p0), cols = std::min(w, n1 - p0);
        const uint8_t* panel = P + size_t(p0) * row_bytes;
        float* c = C + (p0 - n0);
#ifdef DG_Q8_PANELS_X86
        if (kernel_isa() >= Isa::avx512vnni && cols == w) {
            if (w == kW) rows_of_panel<true>(M, nb, act, panel, w, c, ldc);
            else rows_of_panel<false>(M, nb, act, panel, w, c, ldc);
            continue;
        }
#endif
        panel_portable(M, nb, act, panel, w, cols, c, ldc);
    }
}

}  // namespace dg::kernels
