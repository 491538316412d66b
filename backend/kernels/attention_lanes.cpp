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
// Q K^T tiles: 16 rows x kTileKeys keys, P V tiles: 16 rows x kTileCols value columns (the
// accumulators: 12 of the 16 AVX2 registers as two halves of 8 lanes; with AVX-512 12 of 32, 16 lanes
// in one register: Wide below)
constexpr int kTileKeys = 6;
constexpr int kTileCols = 6;
constexpr int kWideTileKeys = 12;
constexpr int kWideTileCols = 12;
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

// name(args): body<L, tile>(args) at vector_level()'s level (vector_clones.h), the 16 lanes as one
// 512-bit vector (Vec16, `wide` a tile) in the x86-64-v4 variant, as two of 256 or 128 bits (Pair,
// `narrow` a tile) in the others: the same sums in the same order, so the same bits.
#define DG_BY_WIDTH(ret, name, params, body, narrow, wide, args)                                 \
    DG_VECTOR_LEVELS("arch=x86-64-v4", ret, name, params, args, (body<Vec16, wide> args), \
                     (body<Pair, narrow> args), (body<Pair, narrow> args))

DG_INLINE void load8(Vec8& v, const float* p) { std::memcpy(&v, p, sizeof v); }
DG_INLINE void store8(float* p, const Vec8& v) { std::memcpy(p, &v, sizeof v); }
DG_INLINE void max8(Vec8& m, const Vec8& v) { m = v > m ? v : m; }

// The 16 lanes of the tiles below, held as two vectors of 8 (Pair: the x86-64-v3 and baseline variants)
// or as one of 16 (Vec16: the x86-64-v4 variant only; GCC spills it to memory where a register has 8).
// The same operations in the same order on every lane: the same bits either way.
struct Pair {
    Vec8 lo, hi;
};
typedef float Vec16 __attribute__((vector_size(64)));
typedef int32_t Vec16i __attribute__((vector_size(64)));

DG_INLINE void zero16(Pair& v) { v.lo = v.hi = Vec8{}; }
DG_INLINE void zero16(Vec16& v) { v = Vec16{}; }
DG_INLINE void load16(Pair& v, const float* p) { load8(v.lo, p), load8(v.hi, p + 8); }
DG_INLINE void load16(Vec16& v, const float* p) { std::memcpy(&v, p, sizeof v); }
DG_INLINE void store16(float* p, const Pair& v) { store8(p, v.lo), store8(p + 8, v.hi); }
DG_INLINE void store16(float* p, const Vec16& v) { std::memcpy(p, &v, sizeof v); }
DG_INLINE void fma16(Pair& a, float k, const Pair& q) { a.lo += k * q.lo, a.hi += k * q.hi; }
DG_INLINE void fma16(Vec16& a, float k, const Vec16& q) { a += k * q; }
DG_INLINE void mul16(Pair& a, float k) { a.lo *= k, a.hi *= k; }
DG_INLINE void mul16(Vec16& a, float k) { a *= k; }
DG_INLINE void add16(Pair& a, float k) { a.lo += k, a.hi += k; }
DG_INLINE void add16(Vec16& a, float k) { a += k; }
DG_INLINE void add16(Pair& a, const Pair& b) { a.lo += b.lo, a.hi += b.hi; }
DG_INLINE void add16(Vec16& a, const Vec16& b) { a += b; }
DG_INLINE void max16(Pair& m, const Pair& v) { max8(m.lo, v.lo), max8(m.hi, v.hi); }
DG_INLINE void max16(Vec16& m, const Vec16& v) { m = v > m ? v : m; }
DG_INLINE void fill16(Pair& v, float x) { v.lo = v.hi = Vec8{} + x; }
DG_INLINE void fill16(Vec16& v, float x) { v = Vec16{} + x; }
// lane l becomes `x` where keep[l] == 0
DG_INLINE void cut16(Pair& v, const int32_t* keep, float x) {
    Vec8i k0, k1;
    std::memcpy(&k0, keep, sizeof k0);
    std::memcpy(&k1, keep + 8, sizeof k1);
    v.lo = k0 != 0 ? v.lo : Vec8{} + x;
    v.hi = k1 != 0 ? v.hi : Vec8{} + x;
}
DG_INLINE void cut16(Vec16& v, const int32_t* keep, float x) {
    Vec16i k;
    std::memcpy(&k, keep, sizeof k);
    v = k != 0 ? v : Vec16{} + x;
}
// lane l becomes `x` where key > last[l]
DG_INLINE void cut_after16(Pair& v, float key, const float* last, float x) {
    Vec8 l0, l1;
    load8(l0, last);
    load8(l1, last + 8);
    v.lo = key <= l0 ? v.lo : Vec8{} + x;
    v.hi = key <= l1 ? v.hi : Vec8{} + x;
}
DG_INLINE void cut_after16(Vec16& v, float key, const float* last, float x) {
    Vec16 l;
    std::memcpy(&l, last, sizeof l);
    v = key <= l ? v : Vec16{} + x;
}

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
// bm says, the lanes' maxima into mx (L: Pair or Vec16).
template <class L, int NK>
DG_INLINE void scores_tile(int64_t D, const float* Qt, const float* K, int64_t ldk, float scale, const BlockMask& bm,
                           int64_t j, float* St, L& mx) {
    L a[NK];
#pragma GCC unroll 16
    for (int n = 0; n < NK; ++n) zero16(a[n]);
    for (int64_t d = 0; d < D; ++d) {
        L q;
        load16(q, Qt + d * kLanes);
#pragma GCC unroll 16
        for (int n = 0; n < NK; ++n) fma16(a[n], K[(j + n) * ldk + d], q);
    }
#pragma GCC unroll 16
    for (int n = 0; n < NK; ++n) {
        L s = a[n];
        mul16(s, scale);
        const int64_t key = j + n, at = key * kLanes;
        if (bm.shared) add16(s, bm.shared[key]);
        if (bm.shared_keep && bm.shared_keep[key] == 0) fill16(s, kNegInf);
        if (bm.add) {
            L m;
            load16(m, bm.add + at);
            add16(s, m);
        }
        if (bm.keep) cut16(s, bm.keep + at, kNegInf);
        if (bm.last && key >= bm.cut_from) cut_after16(s, float(key), bm.last, kNegInf);
        store16(St + at, s);
        max16(mx, s);
    }
}

