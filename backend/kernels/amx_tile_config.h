// The AMX tile configuration (LDTILECFG's 64-byte operand, palette 1: 8 tiles of up to 16 rows x
// 64 bytes) and the tiles the int8 products use (quant_amx_tiles.h).
#pragma once

#include <cstdint>

namespace dg::kernels::amx {

struct alignas(64) TileConfig {
    uint8_t palette = 0;
    uint8_t start_row = 0;
    uint8_t reserved[14] = {};
    uint16_t colsb[16] = {};  // bytes per row of tile t (t < 8 in palette 1)
    uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64, "LDTILECFG reads 64 bytes");

constexpr int kTileRows = 16;   // the most rows of a tile
constexpr int kTileBytes = 64;  // the most bytes of a tile row
constexpr int kBlockValues = 32;

// The 8 tiles: the int32 sums of 2 x 2 tiles of 16 x 16 outputs, 2 activation tiles (16 rows x one
// block: 32 bytes) and 2 weight tiles (16 columns x one block in the B layout: 8 rows x 64 bytes).
constexpr int c_tile(int i, int j) { return 2 * i + j; }
constexpr int a_tile(int i) { return 4 + i; }
constexpr int b_tile(int j) { return 6 + j; }

inline TileConfig int8_tile_config() {
    TileConfig c;
    c.palette = 1;
    for (int i = 0; i < 2; ++i) {
        c.rows[a_tile(i)] = kTileRows, c.colsb[a_tile(i)] = kBlockValues;
        c.rows[b_tile(i)] = kBlockValues / 4, c.colsb[b_tile(i)] = kTileBytes;
        for (int j = 0; j < 2; ++j) c.rows[c_tile(i, j)] = kTileRows, c.colsb[c_tile(i, j)] = kTileBytes;
    }
    return c;
}

}  // namespace dg::kernels::amx
