// The AMX int8 products' algorithm (quant_amx.h), written once over the tile operations: `Tiles`
// is the real AMX (quant_amx.cpp) or its emulation (amx_emulated.h), with config, zero<t>,
// load<t>, dpbssd<c, a, b>, store<t> and release. The activations are rounded once per call and
// padded to whole tiles of 16 rows; the weights are packed a chunk of 64 columns at a time
// (padded to whole tiles of 16); for each block of 32 values, 2 x 2 tiles of 16 x 16 outputs get
// that block's exact int32 dot products (TDPBSSD), which are stored and scaled into f32 sums.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "amx_tile_config.h"
#include "quant_amx_pack.h"

namespace dg::kernels::amx {

constexpr int64_t kChunkColumns = 64;  // weight rows packed at a time (K bytes each, then kept in L2)

// The int32 sums of tile (I, J) (after zero + dpbssd) into f32 sums: acc is 32 x 32, rows 32 apart.
template <int I, int J, class Tiles>
inline void scale_tile(Tiles& t, int64_t nb, const float* da, const float* dw, float* acc) {
    alignas(64) int32_t sums[kTileRows * 16];
    t.template store<c_tile(I, J)>(sums, kTileBytes);
    scale_add(sums, da + I * kTileRows * nb, nb, dw + J * nb * 16, acc + I * kTileRows * 32 + J * 16, 32);
}

// MR x NR (1 or 2 each) tiles of 16 x 16 outputs over nb blocks into acc (32 x 32): aq, da the
// first activation tile's rows (K bytes and nb scales apart), wq, wd the first weight tile's
// blocks (pack_weights' layout, the next tile nb blocks on).
template <int MR, int NR, class Tiles>
void tile_sums(Tiles& t, int64_t nb, int64_t K, const int8_t* aq, const float* da, const int8_t* wq, const float* wd,
               float* acc) {
    std::fill(acc, acc + 32 * 32, 0.0f);
    for (int64_t b = 0; b < nb; ++b) {
        t.template load<a_tile(0)>(aq + b * kBlockValues, size_t(K));
        if constexpr (MR == 2) t.template load<a_tile(1)>(aq + kTileRows * K + b * kBlockValues, size_t(K));
        t.template load<b_tile(0)>(wq + b * 512, kTileBytes);
        if constexpr (NR == 2) t.template load<b_tile(1)>(wq + (nb + b) * 512, kTileBytes);
        t.template zero<c_tile(0, 0)>();
        t.template dpbssd<c_tile(0, 0), a_tile(0), b_tile(0)>();
        if constexpr (NR == 2) {
            t.template zero<c_tile(0, 1)>();
            t.template dpbssd<c_tile(0, 1), a_tile(0), b_tile(1)>();
        }
        if constexpr (MR == 2) {
            t.template zero<c_tile(1, 0)>();
            t.template dpbssd<c_tile(1, 0), a_tile(1), b_tile(0)>();
            if constexpr (NR == 2) {
                t.template zero<c_tile(1, 1)>();
                t.template dpbssd<c_tile(1, 1), a_tile(1), b_tile(1)>();
            }
        }
        const float* wdb = wd + b * 16;
        scale_tile<0, 0>(t, nb, da + b, wdb, acc);
        if constexpr (NR == 2) scale_tile<0, 1>(t, nb, da + b, wdb, acc);
        if constexpr (MR == 2) scale_tile<1, 0>(t, nb, da + b, wdb, acc);
        if constexpr (MR == 2 && NR == 2) scale_tile<1, 1>(t, nb, da + b, wdb, acc);
    }
}

// quant_gemm_nt's contract (q8_0 or q4_0 weights, any M >= 1) on the tiles `t`.
template <class Tiles>
void tile_gemm(Tiles& t, ggml_type type, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const char* W,
               size_t ldw, float* C, int64_t ldc) {
    const int64_t nb = K / kBlockValues;
    const int64_t mtiles = (M + kTileRows - 1) / kTileRows, rows = mtiles * kTileRows;
    // this thread's buffers, grown to the largest call seen
    thread_local std::vector<int8_t> aq, wq;
    thread_local std::vector<float> da, wd;
    if (aq.size() < size_t(rows * K)) aq.resize(size_t(rows * K)), da.resize(size_t(rows * nb));
    if (wq.size() < size_t(kChunkColumns * K))
        wq.resize(size_t(kChunkColumns * K)), wd.resize(size_t(kChunkColumns * nb));
    round_activations(M, rows, K, A, lda, aq.data(), da.data());
    alignas(64) float acc[32 * 32];
    t.config(int8_tile_config());
    for (int64_t c = 0; c < N; c += kChunkColumns) {
        const int64_t nc = std::min(kChunkColumns, N - c), ntiles = (nc + 15) / 16;
        pack_weights(type, nc, nb, W + size_t(c) * ldw, ldw, wq.data(), wd.data());
        for (int64_t mt = 0; mt < mtiles; mt += 2) {
            const int mr = mt + 1 < mtiles ? 2 : 1;
            const int8_t* a = aq.data() + mt * kTileRows * K;
            const float* ad = da.data() + mt * kTileRows * nb;
            for (int64_t nt = 0; nt < ntiles; nt += 2) {
                const int nr = nt + 1 < ntiles ? 2 : 1;
                const int8_t* w = wq.data() + nt * nb * 512;
                const float* wdt = wd.data() + nt * nb * 16;
                if (mr == 2 && nr == 2) tile_sums<2, 2>(t, nb, K, a, ad, w, wdt, acc);
                else if (mr == 2) tile_sums<2, 1>(t, nb, K, a, ad, w, wdt, acc);
                else if (nr == 2) tile_sums<1, 2>(t, nb, K, a, ad, w, wdt, acc);
                else tile_sums<1, 1>(t, nb, K, a, ad, w, wdt, acc);
                // the outputs inside M x N (the padding's are dropped)
                const int64_t m0 = mt * kTileRows, n0 = nt * 16;
                const int64_t mm = std::min<int64_t>(32, M - m0), nn = std::min<int64_t>(32, nc - n0);
                for (int64_t r = 0; r < mm; ++r)
                    std::copy(acc + r * 32, acc + r * 32 + nn, C + (m0 + r) * ldc + c + n0);
            }
        }
    }
    t.release();
}

}  // namespace dg::kernels::amx
