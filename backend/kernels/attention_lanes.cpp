#include "attention_lanes.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "fast_exp.h"
#include "vector_clones.h"

namespace dg::kernels {

namespace {

constexpr int64_t kKeyBlock = 512;  // S^T of a block: 512 keys x 16 rows, 32 KiB (the L1 cache)
constexpr int kTileKeys = 6;        // Q K^T tiles: 16 rows x 6 keys, 12 accumulators (16 AVX2 registers)
constexpr int kTileCols = 6;        // P V tiles: 16 rows x 6 value columns
constexpr int64_t kValueKeys = 64;  // P V: keys per pass of the column tiles (64 values of 128 floats: 32 KiB)
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// 8 floats as one value (GCC / Clang vector extension): one AVX register in the x86-64-v3 and v4
// variants, two SSE registers in the baseline. Loads and stores through memcpy: no alignment asked.
typedef float Vec8 __attribute__((vector_size(32)));
typedef int32_t Vec8i __attribute__((vector_size(32)));

// Two vectors' lanes picked by index (0-7 the first's, 8-15 the second's): GCC's and Clang's spellings.
#if defined(__clang__)
#define DG_SHUFFLE8(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define DG_SHUFFLE8(a, b, ...) __builtin_shuffle(a, b, Vec8i{__VA_ARGS__})
#endif

// Everything a DG_VECTOR_BODY calls is always inlined: it is then compiled for the body's level (a
// function merely inline may stay a call to its baseline SSE copy).
#define DG_INLINE inline __attribute__((always_inline))

DG_INLINE void load8(Vec8& v, const float* p) { std::memcpy(&v, p, sizeof v); }
DG_INLINE void store8(float* p, const Vec8& v) { std::memcpy(p, &v, sizeof v); }
DG_INLINE void max8(Vec8& m, const Vec8& v) { m = v > m ? v : m; }

// What the scores of a block of keys add or cut besides the scale (key n counted from the block's first):
struct BlockMask {
    const float* shared = nullptr;  // an f32 mask row all lanes share: shared[n] added to every lane
    const int32_t* shared_keep = nullptr;  // a bool mask row all lanes share: shared_keep[n] != 0 keeps key n
    const float* add = nullptr;     // an f32 mask per lane, transposed: add[n * 16 + l]
    const int32_t* keep = nullptr;  // a bool mask per lane, transposed: keep[n * 16 + l] != 0 keeps key n
    // causal: lane l keeps key n when n <= last[l]; keys below cut_from are kept by every lane
    const float* last = nullptr;
    int64_t cut_from = 0;
};

// St[n][0..16) = scale * sum_d Qt[d][0..16) K[n][d] for the NK keys j .. j + NK of the block, masked as
// bm says, the lanes' maxima into mx.
template <int NK>
DG_INLINE void scores_tile(int64_t D, const float* Qt, const float* K, int64_t ldk, float scale, const BlockMask& bm,
                           int64_t j, float* St, Vec8& mx0, Vec8& mx1) {
    Vec8 a[NK][2];
#pragma GCC unroll 8
    for (int n = 0; n < NK; ++n) a[n][0] = a[n][1] = Vec8{};
    for (int64_t d = 0; d < D; ++d) {
        Vec8 q0, q1;
        load8(q0, Qt + d * kLanes);
        load8(q1, Qt + d * kLanes + 8);
#pragma GCC unroll 8
        for (int n = 0; n < NK; ++n) {
            const float k = K[(j + n) * ldk + d];
            a[n][0] += k * q0;
            a[n][1] += k * q1;
        }
    }
    const Vec8 ninf = Vec8{} + kNegInf;
#pragma GCC unroll 8
    for (int n = 0; n < NK; ++n) {
        Vec8 s0 = a[n][0] * scale, s1 = a[n][1] * scale;
        const int64_t key = j + n, at = key * kLanes;
        if (bm.shared) s0 += bm.shared[key], s1 += bm.shared[key];
        if (bm.shared_keep && bm.shared_keep[key] == 0) s0 = ninf, s1 = ninf;
        if (bm.add) {
            Vec8 m0, m1;
            load8(m0, bm.add + at);
            load8(m1, bm.add + at + 8);
            s0 += m0, s1 += m1;
        }
        if (bm.keep) {
            Vec8i k0, k1;
            std::memcpy(&k0, bm.keep + at, sizeof k0);
            std::memcpy(&k1, bm.keep + at + 8, sizeof k1);
            s0 = k0 != 0 ? s0 : ninf;
            s1 = k1 != 0 ? s1 : ninf;
        }
        if (bm.last && key >= bm.cut_from) {
            Vec8 l0, l1;
            load8(l0, bm.last);
            load8(l1, bm.last + 8);
            s0 = float(key) <= l0 ? s0 : ninf;
            s1 = float(key) <= l1 ? s1 : ninf;
        }
        store8(St + at, s0);
        store8(St + at + 8, s1);
        max8(mx0, s0);
        max8(mx1, s1);
    }
}

// The scores of a block's nk keys for the 16 lanes (scores_tile), their maxima into mx[16].
DG_VECTOR_BODY void scores_body(int64_t D, int64_t nk, const float* Qt, const float* K, int64_t ldk, float scale,
                                const BlockMask& bm, float* St, float* mx) {
    Vec8 mx0, mx1;
    load8(mx0, mx);
    load8(mx1, mx + 8);
    int64_t j = 0;
    for (; j + kTileKeys <= nk; j += kTileKeys) scores_tile<kTileKeys>(D, Qt, K, ldk, scale, bm, j, St, mx0, mx1);
    switch (nk - j) {
        case 5: scores_tile<5>(D, Qt, K, ldk, scale, bm, j, St, mx0, mx1); break;
        case 4: scores_tile<4>(D, Qt, K, ldk, scale, bm, j, St, mx0, mx1); break;
        case 3: scores_tile<3>(D, Qt, K, ldk, scale, bm, j, St, mx0, mx1); break;
        case 2: scores_tile<2>(D, Qt, K, ldk, scale, bm, j, St, mx0, mx1); break;
        case 1: scores_tile<1>(D, Qt, K, ldk, scale, bm, j, St, mx0, mx1); break;
        default: break;
    }
    store8(mx, mx0);
    store8(mx + 8, mx1);
}
DG_VECTORIZED(void, scores, (int64_t D, int64_t nk, const float* Qt, const float* K, int64_t ldk, float scale,
                             const BlockMask& bm, float* St, float* mx),
              (D, nk, Qt, K, ldk, scale, bm, St, mx))

// St = e^(St - top) per lane (top finite, or 0 where a lane's keys are all masked out: its scores are
// -inf and become 0), the sums into sum[16].
DG_VECTOR_BODY void exp_sums_body(int64_t nk, float* St, const float* top, float* sum) {
    float acc[kLanes] = {};
    for (int64_t j = 0; j < nk; ++j) {
        float* s = St + j * kLanes;
#pragma omp simd
        for (int l = 0; l < kLanes; ++l) {
            const float e = exp_nonpositive(s[l] - top[l]);
            s[l] = e;
            acc[l] += e;
        }
    }
    for (int l = 0; l < kLanes; ++l) sum[l] += acc[l];
}
DG_VECTORIZED(void, exp_sums, (int64_t nk, float* St, const float* top, float* sum), (nk, St, top, sum))

// Ot[c][0..16) += sum_j Pt[j][0..16) V[j][c] for c < NC: the sums stay in registers while V's columns stream past.
template <int NC>
DG_INLINE void values_tile(int64_t nk, const float* Pt, const float* V, int64_t ldv, float* Ot) {
    Vec8 a[NC][2];
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) a[c][0] = a[c][1] = Vec8{};
    for (int64_t j = 0; j < nk; ++j) {
        Vec8 p0, p1;
        load8(p0, Pt + j * kLanes);
        load8(p1, Pt + j * kLanes + 8);
#pragma GCC unroll 8
        for (int c = 0; c < NC; ++c) {
            const float v = V[j * ldv + c];
            a[c][0] += v * p0;
            a[c][1] += v * p1;
        }
    }
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) {
        Vec8 o0, o1;
        load8(o0, Ot + c * kLanes);
        load8(o1, Ot + c * kLanes + 8);
        store8(Ot + c * kLanes, o0 + a[c][0]);
        store8(Ot + c * kLanes + 8, o1 + a[c][1]);
    }
}

