// The AMX tile operations the int8 products use (quant_amx_tiles.h), emulated in plain C++ on 8
// tile registers as Intel documents them, so that the products' algorithm runs and is tested on
// any CPU. An operation the hardware would refuse (#UD: no configuration, a shape past palette
// 1's 16 rows x 64 bytes, TDPBSSD operands whose shapes do not match) throws std::logic_error.
#pragma once

#include <cstddef>
#include <cstdint>

#include "amx_tile_config.h"

namespace dg::kernels::amx {

class EmulatedTiles {
public:
    // LDTILECFG: the shapes of the 8 tiles, all zeroed.
    void config(const TileConfig& cfg);
    // TILEZERO
    template <int T>
    void zero() { zero_tile(T); }
    // TILELOADD: the tile's rows (colsb bytes each) from p, stride bytes apart; the rest zeroed.
    template <int T>
    void load(const void* p, size_t stride) { load_tile(T, p, stride); }
    // TDPBSSD: C[m][n] (int32) += sum_{k4, i < 4} A[m][4 k4 + i] * B[k4][4 n + i], signed bytes.
    template <int C, int A, int B>
    void dpbssd() { dot(C, A, B); }
    // TILESTORED
    template <int T>
    void store(void* p, size_t stride) const { store_tile(T, p, stride); }
    // TILERELEASE: back to the unconfigured state.
    void release();

private:
    void zero_tile(int t);
    void load_tile(int t, const void* p, size_t stride);
    void dot(int c, int a, int b);
    void store_tile(int t, void* p, size_t stride) const;
    void check(int t) const;

    bool configured_ = false;
    uint8_t rows_[8] = {};
    uint16_t colsb_[8] = {};
    alignas(64) uint8_t data_[8][kTileRows][kTileBytes] = {};
};

}  // namespace dg::kernels::amx
