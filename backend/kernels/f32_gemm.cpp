#include "f32_gemm.h"

#include <algorithm>
#include <vector>

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define DG_F32_GEMM_X86 1
#endif

namespace dg::kernels {

#ifdef DG_F32_GEMM_X86

namespace {

struct alignas(64) Block16 {
    float v[16];
};

constexpr int kTileRows = 8;     // activation rows per tile
constexpr int kTileWeights = 3;  // weight rows per tile
// weight rows per chunk: every tile of rows passes over a chunk while it is in L2
constexpr int64_t kChunkBytes = 256 << 10;
// K in blocks of at most this many values: a tile's 8 activation rows of a block stay in L1 (16 KiB)
constexpr int64_t kKBlock = 512;

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx2,fma")
#include "lane_sums_avx512.inc"

// The sums of MR activation rows times NR weight rows over k in [k0, k1)
// (the last K % 16 with masked loads), in 16 lanes each: started from zero
// (first) or from `part`, then stored to `part` or, for the last block of K,
// summed into C[MR, NR]. Ap: the tile's packed rows from k0 (blocks of 16
// values of the MR rows in turn, zeros past K).
template <int MR, int NR>
void tile(int64_t k0, int64_t k1, int64_t K, const float* Ap, const float* W, int64_t ldw, Block16* part, bool first,
          bool last, float* C, int64_t ldc) {
    __m512 acc[MR][NR];
#pragma GCC unroll 32
    for (int i = 0; i < MR * NR; ++i) acc[i / NR][i % NR] = first ? _mm512_setzero_ps() : _mm512_load_ps(part[i].v);
    for (int64_t k = k0; k < k1; k += 16, Ap += 16 * MR) {
        __m512 w[NR];
        if (k + 16 <= K) {
            for (int j = 0; j < NR; ++j) w[j] = _mm512_loadu_ps(W + j * ldw + k);
        } else {
            const __mmask16 mask = __mmask16((1u << (K - k)) - 1);
            for (int j = 0; j < NR; ++j) w[j] = _mm512_maskz_loadu_ps(mask, W + j * ldw + k);
        }
        for (int m = 0; m < MR; ++m) {
            const __m512 a = _mm512_load_ps(Ap + 16 * m);
            for (int j = 0; j < NR; ++j) acc[m][j] = _mm512_fmadd_ps(a, w[j], acc[m][j]);
        }
    }
    if (last) return store_sums<MR, NR>(acc, C, ldc);
#pragma GCC unroll 32
    for (int i = 0; i < MR * NR; ++i) _mm512_store_ps(part[i].v, acc[i / NR][i % NR]);
}

using TileFn = void (*)(int64_t, int64_t, int64_t, const float*, const float*, int64_t, Block16*, bool, bool, float*,
                        int64_t);

// tile<mr, nr> for mr in 1..kTileRows, nr in 1..kTileWeights
template <int MR = kTileRows, int NR = kTileWeights>
TileFn tile_fn(int mr, int nr) {
    if (mr == MR && nr == NR) return tile<MR, NR>;
    if constexpr (NR > 1) {
        if (mr == MR) return tile_fn<MR, NR - 1>(mr, nr);
    }
    if constexpr (MR > 1) return tile_fn<MR - 1, NR>(mr, nr);
    return nullptr;
}

// A's rows in tiles of kTileRows: per tile, blocks of 16 values of each row in turn, zeros past K
void pack_rows(int64_t M, int64_t K, const float* A, int64_t lda, float* Ap) {
    const int64_t kp = (K + 15) / 16 * 16;
    for (int64_t m0 = 0; m0 < M; m0 += kTileRows) {
        const int64_t mr = std::min<int64_t>(kTileRows, M - m0);
        float* t = Ap + m0 * kp;
        for (int64_t k = 0; k < kp; k += 16) {
            const __mmask16 mask = k + 16 <= K ? __mmask16(0xFFFF) : __mmask16((1u << (K - k)) - 1);
            for (int64_t r = 0; r < mr; ++r, t += 16)
                _mm512_store_ps(t, _mm512_maskz_loadu_ps(mask, A + (m0 + r) * lda + k));
        }
    }
}

#pragma GCC pop_options

}  // namespace

void f32_gemm_nt(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* W, int64_t ldw, float* C,
                 int64_t ldc) {
    const int64_t kp = (K + 15) / 16 * 16;
    thread_local std::vector<Block16> packed, parts;  // grow to the largest sizes seen by this thread
    if (packed.size() < size_t(M * kp / 16)) packed.resize(size_t(M * kp / 16));
    float* Ap = packed.data()->v;
    pack_rows(M, K, A, lda, Ap);
    // K in nkb blocks of kb values (a multiple of 16)
    const int64_t nkb = (kp + kKBlock - 1) / kKBlock;
    const int64_t kb = (kp / 16 + nkb - 1) / nkb * 16;
    const int64_t chunk = std::max<int64_t>(kTileWeights, kChunkBytes / (K * int64_t(sizeof(float))) /
                                                              kTileWeights * kTileWeights);
    const int64_t mtiles = (M + kTileRows - 1) / kTileRows, ntiles = (chunk + kTileWeights - 1) / kTileWeights;
    if (nkb > 1 && parts.size() < size_t(mtiles * ntiles * kTileRows * kTileWeights))
        parts.resize(size_t(mtiles * ntiles * kTileRows * kTileWeights));
    for (int64_t c = 0; c < N; c += chunk) {
        const int64_t nc = std::min(chunk, N - c);
        const float* Wc = W + c * ldw;
        // the next chunk's weights are prefetched into L2 while this one is computed, a share per tile
        const char* next = reinterpret_cast<const char*>(Wc + nc * ldw);
        const size_t next_bytes = size_t(std::min(chunk, N - c - nc)) * size_t(ldw) * sizeof(float);
        const size_t share = (next_bytes / size_t(nkb * mtiles * ((nc + kTileWeights - 1) / kTileWeights)) + 63) / 64 * 64;
        size_t fetched = 0;
        for (int64_t k0 = 0; k0 < kp; k0 += kb) {
            const int64_t k1 = std::min(kp, k0 + kb);
            for (int64_t m = 0; m < M; m += kTileRows) {
                const int mr = int(std::min<int64_t>(kTileRows, M - m));
                for (int64_t n = 0; n < nc; n += kTileWeights) {
                    const int nr = int(std::min<int64_t>(kTileWeights, nc - n));
                    for (size_t end = std::min(next_bytes, fetched + share); fetched < end; fetched += 64)
                        _mm_prefetch(next + fetched, _MM_HINT_T1);
                    // the partial sums of this tile between K blocks (none when K is one block)
                    Block16* part = nkb > 1 ? parts.data() + ((m / kTileRows) * ntiles + n / kTileWeights) *
                                                                 kTileRows * kTileWeights
                                            : nullptr;
                    tile_fn(mr, nr)(k0, k1, K, Ap + m * kp + k0 * mr, Wc + n * ldw, ldw, part, k0 == 0, k1 == kp,
                                    C + m * ldc + c + n, ldc);
                }
            }
        }
    }
}

#else  // not x86-64: never called (isa.h)

void f32_gemm_nt(int64_t, int64_t, int64_t, const float*, int64_t, const float*, int64_t, float*, int64_t) {}

#endif

}  // namespace dg::kernels
