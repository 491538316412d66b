#include "dequantize_iq.h"

#include <cmath>
#include <cstring>
#include <vector>

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define DG_DEQUANT_IQ_X86 1
#endif

namespace dg::kernels {

#ifdef DG_DEQUANT_IQ_X86

namespace {

// ggml's block layouts (ggml-common.h), in bytes: the f16 scale d first in each
constexpr int kIq2xxsBytes = 66;                             // qs: 8 groups of (4 index bytes, 32 bits: 4 x 7 sign bits, 4 scale bits)
constexpr int kIq2xsBytes = 74, kIq2xsScales = 66;           // qs: 32 x 16 bits (9 index bits, 7 sign bits)
constexpr int kIq2sBytes = 82, kIq2sQh = 66, kIq2sScales = 74;  // qs: 32 index bytes, then 32 sign bytes
constexpr int kIq3xxsBytes = 98, kIq3xxsAux = 66;            // qs: 64 index bytes; then 8 x 32 bits (signs, scale)
constexpr int kIq3sBytes = 110, kIq3sQh = 66, kIq3sSigns = 74, kIq3sScales = 106;
constexpr int kIq1sBytes = 50, kIq1sQh = 34;                 // qh: 8 x 16 bits (3 x 3 index bits, 3 scale bits, delta sign)
constexpr int kIq1mBytes = 56, kIq1mQh = 32, kIq1mScales = 48;  // no d: its f16 in the scale words' top 4 bits
constexpr uint16_t kHalfOne = 0x3C00;  // 1.0 in f16

struct Grids {
    uint64_t iq2xxs[256], iq2xs[512], iq2s[1024];  // 8 bytes an entry
    uint32_t iq3xxs[256], iq3s[512];               // 4 bytes an entry
    uint8_t signs[128];                            // 7 sign bits and their parity as the eighth
    uint64_t iq1s[2048];                           // 8 int8 values (-1, 0, 1) an entry (iq1_s and iq1_m)
    float iq1_deltas[2];                           // what iq1_s and iq1_m add to them: + and - (picked by a bit)
};

// Entry `idx` of a grid: ggml's conversion of a block whose first group picks it (set_index) with the
// scale `scale` and no signs, its first `values` values divided by the scale (exact: small integers).
uint64_t grid_entry(ggml_type type, int bytes, int values, float scale, int idx, void (*set_index)(uint8_t*, int)) {
    std::vector<uint8_t> block(size_t(bytes), 0);
    std::memcpy(block.data(), &kHalfOne, 2);
    set_index(block.data(), idx);
    float y[256];
    ggml_get_type_traits(type)->to_float(block.data(), y, 256);
    uint64_t e = 0;
    for (int j = 0; j < values; ++j) e |= uint64_t(uint8_t(std::lround(y[j] / scale))) << (8 * j);
    return e;
}

const Grids& grids() {
    static const Grids g = [] {
        Grids t{};
        for (int i = 0; i < 256; ++i)  // (a zero scale nibble: d (0.5 + 0) 0.25)
            t.iq2xxs[i] = grid_entry(GGML_TYPE_IQ2_XXS, kIq2xxsBytes, 8, 0.125f, i, [](uint8_t* b, int v) { b[2] = uint8_t(v); });
        for (int i = 0; i < 512; ++i)
            t.iq2xs[i] = grid_entry(GGML_TYPE_IQ2_XS, kIq2xsBytes, 8, 0.125f, i, [](uint8_t* b, int v) {
                b[2] = uint8_t(v);
                b[3] = uint8_t(v >> 8);
            });
        for (int i = 0; i < 1024; ++i)
            t.iq2s[i] = grid_entry(GGML_TYPE_IQ2_S, kIq2sBytes, 8, 0.125f, i, [](uint8_t* b, int v) {
                b[2] = uint8_t(v);
                b[kIq2sQh] = uint8_t(v >> 8);
            });
        for (int i = 0; i < 256; ++i)  // d (0.5 + 0) 0.5
            t.iq3xxs[i] = uint32_t(grid_entry(GGML_TYPE_IQ3_XXS, kIq3xxsBytes, 4, 0.25f, i, [](uint8_t* b, int v) { b[2] = uint8_t(v); }));
        for (int i = 0; i < 512; ++i)  // d (1 + 2 * 0)
            t.iq3s[i] = uint32_t(grid_entry(GGML_TYPE_IQ3_S, kIq3sBytes, 4, 1.0f, i, [](uint8_t* b, int v) {
                b[2] = uint8_t(v);
                b[kIq3sQh] = uint8_t(v >> 8);
            }));
        for (int i = 0; i < 128; ++i) t.signs[i] = uint8_t(i | ((__builtin_popcount(unsigned(i)) & 1) << 7));
        // iq1_s: value d (2 * 0 + 1) (grid + delta), the delta's sign the top bit of the group's 16 bits
        float y[2][256];
        for (int neg = 0; neg < 2; ++neg) {
            uint8_t b[kIq1sBytes] = {};
            std::memcpy(b, &kHalfOne, 2);
            b[kIq1sQh + 1] = uint8_t(neg << 7);
            ggml_get_type_traits(GGML_TYPE_IQ1_S)->to_float(b, y[neg], 256);
        }
        t.iq1_deltas[0] = (y[0][0] - y[1][0]) / 2;
        t.iq1_deltas[1] = -t.iq1_deltas[0];
        for (int i = 0; i < 2048; ++i) {
            uint8_t b[kIq1sBytes] = {};
            std::memcpy(b, &kHalfOne, 2);
            b[2] = uint8_t(i);
            b[kIq1sQh] = uint8_t(i >> 8);
            ggml_get_type_traits(GGML_TYPE_IQ1_S)->to_float(b, y[0], 256);
            for (int j = 0; j < 8; ++j) t.iq1s[i] |= uint64_t(uint8_t(int8_t(std::lround(y[0][j] - t.iq1_deltas[0])))) << (8 * j);
        }
        return t;
    }();
    return g;
}

inline float half_at(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return ggml_fp16_to_fp32(h);
}
inline uint32_t u32_at(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

// y[0..8) = db * the 8 grid bytes, negated where the sign bit is set (ggml: db * grid[j] * (+-1.f))
inline void put8(float* y, float db, uint64_t grid, uint8_t signs) {
    const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    const __m256 v = _mm256_mul_ps(_mm256_set1_ps(db), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(int64_t(grid)))));
    const __m256i neg = _mm256_slli_epi32(_mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(signs), bit), bit), 31);
    _mm256_storeu_ps(y, _mm256_xor_ps(v, _mm256_castsi256_ps(neg)));
}

