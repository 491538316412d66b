#include "quant_panels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "isa.h"
#include "quant_panels_tile.h"

namespace dg::kernels {

using panels::chunk_offset;
using panels::field_offset;
using panels::format_of;
using panels::Format;
using panels::kW;

bool quant_panels_take(ggml_type type) {
    const Isa isa = kernel_isa();
    // q6_K, iq4_nl: with VNNI, or the portable product where it is asked for (DYNGRAPH_QUANT_PANELS=1); without
    // VNNI our AVX2 tiles lost to ggml's product (q6_K) and to ggml's repacked iq4_nl (gemm-choices.md)
    if (type == GGML_TYPE_Q6_K || type == GGML_TYPE_IQ4_NL) return isa >= Isa::avx512vnni || isa == Isa::generic;
    return type == GGML_TYPE_Q8_0 || type == GGML_TYPE_Q4_0 || type == GGML_TYPE_Q4_1 || type == GGML_TYPE_Q5_0 ||
           type == GGML_TYPE_Q5_1 || type == GGML_TYPE_Q2_K || type == GGML_TYPE_Q3_K || type == GGML_TYPE_Q4_K ||
           type == GGML_TYPE_Q5_K || type == GGML_TYPE_IQ4_XS;
}

namespace {

// Every byte of row j of a panel `w` rows wide (P, nb blocks) to or from its ggml blocks (row;
// to_panels: row -> P): a block's fields (the k-quants, iq4_xs: and their bytes of scales), the fifth bits
// (q5: bit by bit), then its values' bytes (q8_0: 32 signed values, + 128 in the panels; q4, q5, q4_K,
// q5_K, iq4: bytes of two nibbles; q6_K, q2_K, q3_K: value by value).
void move_row(ggml_type type, int64_t w, int64_t nb, uint8_t* row, uint8_t* panel, int64_t j, bool to_panels) {
    const Format fm = format_of(type);
    auto move_bit = [to_panels](uint8_t* r, int rbit, uint8_t* area, size_t abit) {
        uint8_t* to = to_panels ? area + abit / 8 : r + rbit / 8;
        const int at = to_panels ? int(abit % 8) : rbit % 8;
        const bool bit = to_panels ? (r[rbit / 8] >> (rbit % 8)) & 1 : (area[abit / 8] >> (abit % 8)) & 1;
        *to = uint8_t((*to & ~(1u << at)) | (unsigned(bit) << at));
    };
    const uint8_t flip = type == GGML_TYPE_Q8_0 ? 0x80 : 0;
    auto move = [to_panels](uint8_t* r, uint8_t* p, uint8_t x) {
        if (to_panels) *p = uint8_t(*r ^ x);
        else *r = uint8_t(*p ^ x);
    };
    for (int64_t b = 0; b < nb; ++b) {
        uint8_t* blk = row + size_t(b) * size_t(fm.block_bytes);
        uint8_t* fields = blk + fm.at_fields;
        uint8_t* bytes = blk + fm.at_bytes;
        uint8_t* bits = blk + fm.at_bits;
        uint8_t* qs = blk + fm.at_values;
        uint8_t* out = panel + size_t(b) * size_t(w) * size_t(fm.block_bytes);
        for (int f = 0; f < fm.fields; ++f)
            for (int i = 0; i < 2; ++i) move(fields + 2 * f + i, out + field_offset(w, f) + 2 * j + i, 0);
        for (int t = 0; t < fm.byte_fields; ++t)
            move(bytes + t, out + panels::byte_field_offset(fm, w) + size_t(t) * size_t(w) + size_t(j), 0);
        if (type == GGML_TYPE_Q6_K) {  // (its values, one by one: quant_panels_q6k.cpp)
            if (to_panels) panels::q6k_values_to_panel(qs, out + chunk_offset(fm, w, 0), w, j);
            else panels::q6k_values_from_panel(out + chunk_offset(fm, w, 0), w, j, qs);
            continue;
        }
        if (type == GGML_TYPE_Q2_K || type == GGML_TYPE_Q3_K) {  // (the same: quant_panels_q23k.cpp)
            if (to_panels) panels::q23k_values_to_panel(type, qs, out + chunk_offset(fm, w, 0), w, j);
            else panels::q23k_values_from_panel(type, out + chunk_offset(fm, w, 0), w, j, qs);
            continue;
        }
        for (int v = 0; v < 8 * fm.bits; ++v) {
            // q5_0, q5_1: bit v is value v's fifth bit, that of chunk v % 16 / 4's low (v < 16) or high
            // nibble i = v % 4; q5_K: bit b of qh[l] (v = 8 l + b), that of value l of group b, in chunk
            // 8 (b / 2) + l / 4's low (b even) or high nibble i = l % 4 (quant_panels_q45k.cpp)
            const int l = v / 8, b = v % 8;
            const int g = fm.bits == 4 ? 2 * (v % 16 / 4) + v / 16 : 2 * (8 * (b / 2) + l / 4) + b % 2;
            move_bit(bits, v, out + panels::bits_offset(fm, w), panels::fifth_bit(w, g, j, fm.bits == 4 ? v % 4 : l % 4));
        }
        for (int q = 0; q < fm.chunks; ++q)
            for (int i = 0; i < 4; ++i) move(qs + 4 * q + i, out + chunk_offset(fm, w, q) + 4 * size_t(j) + i, flip);
    }
}

// every row of W (N rows of nb blocks) to or from the panels P
void move_bytes(ggml_type type, int64_t N, int64_t nb, uint8_t* W, uint8_t* P, bool to_panels) {
    const size_t row_bytes = size_t(nb) * size_t(format_of(type).block_bytes);
    for (int64_t p0 = 0; p0 < N; p0 += kW) {
        const int64_t w = std::min(kW, N - p0);
        for (int64_t j = 0; j < w; ++j)
            move_row(type, w, nb, W + size_t(p0 + j) * row_bytes, P + size_t(p0) * row_bytes, j, to_panels);
    }
}

}  // namespace

void pack_quant_panels(ggml_type type, int64_t N, int64_t nb, const uint8_t* W, uint8_t* P) {
    move_bytes(type, N, nb, const_cast<uint8_t*>(W), P, true);  // (W only read)
}

void unpack_quant_panels(ggml_type type, int64_t N, int64_t nb, const uint8_t* P, uint8_t* W) {
    move_bytes(type, N, nb, W, const_cast<uint8_t*>(P), false);  // (P only read)
}

void unpack_quant_panel_row(ggml_type type, int64_t N, int64_t nb, const uint8_t* P, int64_t n, uint8_t* row) {
    const size_t row_bytes = size_t(nb) * size_t(format_of(type).block_bytes);
    const int64_t p0 = n / kW * kW;
    move_row(type, std::min(kW, N - p0), nb, row, const_cast<uint8_t*>(P) + size_t(p0) * row_bytes, n - p0, false);
}

namespace {

// The activation rows' blocks rounded to 8 bits (quant_act.h), and -c times each block's sum:
// what the weights' offset c (Format::offset) takes from the block's integer sum.
struct RowBlocks {
    std::vector<ActBlock> blocks;
    // sum, half: the sums of a block's values and its first 16 (the k-quants' groups of 16)
    std::vector<int32_t> corr, sum, half;
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
        rows.sum.resize(size_t(M * nb));
        rows.half.resize(size_t(M * nb));
    }
    for (int64_t m = 0; m < M; ++m) {
        ActBlock* out = rows.blocks.data() + m * nb;
        if (kernel_isa() != Isa::generic) quantize_act_row(A + m * lda, nb, out);
        else round_row_portable(A + m * lda, nb, out);
        for (int64_t b = 0; b < nb; ++b) {
            int32_t sum = 0, half = 0;
            for (int i = 0; i < kQuantBlock; ++i) {
                sum += out[b].qs[i];
                if (i == kQuantBlock / 2 - 1) half = sum;
            }
            rows.corr[size_t(m * nb + b)] = -offset * sum;
            rows.sum[size_t(m * nb + b)] = sum;
            rows.half[size_t(m * nb + b)] = half;
        }
    }
    return rows;
}

}  // namespace