// The scores of a block's nk keys for the 16 lanes (scores_tile, TK keys a tile), their maxima into mx[16].
template <class L, int TK>
DG_INLINE void scores_lanes(int64_t D, int64_t nk, const float* Qt, const float* K, int64_t ldk, float scale,
                            const BlockMask& bm, float* St, float* mx) {
    L m;
    load16(m, mx);
    int64_t j = 0;
    for (; j + TK <= nk; j += TK) scores_tile<L, TK>(D, Qt, K, ldk, scale, bm, j, St, m);
    // the keys left, fewer than a tile: a tile of 4 and of 2 where they fit, then one
    if constexpr (TK > 4)
        for (; j + 4 <= nk; j += 4) scores_tile<L, 4>(D, Qt, K, ldk, scale, bm, j, St, m);
    for (; j + 2 <= nk; j += 2) scores_tile<L, 2>(D, Qt, K, ldk, scale, bm, j, St, m);
    if (j < nk) scores_tile<L, 1>(D, Qt, K, ldk, scale, bm, j, St, m);
    store16(mx, m);
}
DG_BY_WIDTH(void, scores, (int64_t D, int64_t nk, const float* Qt, const float* K, int64_t ldk, float scale,
                           const BlockMask& bm, float* St, float* mx),
            scores_lanes, kTileKeys, kWideTileKeys, (D, nk, Qt, K, ldk, scale, bm, St, mx))

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
DG_VECTORIZED_512(void, exp_sums, (int64_t nk, float* St, const float* top, float* sum), (nk, St, top, sum))

// Ot[c][0..16) += sum_j Pt[j][0..16) V[j][c] for c < NC: the sums stay in registers while V's columns stream past.
template <class L, int NC>
DG_INLINE void values_tile(int64_t nk, const float* Pt, const float* V, int64_t ldv, float* Ot) {
    L a[NC];
#pragma GCC unroll 16
    for (int c = 0; c < NC; ++c) zero16(a[c]);
    for (int64_t j = 0; j < nk; ++j) {
        L p;
        load16(p, Pt + j * kLanes);
#pragma GCC unroll 16
        for (int c = 0; c < NC; ++c) fma16(a[c], V[j * ldv + c], p);
    }
#pragma GCC unroll 16
    for (int c = 0; c < NC; ++c) {
        L o;
        load16(o, Ot + c * kLanes);
        add16(o, a[c]);
        store16(Ot + c * kLanes, o);
    }
}

template <class L, int TC>
DG_INLINE void values_lanes(int64_t nk, int64_t Dv, const float* Pt, const float* V, int64_t ldv, float* Ot) {
    // chunks of keys whose values stay in L1 while every column tile passes over them
    for (int64_t j0 = 0; j0 < nk; j0 += kValueKeys) {
        const int64_t n = std::min(kValueKeys, nk - j0);
        const float* P = Pt + j0 * kLanes;
        const float* Vj = V + j0 * ldv;
        int64_t c = 0;
        for (; c + TC <= Dv; c += TC) values_tile<L, TC>(n, P, Vj + c, ldv, Ot + c * kLanes);
        if constexpr (TC > 4)
            for (; c + 4 <= Dv; c += 4) values_tile<L, 4>(n, P, Vj + c, ldv, Ot + c * kLanes);
        for (; c + 2 <= Dv; c += 2) values_tile<L, 2>(n, P, Vj + c, ldv, Ot + c * kLanes);
        if (c < Dv) values_tile<L, 1>(n, P, Vj + c, ldv, Ot + c * kLanes);
    }
}
DG_BY_WIDTH(void, values, (int64_t nk, int64_t Dv, const float* Pt, const float* V, int64_t ldv, float* Ot),
            values_lanes, kTileCols, kWideTileCols, (nk, Dv, Pt, V, ldv, Ot))

// Ot[c][l] *= a[l] for c < Dv.
DG_VECTOR_BODY void scale_lanes_body(int64_t Dv, float* Ot, const float* a) {
    for (int64_t c = 0; c < Dv; ++c) {
#pragma omp simd
        for (int l = 0; l < kLanes; ++l) Ot[c * kLanes + l] *= a[l];
    }
}
DG_VECTORIZED_512(void, scale_lanes, (int64_t Dv, float* Ot, const float* a), (Dv, Ot, a))

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