void iq2_xxs_avx2(const void* src, float* y, int64_t n) {
    const Grids& g = grids();
    const auto* b = static_cast<const uint8_t*>(src);
    for (int64_t i = 0; i < n / 256; ++i, b += kIq2xxsBytes) {
        const float d = half_at(b);
        for (int ib = 0; ib < 8; ++ib) {
            const uint32_t idx = u32_at(b + 2 + 8 * ib), aux = u32_at(b + 6 + 8 * ib);
            const float db = d * (0.5f + float(aux >> 28)) * 0.25f;
            for (int l = 0; l < 4; ++l, y += 8) put8(y, db, g.iq2xxs[(idx >> (8 * l)) & 255], g.signs[(aux >> (7 * l)) & 127]);
        }
    }
}

void iq2_xs_avx2(const void* src, float* y, int64_t n) {
    const Grids& g = grids();
    const auto* b = static_cast<const uint8_t*>(src);
    for (int64_t i = 0; i < n / 256; ++i, b += kIq2xsBytes) {
        const float d = half_at(b);
        for (int ib = 0; ib < 8; ++ib) {
            const uint8_t sc = b[kIq2xsScales + ib];
            const float db[2] = {d * (0.5f + float(sc & 0xf)) * 0.25f, d * (0.5f + float(sc >> 4)) * 0.25f};
            for (int l = 0; l < 4; ++l, y += 8) {
                uint16_t q;
                std::memcpy(&q, b + 2 + 2 * (4 * ib + l), 2);
                put8(y, db[l / 2], g.iq2xs[q & 511], g.signs[q >> 9]);
            }
        }
    }
}

void iq2_s_avx2(const void* src, float* y, int64_t n) {
    const Grids& g = grids();
    const auto* b = static_cast<const uint8_t*>(src);
    for (int64_t i = 0; i < n / 256; ++i, b += kIq2sBytes) {
        const float d = half_at(b);
        const uint8_t *qs = b + 2, *signs = b + 2 + 32;
        for (int ib = 0; ib < 8; ++ib, qs += 4, signs += 4) {
            const uint8_t sc = b[kIq2sScales + ib], qh = b[kIq2sQh + ib];
            const float db[2] = {d * (0.5f + float(sc & 0xf)) * 0.25f, d * (0.5f + float(sc >> 4)) * 0.25f};
            for (int l = 0; l < 4; ++l, y += 8) put8(y, db[l / 2], g.iq2s[qs[l] | ((qh << (8 - 2 * l)) & 0x300)], signs[l]);
        }
    }
}

void iq3_xxs_avx2(const void* src, float* y, int64_t n) {
    const Grids& g = grids();
    const auto* b = static_cast<const uint8_t*>(src);
    for (int64_t i = 0; i < n / 256; ++i, b += kIq3xxsBytes) {
        const float d = half_at(b);
        const uint8_t* qs = b + 2;
        for (int ib = 0; ib < 8; ++ib, qs += 8) {
            const uint32_t aux = u32_at(b + kIq3xxsAux + 4 * ib);
            const float db = d * (0.5f + float(aux >> 28)) * 0.5f;
            for (int l = 0; l < 4; ++l, y += 8)
                put8(y, db, g.iq3xxs[qs[2 * l]] | uint64_t(g.iq3xxs[qs[2 * l + 1]]) << 32, g.signs[(aux >> (7 * l)) & 127]);
        }
    }
}