DG_VECTOR_BODY void values_body(int64_t nk, int64_t Dv, const float* Pt, const float* V, int64_t ldv, float* Ot) {
    // chunks of keys whose values stay in L1 while every column tile passes over them
    for (int64_t j0 = 0; j0 < nk; j0 += kValueKeys) {
        const int64_t n = std::min(kValueKeys, nk - j0);
        const float* P = Pt + j0 * kLanes;
        const float* Vj = V + j0 * ldv;
        int64_t c = 0;
        for (; c + kTileCols <= Dv; c += kTileCols) values_tile<kTileCols>(n, P, Vj + c, ldv, Ot + c * kLanes);
        switch (Dv - c) {
            case 5: values_tile<5>(n, P, Vj + c, ldv, Ot + c * kLanes); break;
            case 4: values_tile<4>(n, P, Vj + c, ldv, Ot + c * kLanes); break;
            case 3: values_tile<3>(n, P, Vj + c, ldv, Ot + c * kLanes); break;
            case 2: values_tile<2>(n, P, Vj + c, ldv, Ot + c * kLanes); break;
            case 1: values_tile<1>(n, P, Vj + c, ldv, Ot + c * kLanes); break;
            default: break;
        }
    }
}
DG_VECTORIZED(void, values, (int64_t nk, int64_t Dv, const float* Pt, const float* V, int64_t ldv, float* Ot),
              (nk, Dv, Pt, V, ldv, Ot))

