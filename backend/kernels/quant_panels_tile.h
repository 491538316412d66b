// Inside quant_panels.cpp and its vector tiles (quant_panels_vnni.cpp,
// quant_panels_avx2.cpp): a block type's form in the panels (quant_panels.h)
// and the tiles that multiply one panel by the rounded activation rows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "ggml.h"
#include "quant_act.h"
#include "quant_blocks.h"
#include "quant_panels.h"

namespace dg::kernels::panels {

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

// C[m, j] for m < M, j < w = one panel (w rows wide, nb blocks) of `type` times M activation rows
// rounded to blocks (act: row m's nb blocks at act[m * nb]; corr[m * nb + b] = -offset times block
// b's sum of values). Every variant sums the same integers exactly and then takes the same f32
// steps per block, in the same order: acc = fma(float(sum), d_w * d_a, acc), and for q4_1
// acc = fma(m_w, s_a, acc); so all give the same bits.
// The portable variant writes only the first `cols` columns.
void panel_portable(ggml_type type, int64_t M, int64_t nb, const ActBlock* act, const int32_t* corr,
                    const uint8_t* panel, int64_t w, int64_t cols, float* C, int64_t ldc);

// R::run<T, Full>(args...) for the panel's type and for a full (32-row) or a narrower last panel:
// the one switch the vector variants share.
template <class R, class... Args>
void by_type_and_width(ggml_type type, bool full, Args... args) {
    auto width = [&](auto t) {
        if (full) R::template run<decltype(t)::value, true>(args...);
        else R::template run<decltype(t)::value, false>(args...);
    };
    if (type == GGML_TYPE_Q8_0) width(std::integral_constant<ggml_type, GGML_TYPE_Q8_0>{});
    else if (type == GGML_TYPE_Q4_0) width(std::integral_constant<ggml_type, GGML_TYPE_Q4_0>{});
    else width(std::integral_constant<ggml_type, GGML_TYPE_Q4_1>{});
}

#if defined(__GNUC__) && defined(__x86_64__)
#define DG_QUANT_PANELS_X86 1
// AVX-512 VNNI (kernel_isa() >= avx512vnni).
void panel_vnni(ggml_type type, int64_t M, int64_t nb, const ActBlock* act, const int32_t* corr,
                const uint8_t* panel, int64_t w, float* C, int64_t ldc);
// AVX2 (kernel_isa() >= avx2): vpmaddubsw's 16-bit sums.
void panel_avx2(ggml_type type, int64_t M, int64_t nb, const ActBlock* act, const int32_t* corr,
                const uint8_t* panel, int64_t w, float* C, int64_t ldc);
#endif

}  // namespace dg::kernels::panels
