#include "amx_emulated.h"

#include <cstring>
#include <stdexcept>
#include <string>

namespace dg::kernels::amx {

namespace {

[[noreturn]] void fault(const std::string& what) { throw std::logic_error("emulated AMX: " + what); }

}  // namespace

void EmulatedTiles::config(const TileConfig& cfg) {
    if (cfg.palette != 1) fault("palette " + std::to_string(cfg.palette) + " (only palette 1 is emulated)");
    if (cfg.start_row != 0) fault("start_row is not 0");
    for (int t = 0; t < 16; ++t) {
        const bool used = cfg.rows[t] != 0 || cfg.colsb[t] != 0;
        if (t >= 8 && used) fault("tile " + std::to_string(t) + " configured (palette 1 has 8)");
        const bool shape_ok =
            cfg.rows[t] <= kTileRows && cfg.colsb[t] <= kTileBytes && (cfg.rows[t] == 0) == (cfg.colsb[t] == 0);
        if (t < 8 && !shape_ok)
            fault("tile " + std::to_string(t) + " shape " + std::to_string(cfg.rows[t]) + " x " +
                  std::to_string(cfg.colsb[t]) + " bytes");
        if (t < 8) rows_[t] = cfg.rows[t], colsb_[t] = cfg.colsb[t];
    }
    std::memset(data_, 0, sizeof(data_));
    configured_ = true;
}

void EmulatedTiles::release() {
    configured_ = false;
    std::memset(rows_, 0, sizeof(rows_));
    std::memset(colsb_, 0, sizeof(colsb_));
    std::memset(data_, 0, sizeof(data_));
}

void EmulatedTiles::check(int t) const {
    if (!configured_) fault("a tile operation without a configuration");
    if (t < 0 || t >= 8 || rows_[t] == 0) fault("tile " + std::to_string(t) + " is not configured");
}

void EmulatedTiles::zero_tile(int t) {
    check(t);
    std::memset(data_[t], 0, sizeof(data_[t]));
}

void EmulatedTiles::load_tile(int t, const void* p, size_t stride) {
    check(t);
    std::memset(data_[t], 0, sizeof(data_[t]));
    for (int r = 0; r < rows_[t]; ++r) std::memcpy(data_[t][r], static_cast<const char*>(p) + r * stride, colsb_[t]);
}

void EmulatedTiles::store_tile(int t, void* p, size_t stride) const {
    check(t);
    for (int r = 0; r < rows_[t]; ++r) std::memcpy(static_cast<char*>(p) + r * stride, data_[t][r], colsb_[t]);
}

void EmulatedTiles::dot(int c, int a, int b) {
    check(c), check(a), check(b);
    if (c == a || c == b || a == b) fault("TDPBSSD with a tile used twice");
    if (colsb_[a] % 4 != 0 || colsb_[a] / 4 != rows_[b]) fault("TDPBSSD: A's colsb / 4 is not B's rows");
    if (colsb_[c] != colsb_[b]) fault("TDPBSSD: C's colsb is not B's");
    if (rows_[c] != rows_[a]) fault("TDPBSSD: C's rows are not A's");
    const auto* A = reinterpret_cast<const int8_t(*)[kTileBytes]>(data_[a]);
    const auto* B = reinterpret_cast<const int8_t(*)[kTileBytes]>(data_[b]);
    for (int m = 0; m < rows_[c]; ++m) {
        for (int n = 0; n < colsb_[c] / 4; ++n) {
            int32_t sum;
            std::memcpy(&sum, &data_[c][m][4 * n], 4);
            uint32_t s = uint32_t(sum);  // wraps as the hardware does (the products here never do)
            for (int k4 = 0; k4 < rows_[b]; ++k4)
                for (int i = 0; i < 4; ++i) s += uint32_t(int32_t(A[m][4 * k4 + i]) * int32_t(B[k4][4 * n + i]));
            sum = int32_t(s);
            std::memcpy(&data_[c][m][4 * n], &sum, 4);
        }
        // the bytes of the row past colsb are zeroed (none in palette 1's full rows)
        std::memset(&data_[c][m][colsb_[c]], 0, kTileBytes - colsb_[c]);
    }
}

}  // namespace dg::kernels::amx
