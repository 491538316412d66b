// q4_K and q5_K weights in the panels (quant_panels.h): q4_K is the type most
// of a llama.cpp Q4_K_M file is, q5_K of a Q5_K_M one. A super-block of 256
// values a row is 8 groups of 32, each with a 6-bit scale and minimum
// (quant_blocks.h, BlockQ4_K, BlockQ5_K). In a panel a super-block is its w
// f16 d, its w f16 dmin, its 12 bytes of scales as 12 fields of w bytes (byte
// t of every row side by side), q5_K: the fifth bits (32 w bytes, in groups
// of 4 a row as q5_0's: quant_panels_tile.h), then 32 chunks of w rows x 4
// bytes: chunk 8 c + q holds the row's qs[32 c + 4 q .. + 3], whose low
// nibbles are values 4 q.. of group 2 c and high nibbles values 4 q.. of
// group 2 c + 1 (q5_K: their fifth bits are groups 2 (8 c + q) and
// 2 (8 c + q) + 1 of the bits). Each group's integer sums (values times the
// activations' 8-bit values of the same 32, quant_act.h) are scaled into f32
// in turn: acc = fma(float(sum), (d * float(sc)) * d_a, acc), then
// acc = fma(-(dmin * float(m)), s_a, acc) (both products exact), in every
// variant, so all give the same bits. With AVX-512 VNNI: vpdpbusd, 6 rows x
// 32 outputs a tile, each group's 8 chunks read once for the low nibbles and
// again (from L1) for the high ones, q5_K's fifth bits a mask of 16 added
// under it; with AVX2: vpmaddubsw, 2 rows x 32 outputs, a group's 16 products
// a lane summed in 16 bits and widened every 8 chunks (q4_K: at most
// 8 x 2 x 15 x 128 = 30720) or 4 (q5_K: 4 x 2 x 31 x 128 = 31744).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant_panels_simd.h"

#ifdef DG_QUANT_PANELS_X86
#include <immintrin.h>
#endif