// (the integer sum of each block, then its scales)
void panels::panel_portable(ggml_type type, int64_t M, int64_t nb, const ActBlock* act, const int32_t* corr,
                            const uint8_t* panel, int64_t w, int64_t cols, float* C, int64_t ldc) {
    if (type == GGML_TYPE_Q4_K || type == GGML_TYPE_Q5_K) return panel_q45k_portable(type, M, nb, act, panel, w, cols, C, ldc);
    if (type == GGML_TYPE_IQ4_NL || type == GGML_TYPE_IQ4_XS) return panel_iq4_portable(type, M, nb, act, panel, w, cols, C, ldc);
    const Format fm = format_of(type);
    const bool q8 = type == GGML_TYPE_Q8_0;
    for (int64_t m = 0; m < M; ++m) {
        float acc[kW] = {};
        for (int64_t b = 0; b < nb; ++b) {
            const ActBlock& a = act[m * nb + b];
            const uint8_t* blk = panel + size_t(b) * size_t(w) * size_t(fm.block_bytes);
            const uint8_t* area = blk + panels::bits_offset(fm, w);
            auto fifth = [&](int g, int64_t j, int i) {  // 16 where the value's fifth bit is set (q5)
                const size_t at = panels::fifth_bit(w, g, j, i);
                return fm.bits ? ((area[at / 8] >> (at % 8)) & 1) << 4 : 0;
            };
            for (int64_t j = 0; j < w; ++j) {
                int32_t s = corr[m * nb + b];
                for (int q = 0; q < fm.chunks; ++q)
                    for (int i = 0; i < 4; ++i) {
                        const int32_t v = blk[chunk_offset(fm, w, q) + 4 * size_t(j) + i];
                        if (q8) s += v * a.qs[4 * q + i];
                        else
                            s += ((v & 15) | fifth(2 * q, j, i)) * a.qs[4 * q + i] +
                                 ((v >> 4) | fifth(2 * q + 1, j, i)) * a.qs[16 + 4 * q + i];
                    }
                uint16_t h;
                std::memcpy(&h, blk + field_offset(w, 0) + 2 * j, 2);
                acc[j] = std::fma(float(s), ggml_fp16_to_fp32(h) * a.d, acc[j]);
                if (fm.fields == 2) {  // q4_1, q5_1: the minimum times the block's sum
                    std::memcpy(&h, blk + field_offset(w, 1) + 2 * j, 2);
                    acc[j] = std::fma(ggml_fp16_to_fp32(h), a.s, acc[j]);
                }
            }
        }
        std::copy(acc, acc + cols, C + m * ldc);
    }
}


