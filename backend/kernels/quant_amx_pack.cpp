#include "quant_amx_pack.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "isa.h"
#include "quant_act.h"
#include "quant_blocks.h"

namespace dg::kernels::amx {

namespace {

constexpr int kB = kQuantBlock;

// A block's 32 values as signed bytes: q8_0 as stored, q4_0 nibble - 8 (low nibbles first).
template <ggml_type T>
const char* block_values(const char* p, int8_t* v, float& d) {
    if constexpr (T == GGML_TYPE_Q8_0) {
        const auto* b = reinterpret_cast<const BlockQ8_0*>(p);
        d = ggml_fp16_to_fp32(b->d);
        std::memcpy(v, b->qs, kB);
        return p + sizeof(BlockQ8_0);
    } else {
        const auto* b = reinterpret_cast<const BlockQ4_0*>(p);
        d = ggml_fp16_to_fp32(b->d);
        for (int i = 0; i < kB / 2; ++i) {
            v[i] = int8_t((b->qs[i] & 0x0F) - 8);
            v[i + kB / 2] = int8_t((b->qs[i] >> 4) - 8);
        }
        return p + sizeof(BlockQ4_0);
    }
}

template <ggml_type T>
void pack(int64_t n, int64_t nb, const char* W, size_t ldw, int8_t* q, float* d) {
    const int64_t tiles = (n + 15) / 16;
    if (n % 16 != 0) {  // the last tile's missing columns
        std::memset(q + (tiles - 1) * nb * 512, 0, size_t(nb) * 512);
        std::fill(d + (tiles - 1) * nb * 16, d + tiles * nb * 16, 0.0f);
    }
    int8_t v[kB];
    for (int64_t col = 0; col < n; ++col) {
        const int64_t t = col / 16, j = col % 16;
        const char* p = W + size_t(col) * ldw;
        for (int64_t b = 0; b < nb; ++b) {
            p = block_values<T>(p, v, d[(t * nb + b) * 16 + j]);
            int8_t* dst = q + (t * nb + b) * 512 + 4 * j;
            for (int k4 = 0; k4 < kB / 4; ++k4) std::memcpy(dst + 64 * k4, v + 4 * k4, 4);
        }
    }
}

}  // namespace

float round_block(const float* x, int8_t* q) {
    // quant_act.cpp's rule: a NaN, or amax past 3.4e38, makes the scale NaN
    float amax = 0.0f;
    bool nan = false;
    for (int i = 0; i < kB; ++i) {
        nan = nan || std::isnan(x[i]);
        amax = std::max(amax, std::fabs(x[i]));
    }
    const bool finite = !nan && amax <= 3.4e38f;
    const float id = finite && amax > 0.0f ? 127.0f / amax : 0.0f;
    for (int i = 0; i < kB; ++i) {
        // nearest, ties to even (the default rounding mode), as cvtps2dq; kept in [-127, 127]
        const float r = finite ? std::nearbyint(x[i] * id) : 0.0f;
        q[i] = int8_t(r > 127.0f ? 127 : r < -127.0f ? -127 : r);
    }
    return finite ? amax / 127.0f : std::nanf("");
}

void round_activations(int64_t M, int64_t rows, int64_t K, const float* A, int64_t lda, int8_t* q, float* d) {
    const int64_t nb = K / kB;
    thread_local std::vector<ActBlock> row;
    if (row.size() < size_t(nb)) row.resize(size_t(nb));
    const bool avx2 = kernel_isa() >= Isa::avx2;
    for (int64_t m = 0; m < M; ++m) {
        int8_t* qm = q + m * K;
        float* dm = d + m * nb;
        if (avx2) {
            quantize_act_row(A + m * lda, nb, row.data());
            for (int64_t b = 0; b < nb; ++b) dm[b] = row[size_t(b)].d, std::memcpy(qm + b * kB, row[size_t(b)].qs, kB);
        } else {
            for (int64_t b = 0; b < nb; ++b) dm[b] = round_block(A + m * lda + b * kB, qm + b * kB);
        }
    }
    std::memset(q + M * K, 0, size_t((rows - M) * K));
    std::fill(d + M * nb, d + rows * nb, 0.0f);
}

void pack_weights(ggml_type type, int64_t n, int64_t nb, const char* W, size_t ldw, int8_t* q, float* d) {
    if (type == GGML_TYPE_Q8_0) return pack<GGML_TYPE_Q8_0>(n, nb, W, ldw, q, d);
    pack<GGML_TYPE_Q4_0>(n, nb, W, ldw, q, d);
}

void scale_add(const int32_t* sums, const float* da, int64_t nb, const float* dw, float* acc, int ldacc) {
    for (int r = 0; r < 16; ++r) {
        const float a = da[r * nb];
        for (int j = 0; j < 16; ++j) acc[r * ldacc + j] += float(sums[r * 16 + j]) * (dw[j] * a);
    }
}

}  // namespace dg::kernels::amx