namespace dg::kernels::panels {

namespace {

float f16_at(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return ggml_fp16_to_fp32(h);
}

// q5_K: the group of the bits (fifth_bit) that holds the fifth bits of chunk 8 (g / 2) + q's low (g even)
// or high nibbles, the values 4 q.. of group g of a super-block
constexpr int bits_group(int g, int q) { return 2 * (8 * (g / 2) + q) + g % 2; }

}  // namespace

void panel_q45k_portable(ggml_type type, int64_t M, int64_t nb, const ActBlock* act, const uint8_t* panel, int64_t w,
                         int64_t cols, float* C, int64_t ldc) {
    const Format fm = format_of(type);
    for (int64_t m = 0; m < M; ++m) {
        float acc[kW] = {};
        for (int64_t sb = 0; sb < nb / 8; ++sb) {
            const uint8_t* blk = panel + size_t(sb) * size_t(w) * size_t(fm.block_bytes);
            const uint8_t* area = blk + bits_offset(fm, w);
            for (int64_t j = 0; j < w; ++j) {
                auto byte = [&](int t) { return blk[byte_field_offset(fm, w) + size_t(t) * size_t(w) + size_t(j)]; };
                const float d = f16_at(blk + field_offset(w, 0) + 2 * j), dmin = f16_at(blk + field_offset(w, 1) + 2 * j);
                for (int g = 0; g < 8; ++g) {
                    const ActBlock& a = act[m * nb + 8 * sb + g];
                    int32_t sum = 0;
                    for (int q = 0; q < 8; ++q)
                        for (int i = 0; i < 4; ++i) {
                            const int v = blk[chunk_offset(fm, w, 8 * (g / 2) + q) + 4 * size_t(j) + i];
                            const size_t at = fifth_bit(w, bits_group(g, q), j, i);
                            const int fifth = fm.bits ? ((area[at / 8] >> (at % 8)) & 1) << 4 : 0;
                            sum += ((g % 2 ? v >> 4 : v & 15) | fifth) * a.qs[4 * q + i];
                        }
                    int sc, mn;
                    q4_k_scale_min(g, byte, sc, mn);
                    acc[j] = std::fma(float(sum), (d * float(sc)) * a.d, acc[j]);
                    acc[j] = std::fma(-(dmin * float(mn)), a.s, acc[j]);
                }
            }
        }
        std::copy(acc, acc + cols, C + m * ldc);
    }
}

#ifdef DG_QUANT_PANELS_X86

namespace {

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")

// C[MR rows, w] = one q4_K or q5_K panel (T) times MR activation rows (rows nb blocks apart). Full: w = 32.
// With one row a group's sums alternate between two registers (vpdpbusd's latency).
template <ggml_type T, int MR, bool Full>
void tile_vnni(int64_t nb, const ActBlock* act, const uint8_t* panel, int64_t w, float* C, int64_t ldc) {
    constexpr Format kFm = format_of(T);
    constexpr int CH = MR == 1 ? 2 : 1;
    const int64_t width = Full ? kW : w;
    const size_t bs = size_t(width) * kFm.block_bytes, c0 = chunk_offset(kFm, width, 0), cs = 4 * size_t(width);
    const size_t sf = byte_field_offset(kFm, width), m0 = field_offset(width, 1);
    const __mmask16 lo = Full ? __mmask16(0xFFFF) : lanes16(w), hi = Full ? __mmask16(0xFFFF) : lanes16(w - 16);
    const __m512i nibble = _mm512_set1_epi8(0x0F), sixteen = _mm512_set1_epi8(16);
    // q5_K: group G's fifth bits of the 16 rows of half h (quant_panels_tile.h)
    auto fifth = [&](const uint8_t* blk, int G, int h) {
        const uint8_t* area = blk + bits_offset(kFm, width);
        uint64_t k;
        if (Full) std::memcpy(&k, area + 16 * G + 8 * h, 8);
        else k = read_bits(area, fifth_bit(width, G, 16 * h, 0), 4 * int(std::min<int64_t>(16, width - 16 * h)));
        return _cvtu64_mask64(k);
    };
    __m512 f[MR][2];
    for (int m = 0; m < MR; ++m) f[m][0] = f[m][1] = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nb / 8; ++sb) {
        const uint8_t* blk = panel + size_t(sb) * bs;
        const ActBlock* a0 = act + 8 * sb;  // row m's group g: a0[m * nb + g]
        for (int g = 0; g < 8; ++g) {
            // an eighth of the super-block's bytes a group, kPrefetchAhead ahead, into L2
            for (size_t l = 0; l < bs / 8; l += 64)
                _mm_prefetch(reinterpret_cast<const char*>(blk + size_t(g) * (bs / 8) + kPrefetchAhead + l), _MM_HINT_T1);
            __m512i s[MR][2][CH];
            for (int m = 0; m < MR; ++m)
                for (int h = 0; h < 2; ++h)
                    for (int c = 0; c < CH; ++c) s[m][h][c] = _mm512_setzero_si512();
#pragma GCC unroll 8
            for (int q = 0; q < 8; ++q) {
                const uint8_t* p = blk + c0 + size_t(8 * (g / 2) + q) * cs;
                __m512i w0 = chunk64<Full>(p, lo), w1 = chunk64<Full>(p + 64, hi);
                if (g % 2) {
                    w0 = _mm512_srli_epi16(w0, 4);
                    w1 = _mm512_srli_epi16(w1, 4);
                }
                w0 = _mm512_and_si512(w0, nibble);
                w1 = _mm512_and_si512(w1, nibble);
                if constexpr (kFm.bits != 0) {
                    w0 = _mm512_mask_add_epi8(w0, fifth(blk, bits_group(g, q), 0), w0, sixteen);
                    w1 = _mm512_mask_add_epi8(w1, fifth(blk, bits_group(g, q), 1), w1, sixteen);
                }
                for (int m = 0; m < MR; ++m) {
                    const __m512i a = bcast4_512(a0[m * nb + g].qs + 4 * q);
                    s[m][0][q % CH] = _mm512_dpbusd_epi32(s[m][0][q % CH], w0, a);
                    s[m][1][q % CH] = _mm512_dpbusd_epi32(s[m][1][q % CH], w1, a);
                }
            }
            for (int h = 0; h < 2; ++h) {  // group g's d * sc and dmin * m for the 16 rows of half h
                const __mmask16 k = h ? hi : lo;
                auto bytes = [&](int t) { return bytes16<Full>(blk + sf + size_t(t) * size_t(width) + 16 * size_t(h), k); };
                auto field = [&](size_t at) { return half16<Full>(blk + at + 32 * size_t(h), k); };
                v16si sc, mn;
                q4_k_scale_min(g, bytes, sc, mn);
                const __m512 dsc = _mm512_mul_ps(field(0), _mm512_maskz_cvtepi32_ps(__mmask16(0xFFFF), __m512i(sc)));
                const __m512 dm = _mm512_mul_ps(field(m0), _mm512_maskz_cvtepi32_ps(__mmask16(0xFFFF), __m512i(mn)));
                for (int m = 0; m < MR; ++m) {
                    const ActBlock& a = a0[m * nb + g];
                    __m512i sum = s[m][h][0];
                    if constexpr (CH == 2) sum = _mm512_add_epi32(sum, s[m][h][1]);
                    const __m512 x = _mm512_maskz_cvtepi32_ps(__mmask16(0xFFFF), sum);
                    f[m][h] = _mm512_fmadd_ps(x, _mm512_mul_ps(dsc, _mm512_set1_ps(a.d)), f[m][h]);
                    f[m][h] = _mm512_fnmadd_ps(dm, _mm512_set1_ps(a.s), f[m][h]);
                }
            }
        }
    }
    store_tile(C, ldc, f, lo, hi);
}

struct RowsVnni {
    template <ggml_type T, bool Full>
    static void run(int64_t M, int64_t nb, const ActBlock* a, const uint8_t* panel, int64_t w, float* C, int64_t ldc) {
        row_tiles<6>(M, [&](auto r, int64_t m) {  // (6 rows: 12 sums and 12 accumulators of 32 registers)
            tile_vnni<T, decltype(r)::value, Full>(nb, a + m * nb, panel, w, C + m * ldc, ldc);
        });
    }
};

#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

// C[MR rows, w] = one q4_K or q5_K panel (T) times MR activation rows. Full: w = 32; else the lanes past w
// are neither read nor written (the panel's fields and scale bytes copied, padded, a super-block at a time).
template <ggml_type T, int MR, bool Full>
void tile_avx2(int64_t nb, const ActBlock* act, const uint8_t* panel, int64_t w, float* C, int64_t ldc) {
    constexpr Format kFm = format_of(T);
    constexpr int V = 4;                   // a panel's 32 outputs in 4 vectors
    constexpr int widen = kFm.bits ? 4 : 8;  // chunks between widenings of the 16-bit sums (the file's head)
    const int64_t width = Full ? kW : w;
    const size_t bs = size_t(width) * kFm.block_bytes, c0 = chunk_offset(kFm, width, 0), cs = 4 * size_t(width);
    __m256i mask[V];
    for (int v = 0; v < V; ++v) mask[v] = lane_mask(w - 8 * v);
    const __m256i nibble = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    __m256 f[MR][V];
    for (int m = 0; m < MR; ++m)
        for (int v = 0; v < V; ++v) f[m][v] = _mm256_setzero_ps();
    alignas(32) uint8_t pad[2 * 2 * kW + 12 * kW] = {};  // a narrow panel's d, dmin and scale bytes, 32 rows wide
    for (int64_t sb = 0; sb < nb / 8; ++sb) {
        const uint8_t* blk = panel + size_t(sb) * bs;
        const uint8_t* head = blk;  // d, dmin, then the 12 byte fields, `width` rows each
        int64_t stride = width;
        if constexpr (!Full) {
            pad_head(kFm, blk, w, pad);
            head = pad;
            stride = kW;
        }
        const ActBlock* a0 = act + 8 * sb;
        for (int g = 0; g < 8; ++g) {
            for (size_t l = 0; l < bs / 8; l += 64)  // (as the VNNI tile)
                _mm_prefetch(reinterpret_cast<const char*>(blk + size_t(g) * (bs / 8) + kPrefetchAhead + l), _MM_HINT_T1);
            __m256i t[MR][V];
            __m256i s[MR][V];
            for (int m = 0; m < MR; ++m)
                for (int v = 0; v < V; ++v) t[m][v] = s[m][v] = _mm256_setzero_si256();
            const uint8_t* area = blk + bits_offset(kFm, width);
#pragma GCC unroll 8
            for (int q = 0; q < 8; ++q) {
                const uint8_t* p = blk + c0 + size_t(8 * (g / 2) + q) * cs;
                __m256i x[V];
                for (int v = 0; v < V; ++v) {
                    x[v] = Full ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * v))
                                : _mm256_maskload_epi32(reinterpret_cast<const int*>(p + 32 * v), mask[v]);
                    if (g % 2) x[v] = _mm256_srli_epi16(x[v], 4);
                    x[v] = _mm256_and_si256(x[v], nibble);
                    if constexpr (kFm.bits != 0) {  // q5_K: group G's fifth bits of the 8 rows of vector v
                        const int G = bits_group(g, q);
                        uint32_t k;
                        if (Full) std::memcpy(&k, area + 16 * G + 4 * v, 4);
                        else k = uint32_t(read_bits(area, fifth_bit(width, G, 8 * v, 0), 4 * int(std::min<int64_t>(8, width - 8 * v))));
                        x[v] = _mm256_or_si256(x[v], sixteens(k));
                    }
                }
                for (int m = 0; m < MR; ++m) {
                    const __m256i a = bcast4_256(a0[m * nb + g].qs + 4 * q);
                    for (int v = 0; v < V; ++v) t[m][v] = _mm256_add_epi16(t[m][v], _mm256_maddubs_epi16(x[v], a));
                }
                if ((q + 1) % widen == 0)
                    for (int m = 0; m < MR; ++m)
                        for (int v = 0; v < V; ++v) {
                            s[m][v] = _mm256_add_epi32(s[m][v], _mm256_madd_epi16(t[m][v], ones));
                            t[m][v] = _mm256_setzero_si256();
                        }
            }
            for (int v = 0; v < V; ++v) {  // group g's d * sc and dmin * m for the 8 rows of vector v
                auto bytes = [&](int b) {
                    const uint8_t* p = head + 4 * stride + size_t(b) * size_t(stride) + 8 * size_t(v);
                    return v8si(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
                };
                auto field = [&](int i) {
                    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(head + 2 * stride * i + 16 * v)));
                };
                v8si sc, mn;
                q4_k_scale_min(g, bytes, sc, mn);
                const __m256 dsc = _mm256_mul_ps(field(0), _mm256_cvtepi32_ps(__m256i(sc)));
                const __m256 dm = _mm256_mul_ps(field(1), _mm256_cvtepi32_ps(__m256i(mn)));
                for (int m = 0; m < MR; ++m) {
                    const ActBlock& a = a0[m * nb + g];
                    const __m256 x = _mm256_cvtepi32_ps(s[m][v]);
                    f[m][v] = _mm256_fmadd_ps(x, _mm256_mul_ps(dsc, _mm256_set1_ps(a.d)), f[m][v]);
                    f[m][v] = _mm256_fnmadd_ps(dm, _mm256_set1_ps(a.s), f[m][v]);
                }
            }
        }
    }
    store_tile<Full>(C, ldc, f, mask);
}

struct RowsAvx2 {
    template <ggml_type T, bool Full>
    static void run(int64_t M, int64_t nb, const ActBlock* a, const uint8_t* panel, int64_t w, float* C, int64_t ldc) {
        row_tiles<2>(M, [&](auto r, int64_t m) {
            tile_avx2<T, decltype(r)::value, Full>(nb, a + m * nb, panel, w, C + m * ldc, ldc);
        });
    }
};

#pragma GCC pop_options

}  // namespace

void panel_q45k_vnni(ggml_type type, int64_t M, int64_t nb, const ActBlock* act, const uint8_t* panel, int64_t w,
                     float* C, int64_t ldc) {
    by_type_and_width<RowsVnni, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K>(type, w == kW, M, nb, act, panel, w, C, ldc);
}

void panel_q45k_avx2(ggml_type type, int64_t M, int64_t nb, const ActBlock* act, const uint8_t* panel, int64_t w,
                     float* C, int64_t ldc) {
    by_type_and_width<RowsAvx2, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K>(type, w == kW, M, nb, act, panel, w, C, ldc);
}

#endif

}  // namespace dg::kernels::panels
