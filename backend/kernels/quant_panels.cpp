#include "quant_panels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "isa.h"
#include "quant_act.h"
#include "quant_blocks.h"

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define DG_QUANT_PANELS_X86 1
#endif

namespace dg::kernels {

namespace {

constexpr int64_t kW = kQuantPanelWidth;

// A block type's form in the panels: its bytes, its f16 fields before the values (d; q4_1: d, m),
// its chunks of 4 bytes a row, and c: the weights' values are the stored unsigned bytes (or nibbles) - c.
struct Format {
    int block_bytes, fields, chunks, offset;
};

constexpr Format format_of(ggml_type t) {
    return t == GGML_TYPE_Q8_0   ? Format{int(sizeof(BlockQ8_0)), 1, 8, 128}
           : t == GGML_TYPE_Q4_0 ? Format{int(sizeof(BlockQ4_0)), 1, 4, 8}
                                 : Format{int(sizeof(BlockQ4_1)), 2, 4, 0};
}

// Byte offsets in a block of a panel `w` rows wide: field f's w values, then chunk q's.
inline size_t field_offset(int64_t w, int f) { return size_t(w) * 2 * size_t(f); }
inline size_t chunk_offset(const Format& fm, int64_t w, int q) { return size_t(w) * (2 * size_t(fm.fields) + 4 * size_t(q)); }

}  // namespace

bool quant_panels_take(ggml_type type) {
    return type == GGML_TYPE_Q8_0 || type == GGML_TYPE_Q4_0 || type == GGML_TYPE_Q4_1;
}

// (a block: its fields, then its values' bytes: q8_0 32 signed values, q4 16 bytes of two nibbles)
void pack_quant_panels(ggml_type type, int64_t N, int64_t nb, const uint8_t* W, uint8_t* P) {
    const Format fm = format_of(type);
    const uint8_t flip = type == GGML_TYPE_Q8_0 ? 0x80 : 0;
    const size_t row_bytes = size_t(nb) * size_t(fm.block_bytes);
    for (int64_t p0 = 0; p0 < N; p0 += kW) {
        const int64_t w = std::min(kW, N - p0);
        uint8_t* panel = P + size_t(p0) * row_bytes;
        for (int64_t j = 0; j < w; ++j) {
            const uint8_t* row = W + size_t(p0 + j) * row_bytes;
            for (int64_t b = 0; b < nb; ++b) {
                const uint8_t* in = row + size_t(b) * size_t(fm.block_bytes);
                uint8_t* out = panel + size_t(b) * size_t(w) * size_t(fm.block_bytes);
                for (int f = 0; f < fm.fields; ++f) std::memcpy(out + field_offset(w, f) + 2 * j, in + 2 * f, 2);
                const uint8_t* qs = in + 2 * fm.fields;
                for (int q = 0; q < fm.chunks; ++q)
                    for (int i = 0; i < 4; ++i) out[chunk_offset(fm, w, q) + 4 * size_t(j) + i] = qs[4 * q + i] ^ flip;
            }
        }
    }
}

void unpack_quant_panels(ggml_type type, int64_t N, int64_t nb, const uint8_t* P, uint8_t* W) {
    const Format fm = format_of(type);
    const uint8_t flip = type == GGML_TYPE_Q8_0 ? 0x80 : 0;
    const size_t row_bytes = size_t(nb) * size_t(fm.block_bytes);
    for (int64_t p0 = 0; p0 < N; p0 += kW) {
        const int64_t w = std::min(kW, N - p0);
        const uint8_t* panel = P + size_t(p0) * row_bytes;
        for (int64_t j = 0; j < w; ++j) {
            uint8_t* row = W + size_t(p0 + j) * row_bytes;
            for (int64_t b = 0; b < nb; ++b) {
                const uint8_t* in = panel + size_t(b) * size_t(w) * size_t(fm.block_bytes);
                uint8_t* out = row + size_t(b) * size_t(fm.block_bytes);
                for (int f = 0; f < fm.fields; ++f) std::memcpy(out + 2 * f, in + field_offset(w, f) + 2 * j, 2);
                uint8_t* qs = out + 2 * fm.fields;
                for (int q = 0; q < fm.chunks; ++q)
                    for (int i = 0; i < 4; ++i) qs[4 * q + i] = in[chunk_offset(fm, w, q) + 4 * size_t(j) + i] ^ flip;
            }
        }
    }
}

namespace {

// The activation rows' blocks rounded to 8 bits (quant_act.h), and -c times each block's sum:
// what the weights' offset c (Format::offset) takes from the block's integer sum.
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

const RowBlocks& round_rows(int32_t offset, int64_t M, int64_t K, const float* A, int64_t lda) {
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
            rows.corr[size_t(m * nb + b)] = -offset * sum;
        }
    }
    return rows;
}