void quant_gemm_panels(ggml_type type, int64_t M, int64_t N, int64_t K, int64_t n0, int64_t n1, const float* A,
                       int64_t lda, const uint8_t* P, float* C, int64_t ldc) {
    const Format fm = format_of(type);
    const int64_t nb = K / kQuantBlock;
    const RowBlocks& act = round_rows(fm.offset, M, K, A, lda);
#ifdef DG_QUANT_PANELS_X86
    const Isa isa = kernel_isa();
#endif
    const size_t row_bytes = size_t(K / fm.values) * size_t(fm.block_bytes);
    for (int64_t p0 = n0; p0 < n1; p0 += kW) {
        const int64_t w = std::min(kW, N - p0), cols = std::min(w, n1 - p0);
        const uint8_t* panel = P + size_t(p0) * row_bytes;
        float* c = C + (p0 - n0);
        const ActBlock* a = act.blocks.data();
        const int32_t* corr = act.corr.data();
        if (type == GGML_TYPE_Q2_K || type == GGML_TYPE_Q3_K) {
#ifdef DG_QUANT_PANELS_X86
            if (cols == w && isa >= Isa::avx2) {
                if (isa >= Isa::avx512vnni) panels::panel_q23k_vnni(type, M, nb, a, act.sum.data(), act.half.data(), panel, w, c, ldc);
                else panels::panel_q23k_avx2(type, M, nb, a, act.sum.data(), act.half.data(), panel, w, c, ldc);
                continue;
            }
#endif
            panels::panel_q23k_portable(type, M, nb, a, act.sum.data(), act.half.data(), panel, w, cols, c, ldc);
            continue;
        }
        if (type == GGML_TYPE_Q6_K) {
#ifdef DG_QUANT_PANELS_X86
            if (cols == w && isa >= Isa::avx512vnni) {
                panels::panel_q6k_vnni(M, nb, a, corr, act.half.data(), panel, w, c, ldc);
                continue;
            }
#endif
            panels::panel_q6k_portable(M, nb, a, corr, act.half.data(), panel, w, cols, c, ldc);
            continue;
        }
#ifdef DG_QUANT_PANELS_X86
        if ((type == GGML_TYPE_Q4_K || type == GGML_TYPE_Q5_K) && cols == w && isa >= Isa::avx2) {
            if (isa >= Isa::avx512vnni) panels::panel_q45k_vnni(type, M, nb, a, panel, w, c, ldc);
            else panels::panel_q45k_avx2(type, M, nb, a, panel, w, c, ldc);
            continue;
        }
        if ((type == GGML_TYPE_IQ4_NL || type == GGML_TYPE_IQ4_XS) && cols == w && isa >= Isa::avx2) {
            if (isa >= Isa::avx512vnni) panels::panel_iq4_vnni(type, M, nb, a, corr, panel, w, c, ldc);
            else panels::panel_iq4_xs_avx2(M, nb, a, panel, w, c, ldc);  // (iq4_nl: with VNNI only)
            continue;
        }
        if (isa >= Isa::avx512vnni && cols == w) {
            panels::panel_vnni(type, M, nb, a, corr, panel, w, c, ldc);
            continue;
        }
        if (isa >= Isa::avx2 && cols == w) {
            panels::panel_avx2(type, M, nb, a, corr, panel, w, c, ldc);
            continue;
        }
#endif
        panels::panel_portable(type, M, nb, a, corr, panel, w, cols, c, ldc);
    }
}

}  // namespace dg::kernels