void iq3_s_avx2(const void* src, float* y, int64_t n) {
    const Grids& g = grids();
    const auto* b = static_cast<const uint8_t*>(src);
    for (int64_t i = 0; i < n / 256; ++i, b += kIq3sBytes) {
        const float d = half_at(b);
        const uint8_t *qs = b + 2, *signs = b + kIq3sSigns;
        for (int ib = 0; ib < 8; ++ib, qs += 8, signs += 4) {  // (a scale byte's low nibble for even groups)
            const uint8_t sc = b[kIq3sScales + ib / 2], qh = b[kIq3sQh + ib];
            const float db = d * float(1 + 2 * (ib % 2 ? sc >> 4 : sc & 0xf));
            for (int l = 0; l < 4; ++l, y += 8) {
                const uint32_t g1 = g.iq3s[qs[2 * l] | ((qh << (8 - 2 * l)) & 256)];
                const uint32_t g2 = g.iq3s[qs[2 * l + 1] | ((qh << (7 - 2 * l)) & 256)];
                put8(y, db, g1 | uint64_t(g2) << 32, signs[l]);
            }
        }
    }
}

// y[0..8) = dl * (the 8 int8 grid values + delta) (ggml's order)
inline void put8_iq1(float* y, float dl, uint64_t grid, float delta) {
    const __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_cvtsi64_si128(int64_t(grid))));
    _mm256_storeu_ps(y, _mm256_mul_ps(_mm256_set1_ps(dl), _mm256_add_ps(v, _mm256_set1_ps(delta))));
}

void iq1_s_avx2(const void* src, float* y, int64_t n) {
    const Grids& g = grids();
    const auto* b = static_cast<const uint8_t*>(src);
    for (int64_t i = 0; i < n / 256; ++i, b += kIq1sBytes) {
        const float d = half_at(b);
        const uint8_t* qs = b + 2;
        for (int ib = 0; ib < 8; ++ib, qs += 4) {
            uint16_t qh;
            std::memcpy(&qh, b + kIq1sQh + 2 * ib, 2);
            const float dl = d * float(2 * ((qh >> 12) & 7) + 1);
            const float delta = g.iq1_deltas[qh >> 15];
            for (int l = 0; l < 4; ++l, y += 8) put8_iq1(y, dl, g.iq1s[qs[l] | (((qh >> (3 * l)) & 7) << 8)], delta);
        }
    }
}

void iq1_m_avx2(const void* src, float* y, int64_t n) {
    const Grids& g = grids();
    const auto* b = static_cast<const uint8_t*>(src);
    for (int64_t i = 0; i < n / 256; ++i, b += kIq1mBytes) {
        uint16_t sc[4];
        std::memcpy(sc, b + kIq1mScales, 8);
        const uint16_t dh = uint16_t((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
        const float d = ggml_fp16_to_fp32(dh);
        const uint8_t *qs = b, *qh = b + kIq1mQh;
        for (int ib = 0; ib < 8; ++ib, qs += 4, qh += 2) {
            const int shift = 6 * (ib % 2);
            const float dl[2] = {d * float(2 * ((sc[ib / 2] >> shift) & 7) + 1), d * float(2 * ((sc[ib / 2] >> (shift + 3)) & 7) + 1)};
            for (int l = 0; l < 4; ++l, y += 8) {
                const uint8_t h = qh[l / 2];
                const int idx = qs[l] | ((l % 2 ? h << 4 : h << 8) & 0x700);
                put8_iq1(y, dl[l / 2], g.iq1s[idx], g.iq1_deltas[(h >> (l % 2 ? 7 : 3)) & 1]);
            }
        }
    }
}

#pragma GCC pop_options

}  // namespace

DequantRowFn iq_dequant_row_avx2(ggml_type type) {
    switch (type) {
        case GGML_TYPE_IQ2_XXS: return iq2_xxs_avx2;
        case GGML_TYPE_IQ2_XS: return iq2_xs_avx2;
        case GGML_TYPE_IQ2_S: return iq2_s_avx2;
        case GGML_TYPE_IQ3_XXS: return iq3_xxs_avx2;
        case GGML_TYPE_IQ3_S: return iq3_s_avx2;
        case GGML_TYPE_IQ1_S: return iq1_s_avx2;
        case GGML_TYPE_IQ1_M: return iq1_m_avx2;
        default: return nullptr;
    }
}

#else

DequantRowFn iq_dequant_row_avx2(ggml_type) { return nullptr; }

#endif

}  // namespace dg::kernels