// Ot[c][l] *= a[l] for c < Dv.
DG_VECTOR_BODY void scale_lanes_body(int64_t Dv, float* Ot, const float* a) {
    for (int64_t c = 0; c < Dv; ++c) {
#pragma omp simd
        for (int l = 0; l < kLanes; ++l) Ot[c * kLanes + l] *= a[l];
    }
}
DG_VECTORIZED(void, scale_lanes, (int64_t Dv, float* Ot, const float* a), (Dv, Ot, a))

// out[n * 16 + l] = rows[l][n] (32-bit words) for n < nk and l < 16: 8 x 8 blocks transposed in
// registers (three rounds of shuffles), the keys past the last whole 8 one by one.
DG_VECTOR_BODY void transpose_rows_body(int64_t nk, const uint32_t* const* rows, uint32_t* out) {
    const int64_t whole = nk / 8 * 8;
    for (int l0 = 0; l0 < kLanes; l0 += 8) {
        for (int64_t n = 0; n < whole; n += 8) {
            Vec8i r[8], t[8], u[8];
            for (int i = 0; i < 8; ++i) std::memcpy(&r[i], rows[l0 + i] + n, sizeof(Vec8i));
            for (int i = 0; i < 8; i += 2) {
                t[i] = DG_SHUFFLE8(r[i], r[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
                t[i + 1] = DG_SHUFFLE8(r[i], r[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
            }
            for (int i = 0; i < 8; i += 4)
                for (int h = 0; h < 2; ++h) {
                    u[i + h] = DG_SHUFFLE8(t[i + h], t[i + h + 2], 0, 1, 8, 9, 4, 5, 12, 13);
                    u[i + h + 2] = DG_SHUFFLE8(t[i + h], t[i + h + 2], 2, 3, 10, 11, 6, 7, 14, 15);
                }
            // u[0]: keys 0 and 4 of rows 0..3; u[2]: keys 1 and 5; u[1]: 2 and 6; u[3]: 3 and 7 (u[4..7]: rows 4..7)
            constexpr int kKeyOf[4] = {0, 2, 1, 3};
            for (int i = 0; i < 4; ++i) {
                const Vec8i lo = DG_SHUFFLE8(u[i], u[i + 4], 0, 1, 2, 3, 8, 9, 10, 11);
                const Vec8i hi = DG_SHUFFLE8(u[i], u[i + 4], 4, 5, 6, 7, 12, 13, 14, 15);
                std::memcpy(out + (n + kKeyOf[i]) * kLanes + l0, &lo, sizeof lo);
                std::memcpy(out + (n + kKeyOf[i] + 4) * kLanes + l0, &hi, sizeof hi);
            }
        }
    }
    for (int64_t n = whole; n < nk; ++n)
        for (int l = 0; l < kLanes; ++l) out[n * kLanes + l] = rows[l][n];
}
DG_VECTORIZED(void, transpose_rows, (int64_t nk, const uint32_t* const* rows, uint32_t* out), (nk, rows, out))

// The block's mask (keys j0 .. j0 + nk) of each lane, transposed into out (as 32-bit words: f32 or
// I32 as stored); the lanes past the rows read row 0's.
void transpose_mask(int64_t nk, const LaneGroup& g, int64_t j0, uint32_t* out) {
    const uint32_t* rows[kLanes];
    for (int l = 0; l < kLanes; ++l) rows[l] = static_cast<const uint32_t*>(g.mask[l < g.nq ? l : 0]) + j0;
    transpose_rows(nk, rows, out);
}

// Whether the group's mask rows hold the same words over keys j0 .. j0 + nk.
bool rows_equal(const LaneGroup& g, int64_t j0, int64_t nk) {
    const char* first = static_cast<const char*>(g.mask[0]) + j0 * 4;
    for (int l = 1; l < g.nq; ++l)
        if (std::memcmp(static_cast<const char*>(g.mask[l]) + j0 * 4, first, size_t(nk) * 4) != 0) return false;
    return true;
}

}  // namespace

void attention_lanes(const LaneGroup& g) {
    thread_local std::vector<float> qt, st, ot;
    if (qt.size() < size_t(g.D * kLanes)) qt.resize(size_t(g.D * kLanes));
    if (st.size() < size_t(kKeyBlock * kLanes)) st.resize(size_t(kKeyBlock * kLanes));
    if (ot.size() < size_t(g.Dv * kLanes)) ot.resize(size_t(g.Dv * kLanes));
    float* Qt = qt.data();
    float* St = st.data();
    float* Ot = ot.data();
    // Q^T, the lanes past the group's rows zeros (their scores 0, their results never written)
    for (int64_t d = 0; d < g.D; ++d)
        for (int l = 0; l < kLanes; ++l) Qt[d * kLanes + l] = l < g.nq ? g.Q[l * g.ldq + d] : 0.0f;
    std::fill(Ot, Ot + g.Dv * kLanes, 0.0f);
    // the lanes past the rows read row 0's mask and see every key the rows see
    int64_t nkeys = g.nkeys, first_cut = 0;
    if (g.causal) {
        int64_t lo = g.nkeys, hi = -1;
        for (int l = 0; l < g.nq; ++l) lo = std::min(lo, g.last_key[l]), hi = std::max(hi, g.last_key[l]);
        nkeys = std::min(nkeys, hi + 1);
        first_cut = lo + 1;
    }
    const bool any_mask = g.mask[0] != nullptr;
    const bool per_lane = any_mask && !g.shared_mask;  // transposed into mt per block
    thread_local std::vector<uint32_t> mt;
    if (per_lane && mt.size() < size_t(kKeyBlock * kLanes)) mt.resize(size_t(kKeyBlock * kLanes));

    float run_max[kLanes], run_sum[kLanes] = {}, mx[kLanes], top[kLanes], a[kLanes], last[kLanes];
    std::fill(run_max, run_max + kLanes, kNegInf);
    for (int64_t j0 = 0; j0 < nkeys; j0 += kKeyBlock) {
        const int64_t nk = std::min(kKeyBlock, nkeys - j0);
        BlockMask bm;
        if (g.causal) {  // the last keys counted from the block's first, clamped to [-1, nk]: exact as floats
            for (int l = 0; l < kLanes; ++l)
                last[l] = float(std::clamp<int64_t>((l < g.nq ? g.last_key[l] : nkeys - 1) - j0, -1, nk));
            bm.last = last;
            bm.cut_from = std::max<int64_t>(first_cut - j0, 0);
        }
        // a mask row per query whose rows are the same over this block (a padding mask expanded to
        // [b, 1, s, s], as transformers passes it) is read as one shared row: a compare, not a transpose
        const bool same = !per_lane || rows_equal(g, j0, nk);
        if (any_mask && same && g.mask_i32) bm.shared_keep = static_cast<const int32_t*>(g.mask[0]) + j0;
        else if (any_mask && same) bm.shared = static_cast<const float*>(g.mask[0]) + j0;
        if (!same) {
            transpose_mask(nk, g, j0, mt.data());
            if (g.mask_i32) bm.keep = reinterpret_cast<const int32_t*>(mt.data());
            else bm.add = reinterpret_cast<const float*>(mt.data());
        }
        std::fill(mx, mx + kLanes, kNegInf);
        scores(g.D, nk, Qt, g.K + j0 * g.ldk, g.ldk, g.scale, bm, St, mx);
        bool rescale = false;
        for (int l = 0; l < kLanes; ++l) {
            const float old = run_max[l], t = std::max(old, mx[l]);
            a[l] = 1.0f;
            if (old != t && old != kNegInf) {
                a[l] = exp_nonpositive(old - t);
                run_sum[l] *= a[l];
                rescale = true;
            }
            run_max[l] = t;
            top[l] = t == kNegInf ? 0.0f : t;  // every key so far masked out: e^(-inf - 0) = 0
        }
        if (rescale) scale_lanes(g.Dv, Ot, a);
        exp_sums(nk, St, top, run_sum);
        values(nk, g.Dv, St, g.V + j0 * g.ldv, g.ldv, Ot);
    }
    for (int l = 0; l < g.nq; ++l) {
        const float inv = run_sum[l] > 0.0f ? 1.0f / run_sum[l] : 0.0f;
        float* o = g.O + l * g.ldo;
        for (int64_t c = 0; c < g.Dv; ++c) o[c] = Ot[c * kLanes + l] * inv;
    }
}

}  // namespace dg::kernels