// One panel (w rows wide) for every row: the integer sum of each block, then its scales.
void panel_portable(ggml_type type, int64_t M, int64_t nb, const RowBlocks& act, const uint8_t* panel, int64_t w,
                    int64_t cols, float* C, int64_t ldc) {
    const Format fm = format_of(type);
    const bool q8 = type == GGML_TYPE_Q8_0;
    for (int64_t m = 0; m < M; ++m) {
        float acc[kW] = {};
        for (int64_t b = 0; b < nb; ++b) {
            const ActBlock& a = act.blocks[size_t(m * nb + b)];
            const uint8_t* blk = panel + size_t(b) * size_t(w) * size_t(fm.block_bytes);
            for (int64_t j = 0; j < w; ++j) {
                int32_t s = act.corr[size_t(m * nb + b)];
                for (int q = 0; q < fm.chunks; ++q)
                    for (int i = 0; i < 4; ++i) {
                        const int32_t v = blk[chunk_offset(fm, w, q) + 4 * size_t(j) + i];
                        if (q8) s += v * a.qs[4 * q + i];
                        else s += (v & 15) * a.qs[4 * q + i] + (v >> 4) * a.qs[16 + 4 * q + i];
                    }
                uint16_t h;
                std::memcpy(&h, blk + field_offset(w, 0) + 2 * j, 2);
                acc[j] = std::fma(float(s), ggml_fp16_to_fp32(h) * a.d, acc[j]);
                if (fm.fields == 2) {  // q4_1: the minimum times the block's sum
                    std::memcpy(&h, blk + field_offset(w, 1) + 2 * j, 2);
                    acc[j] = std::fma(ggml_fp16_to_fp32(h), a.s, acc[j]);
                }
            }
        }
        std::copy(acc, acc + cols, C + m * ldc);
    }
}

#ifdef DG_QUANT_PANELS_X86

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")

constexpr int kTileRows = 6;  // 12 sums and 12 accumulators of 32 registers

// (the maskz forms: the plain ones' undefined first operand draws -Wmaybe-uninitialized from GCC 12)
inline __m512 cvtph(__m256i h) { return _mm512_maskz_cvtph_ps(__mmask16(0xFFFF), h); }
inline __m512 cvtepi32(__m512i v) { return _mm512_maskz_cvtepi32_ps(__mmask16(0xFFFF), v); }

inline __mmask16 lanes(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1); }

inline __m512i bcast4(const int8_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

// C[MR rows, w] = one panel of type T times MR activation rows (act, corr: rows nb apart). Full: w = 32.
// With one row the sums of each half alternate between two registers (vpdpbusd's latency).
template <ggml_type T, int MR, bool Full>
void tile(int64_t nb, const ActBlock* act, const int32_t* corr, const uint8_t* panel, int64_t w, float* C,
          int64_t ldc) {
    constexpr Format fm = format_of(T);
    constexpr int CH = MR == 1 ? 2 : 1;
    const int64_t width = Full ? kW : w;
    const size_t bs = size_t(width) * fm.block_bytes, c0 = chunk_offset(fm, width, 0), cs = 4 * size_t(width);
    const size_t m0 = field_offset(width, 1);
    const __mmask16 lo = Full ? __mmask16(0xFFFF) : lanes(w), hi = Full ? __mmask16(0xFFFF) : lanes(w - 16);
    const __m512i nibble = _mm512_set1_epi8(0x0F);
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
        for (int q = 0; q < fm.chunks; ++q) {
            const uint8_t* g = blk + c0 + q * cs;
            const __m512i w0 = Full ? _mm512_loadu_si512(g) : _mm512_maskz_loadu_epi32(lo, g);
            const __m512i w1 = Full ? _mm512_loadu_si512(g + 64) : _mm512_maskz_loadu_epi32(hi, g + 64);
            if constexpr (T == GGML_TYPE_Q8_0) {
                for (int m = 0; m < MR; ++m) {
                    const __m512i a = bcast4(act[m * nb + b].qs + 4 * q);
                    s[m][0][q % CH] = _mm512_dpbusd_epi32(s[m][0][q % CH], w0, a);
                    s[m][1][q % CH] = _mm512_dpbusd_epi32(s[m][1][q % CH], w1, a);
                }
            } else {  // low nibbles: values 4q.., high nibbles: values 16 + 4q..
                const __m512i l0 = _mm512_and_si512(w0, nibble), h0 = _mm512_and_si512(_mm512_srli_epi16(w0, 4), nibble);
                const __m512i l1 = _mm512_and_si512(w1, nibble), h1 = _mm512_and_si512(_mm512_srli_epi16(w1, 4), nibble);
                for (int m = 0; m < MR; ++m) {
                    const __m512i alo = bcast4(act[m * nb + b].qs + 4 * q), ahi = bcast4(act[m * nb + b].qs + 16 + 4 * q);
                    s[m][0][0] = _mm512_dpbusd_epi32(s[m][0][0], l0, alo);
                    s[m][1][0] = _mm512_dpbusd_epi32(s[m][1][0], l1, alo);
                    s[m][0][CH - 1] = _mm512_dpbusd_epi32(s[m][0][CH - 1], h0, ahi);
                    s[m][1][CH - 1] = _mm512_dpbusd_epi32(s[m][1][CH - 1], h1, ahi);
                }
            }
        }
        auto field = [&](size_t at, __mmask16 k) {
            return cvtph(Full ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + at))
                              : _mm256_maskz_loadu_epi16(k, blk + at));
        };
        const __m512 d0 = field(0, lo), d1 = field(32, hi);
        for (int m = 0; m < MR; ++m) {
            const ActBlock& a = act[m * nb + b];
            const __m512 da = _mm512_set1_ps(a.d);
            __m512i s0 = s[m][0][0], s1 = s[m][1][0];
            if constexpr (CH == 2) {
                s0 = _mm512_add_epi32(s0, s[m][0][1]);
                s1 = _mm512_add_epi32(s1, s[m][1][1]);
            }
            f[m][0] = _mm512_fmadd_ps(cvtepi32(s0), _mm512_mul_ps(d0, da), f[m][0]);
            f[m][1] = _mm512_fmadd_ps(cvtepi32(s1), _mm512_mul_ps(d1, da), f[m][1]);
        }
        if constexpr (fm.fields == 2) {  // q4_1: the minimum times the block's sum
            const __m512 mn0 = field(m0, lo), mn1 = field(m0 + 32, hi);
            for (int m = 0; m < MR; ++m) {
                const __m512 sa = _mm512_set1_ps(act[m * nb + b].s);
                f[m][0] = _mm512_fmadd_ps(mn0, sa, f[m][0]);
                f[m][1] = _mm512_fmadd_ps(mn1, sa, f[m][1]);
            }
        }
    }
    for (int m = 0; m < MR; ++m) {
        _mm512_mask_storeu_ps(C + m * ldc, lo, f[m][0]);
        _mm512_mask_storeu_ps(C + m * ldc + 16, hi, f[m][1]);
    }
}

template <ggml_type T, bool Full>
void rows_of_panel(int64_t M, int64_t nb, const RowBlocks& act, const uint8_t* panel, int64_t w, float* C,
                   int64_t ldc) {
    const ActBlock* a = act.blocks.data();
    const int32_t* c = act.corr.data();
    int64_t m = 0;
    for (; m + kTileRows <= M; m += kTileRows)
        tile<T, kTileRows, Full>(nb, a + m * nb, c + m * nb, panel, w, C + m * ldc, ldc);
    switch (M - m) {
        case 1: return tile<T, 1, Full>(nb, a + m * nb, c + m * nb, panel, w, C + m * ldc, ldc);
        case 2: return tile<T, 2, Full>(nb, a + m * nb, c + m * nb, panel, w, C + m * ldc, ldc);
        case 3: return tile<T, 3, Full>(nb, a + m * nb, c + m * nb, panel, w, C + m * ldc, ldc);
        case 4: return tile<T, 4, Full>(nb, a + m * nb, c + m * nb, panel, w, C + m * ldc, ldc);
        case 5: return tile<T, 5, Full>(nb, a + m * nb, c + m * nb, panel, w, C + m * ldc, ldc);
        default: return;
    }
}

template <ggml_type T>
void panel_vnni(int64_t M, int64_t nb, const RowBlocks& act, const uint8_t* panel, int64_t w, float* C, int64_t ldc) {
    if (w == kW) rows_of_panel<T, true>(M, nb, act, panel, w, C, ldc);
    else rows_of_panel<T, false>(M, nb, act, panel, w, C, ldc);
}

#pragma GCC pop_options

#endif

}  // namespace

void quant_gemm_panels(ggml_type type, int64_t M, int64_t N, int64_t K, int64_t n0, int64_t n1, const float* A,
                       int64_t lda, const uint8_t* P, float* C, int64_t ldc) {
    const Format fm = format_of(type);
    const int64_t nb = K / kQuantBlock;
    const RowBlocks& act = round_rows(fm.offset, M, K, A, lda);
    const size_t row_bytes = size_t(nb) * size_t(fm.block_bytes);
    for (int64_t p0 = n0; p0 < n1; p0 += kW) {
        const int64_t w = std::min(kW, N - p0), cols = std::min(w, n1 - p0);
        const uint8_t* panel = P + size_t(p0) * row_bytes;
        float* c = C + (p0 - n0);
#ifdef DG_QUANT_PANELS_X86
        if (kernel_isa() >= Isa::avx512vnni && cols == w) {
            if (type == GGML_TYPE_Q8_0) panel_vnni<GGML_TYPE_Q8_0>(M, nb, act, panel, w, c, ldc);
            else if (type == GGML_TYPE_Q4_0) panel_vnni<GGML_TYPE_Q4_0>(M, nb, act, panel, w, c, ldc);
            else panel_vnni<GGML_TYPE_Q4_1>(M, nb, act, panel, w, c, ldc);
            continue;
        }
#endif
        panel_portable(type, M, nb, act, panel, w, cols, c, ldc);
    }
}

}  // namespace dg::kernels
