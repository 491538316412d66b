#include "attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "../gg.h"
#include "attention_lanes.h"
#include "fast_exp.h"
#include "small_gemm.h"
#include "vector_clones.h"

namespace dg::kernels {

namespace {

constexpr int64_t kKeyBlock = 512;  // few_rows: a block of scores (rows x keys) stays in L1 / L2

// Query rows per task (several groups of kLanes rows, attention_lanes.h): enough tasks to keep threads
// busy; a last block of fewer than 8 rows joins the one before it, so every row of a query of 8 rows
// or more runs in lanes and its result does not depend on the query length, the blocks or the thread
// count (the few-row path is for decoding).
constexpr int64_t kQueryBlock = 64;

// s[j] = s[j] * scale + mask[j] for j < n (mask may be null; scale 1: the product already scaled);
// returns max(s[0..n)) (-inf for n = 0). One pass: the max is taken as each score is written.
DG_VECTOR_BODY float scale_mask_max_body(float* s, float scale, const float* mask, int64_t n) {
    float m = -std::numeric_limits<float>::infinity();
    if (mask) {
#pragma omp simd reduction(max : m)
        for (int64_t j = 0; j < n; ++j) {
            const float v = s[j] * scale + mask[j];
            s[j] = v;
            m = v > m ? v : m;
        }
    } else if (scale != 1.0f) {
#pragma omp simd reduction(max : m)
        for (int64_t j = 0; j < n; ++j) {
            const float v = s[j] * scale;
            s[j] = v;
            m = v > m ? v : m;
        }
    } else {
#pragma omp simd reduction(max : m)
        for (int64_t j = 0; j < n; ++j) m = s[j] > m ? s[j] : m;
    }
    return m;
}
DG_VECTORIZED(float, scale_mask_max, (float* s, float scale, const float* mask, int64_t n), (s, scale, mask, n))

// s[j] = s[j] * scale where keep[j] != 0, else -inf, for j < n (a bool mask); returns max(s[0..n)).
DG_VECTOR_BODY float scale_keep_max_body(float* s, float scale, const int32_t* keep, int64_t n) {
    const float neg_inf = -std::numeric_limits<float>::infinity();
    float m = neg_inf;
#pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < n; ++j) {
        const float v = keep[j] != 0 ? s[j] * scale : neg_inf;
        s[j] = v;
        m = v > m ? v : m;
    }
    return m;
}
DG_VECTORIZED(float, scale_keep_max, (float* s, float scale, const int32_t* keep, int64_t n), (s, scale, keep, n))

// s[j] = e^(s[j] - m) for j < n, then 0 up to `end`; returns the sum of the first n.
DG_VECTOR_BODY float exp_sum_body(float* s, int64_t n, int64_t end, float m) {
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < n; ++j) {
        const float e = exp_nonpositive(s[j] - m);
        s[j] = e;
        sum += e;
    }
    for (int64_t j = n; j < end; ++j) s[j] = 0.0f;
    return sum;
}
DG_VECTORIZED(float, exp_sum, (float* s, int64_t n, int64_t end, float m), (s, n, end, m))

DG_VECTOR_BODY void scale_row_body(float* o, int64_t n, float a) {
    for (int64_t j = 0; j < n; ++j) o[j] *= a;
}
DG_VECTORIZED(void, scale_row, (float* o, int64_t n, float a), (o, n, a))

// 8 floats as one value (GCC / Clang vector extension): one AVX register in the x86-64-v3 and v4
// variants, two SSE registers in the baseline.
typedef float Vec8 __attribute__((vector_size(32)));

// (by reference: a vector returned by value warns that the baseline variant's ABI differs)
inline void load8(Vec8& v, const float* p) { std::memcpy(&v, p, sizeof v); }

// o[c] += sum_j p[j] V[j, c] for columns c < 16: the sums stay in registers while V's column block
// streams past (no store per key).
inline void pv_tile(int64_t nk, const float* p, const float* V, int64_t ldv, float* o) {
    Vec8 acc0 = {}, acc1 = {};
    for (int64_t j = 0; j < nk; ++j) {
        Vec8 v0, v1;
        load8(v0, V + j * ldv);
        load8(v1, V + j * ldv + 8);
        acc0 += p[j] * v0;
        acc1 += p[j] * v1;
    }
    Vec8 o0, o1;
    load8(o0, o);
    load8(o1, o + 8);
    o0 += acc0;
    o1 += acc1;
    std::memcpy(o, &o0, sizeof o0);
    std::memcpy(o + 8, &o1, sizeof o1);
}

// O[r, :] += sum_j P[r, j] V[j, :] for a few rows r < nq (the small products' counterpart), row by
// row in tiles of 16 columns, the columns after the last whole 16 one key at a time. Row by row:
// tiles of several rows were no faster and a row's sums then depended on its neighbours (the
// compiler fused multiply and add in one tile shape and not in another), so a decoding head's
// result changed with the thread count.
DG_VECTOR_BODY void few_rows_pv_body(int64_t nq, int64_t nk, int64_t dv, const float* P, int64_t ldp, const float* V,
                                     int64_t ldv, float* O, int64_t ldo) {
    const int64_t whole = dv / 16 * 16;
    for (int64_t r = 0; r < nq; ++r) {
        const float* p = P + r * ldp;
        float* o = O + r * ldo;
        for (int64_t d = 0; d < whole; d += 16) pv_tile(nk, p, V + d, ldv, o + d);
        for (int64_t j = 0; j < nk && whole < dv; ++j)
            for (int64_t d = whole; d < dv; ++d) o[d] += p[j] * V[j * ldv + d];
    }
}
DG_VECTORIZED(void, few_rows_pv, (int64_t nq, int64_t nk, int64_t dv, const float* P, int64_t ldp, const float* V,
                                  int64_t ldv, float* O, int64_t ldo),
              (nq, nk, dv, P, ldp, V, ldv, O, ldo))

template <class T>
T* row(const ggml_tensor* t, int64_t i1, int64_t i2, int64_t i3) {
    return reinterpret_cast<T*>(static_cast<char*>(t->data) + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3]);
}

int64_t floats(size_t bytes) { return int64_t(bytes / sizeof(float)); }

// Whether all n keys of a mask row are masked out (I32: 0; f32: -inf), as a vector reduction.
bool all_masked(const void* m, bool i32, int64_t n) {
    int32_t seen = 0;
    if (i32) {
        const auto* keep = static_cast<const int32_t*>(m);
#pragma omp simd reduction(| : seen)
        for (int64_t j = 0; j < n; ++j) seen |= keep[j];
    } else {
        const auto* add = static_cast<const float*>(m);
        const float neg_inf = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(| : seen)
        for (int64_t j = 0; j < n; ++j) seen |= int32_t(add[j] != neg_inf);
    }
    return seen == 0;
}

// The keys a mask row leaves in: 1 + the last of its first nk keys that is not masked out (f32: not
// -inf; I32: not 0), at least `floor` (scanning stops there: a group needs only its rows' largest).
// The keys after it add nothing to the row, as ggml's flash attention skips them: a static KV cache's
// empty slots, a batch's padding. They are not read at all (a NaN there is not seen).
int64_t keys_seen(const void* m, bool i32, int64_t nk, int64_t floor) {
    constexpr int64_t kRun = 64;  // a masked tail is skipped a run of keys at a time (a static cache's is long)
    const size_t step = i32 ? sizeof(int32_t) : sizeof(float);
    while (nk - kRun >= floor && all_masked(static_cast<const char*>(m) + (nk - kRun) * step, i32, kRun)) nk -= kRun;
    if (i32) {
        const auto* keep = static_cast<const int32_t*>(m);
        while (nk > floor && keep[nk - 1] == 0) --nk;
    } else {
        const auto* add = static_cast<const float*>(m);
        while (nk > floor && add[nk - 1] == -std::numeric_limits<float>::infinity()) --nk;
    }
    return nk;
}

// The keys some of n mask rows leave in (keys_seen of each, rows last first: a causal mask's widest;
// a row the same as the one after it is not scanned again), at least `floor`.
int64_t rows_keys_seen(const void* const* rows, int64_t n, bool i32, int64_t nk, int64_t floor) {
    for (int64_t r = n - 1; r >= 0; --r)
        if (r == n - 1 || rows[r] != rows[r + 1]) floor = keys_seen(rows[r], i32, nk, floor);
    return floor;
}

// One task's rows of queries: row r is query i0 + r * di of head h0 + r * dh, in batch b; Q, O at
// its first row, K, V at its kv head.
struct Rows {
    int64_t b, nq, i0, di, h0, dh;
    int64_t ldq, ldo;  // row strides of the queries and outputs, in floats
    const float *Q, *K, *V;
    float* O;
};

// A task of 8 rows or more: groups of kLanes rows in vector lanes (attention_lanes.h).
void lane_rows(const Rows& rw, const ggml_tensor* k, const ggml_tensor* v, const ggml_tensor* mask,
               const AttentionParams& p) {
    for (int64_t r0 = 0; r0 < rw.nq; r0 += kLanes) {
        LaneGroup g;
        g.nq = int(std::min<int64_t>(kLanes, rw.nq - r0));
        g.Q = rw.Q + r0 * rw.ldq, g.ldq = rw.ldq, g.O = rw.O + r0 * rw.ldo, g.ldo = rw.ldo;
        g.K = rw.K, g.ldk = floats(k->nb[1]), g.V = rw.V, g.ldv = floats(v->nb[1]);
        g.D = k->ne[0], g.Dv = v->ne[0], g.nkeys = k->ne[1], g.scale = p.scale, g.causal = p.causal;
        g.mask_i32 = mask && mask->type == GGML_TYPE_I32;
        g.shared_mask = true;
        for (int l = 0; l < g.nq; ++l) {
            const int64_t i = rw.i0 + (r0 + l) * rw.di, h = rw.h0 + (r0 + l) * rw.dh;
            g.last_key[l] = i;
            if (mask) g.mask[l] = row<const char>(mask, mask->ne[1] == 1 ? 0 : i, h % mask->ne[2], rw.b % mask->ne[3]);
            g.shared_mask = g.shared_mask && g.mask[l] == g.mask[0];
        }
        if (mask) g.nkeys = rows_keys_seen(g.mask, g.nq, g.mask_i32, g.nkeys, 0);  // only keys some row sees
        if (g.nkeys == 0) {  // every key masked out for every row: 0, as attention_lanes gives
            for (int l = 0; l < g.nq; ++l) std::fill(g.O + l * g.ldo, g.O + l * g.ldo + g.Dv, 0.0f);
            continue;
        }
        attention_lanes(g);
    }
}

// A task of 1 to kSmallGemmMaxRows rows (decoding) over the keys [from, to): key blocks of scores by
// the small products, an online softmax row by row, the values added by few_rows_pv. Leaves each row
// unnormalized: O[r] = sum_j e^(s_j - run_max[r]) v_j, run_sum[r] = sum_j e^(s_j - run_max[r])
// (run_max -inf, the row and the sum 0, where the range holds no key the row sees).
void few_rows_part(const Rows& rw, const ggml_tensor* k, const ggml_tensor* v, const ggml_tensor* mask,
                   const AttentionParams& p, int64_t from, int64_t to, float* run_max, float* run_sum) {
    const int64_t D = k->ne[0], Skv = k->ne[1], Dv = v->ne[0], nq = rw.nq;
    const int64_t ldk = floats(k->nb[1]), ldv = floats(v->nb[1]);
    const float neg_inf = -std::numeric_limits<float>::infinity();
    thread_local std::vector<float> scores;
    if (scores.size() < size_t(nq * std::min(kKeyBlock, Skv))) scores.resize(size_t(nq * std::min(kKeyBlock, Skv)));
    for (int64_t r = 0; r < nq; ++r) {
        run_max[r] = neg_inf;
        run_sum[r] = 0.0f;
        std::fill(rw.O + r * rw.ldo, rw.O + r * rw.ldo + Dv, 0.0f);
    }
    const int64_t last_row = rw.i0 + (nq - 1) * rw.di;
    int64_t kend = p.causal ? std::min(Skv, last_row + 1) : Skv;  // keys after the last row's are all cut
    const void* mask_row[kSmallGemmMaxRows] = {};
    for (int64_t r = 0; r < nq && mask; ++r) {
        const int64_t i = rw.i0 + r * rw.di, h = rw.h0 + r * rw.dh;
        mask_row[r] = row<const char>(mask, mask->ne[1] == 1 ? 0 : i, h % mask->ne[2], rw.b % mask->ne[3]);
    }
    // and those after every row's last unmasked one, found only down to `from` (none there: the range
    // is all tail)
    if (mask) kend = rows_keys_seen(mask_row, nq, mask->type == GGML_TYPE_I32, kend, from);
    kend = std::min(kend, to);
    for (int64_t j0 = from; j0 < kend; j0 += kKeyBlock) {
        const int64_t nk = std::min(kKeyBlock, kend - j0);
        float* S = scores.data();
        small_gemm_nt(int(nq), nk, D, rw.Q, rw.ldq, rw.K + j0 * ldk, ldk, S, nk);
        for (int64_t r = 0; r < nq; ++r) {
            float* s = S + r * nk;
            const int64_t i = rw.i0 + r * rw.di;
            const int64_t keep = p.causal ? std::clamp<int64_t>(i - j0 + 1, 0, nk) : nk;
            const char* m = mask ? static_cast<const char*>(mask_row[r]) + j0 * 4 : nullptr;
            const float block_max = mask && mask->type == GGML_TYPE_I32
                                        ? scale_keep_max(s, p.scale, reinterpret_cast<const int32_t*>(m), keep)
                                        : scale_mask_max(s, p.scale, reinterpret_cast<const float*>(m), keep);
            const float old = run_max[r], top = std::max(old, block_max);
            if (top == neg_inf) {  // every key so far masked out: nothing to add
                std::fill(s, s + nk, 0.0f);
                continue;
            }
            if (old != top && old != neg_inf) {
                const float a = exp_nonpositive(old - top);
                scale_row(rw.O + r * rw.ldo, Dv, a);
                run_sum[r] *= a;
            }
            run_sum[r] += exp_sum(s, keep, nk, top);
            run_max[r] = top;
        }
        few_rows_pv(nq, nk, Dv, S, nk, rw.V + j0 * ldv, ldv, rw.O, rw.ldo);
    }
}

// few_rows_part over every key, each row then divided by its sum.
void few_rows(const Rows& rw, const ggml_tensor* k, const ggml_tensor* v, const ggml_tensor* mask,
              const AttentionParams& p) {
    float run_max[kSmallGemmMaxRows], run_sum[kSmallGemmMaxRows];
    few_rows_part(rw, k, v, mask, p, 0, k->ne[1], run_max, run_sum);
    for (int64_t r = 0; r < rw.nq; ++r) {
        const float sum = run_sum[r];
        scale_row(rw.O + r * rw.ldo, v->ne[0], sum > 0.0f ? 1.0f / sum : 0.0f);
    }
}

// How a call's query rows are cut into tasks (the same for the whole kernel and its key parts).
struct Tasks {
    bool by_group;
    int64_t group, chunks, chunk, nqb, bq, count;
};

// Decoding (one query row): the query heads that share a kv head are one task's rows (in chunks of at
// most kSmallGemmMaxRows: the small products, whose sums do not depend on the rows beside them), so
// each kv head is read once, unless that leaves threads idle (counting each task's `key_parts`);
// either way a row's result is the same, whatever the thread count. Otherwise blocks of kQueryBlock
// rows of one head.
Tasks plan_tasks(const ggml_tensor* q, const ggml_tensor* k, int64_t key_parts, int nth) {
    Tasks t{};
    const int64_t Sq = q->ne[1], Hq = q->ne[2], B = q->ne[3], Hkv = k->ne[2];
    t.group = Hq / Hkv;
    t.chunks = (t.group + kSmallGemmMaxRows - 1) / kSmallGemmMaxRows;
    t.chunk = (t.group + t.chunks - 1) / t.chunks;
    t.by_group = Sq == 1 && t.group > 1 && B * Hkv * t.chunks * key_parts >= nth;
    t.bq = t.by_group ? t.chunk : kQueryBlock;
    t.nqb = t.by_group ? t.chunks : (Sq + t.bq - 1) / t.bq;
    if (!t.by_group && t.nqb > 1 && Sq - (t.nqb - 1) * t.bq <= kSmallGemmMaxRows) --t.nqb;  // the last block takes the rest
    t.count = t.by_group ? B * Hkv * t.chunks : B * Hq * t.nqb;
    return t;
}

// Task n's rows (all but O and ldo, which depend on where they are written).
Rows task_rows(const Tasks& t, int64_t n, const ggml_tensor* q, const ggml_tensor* k, const ggml_tensor* v) {
    Rows rw{};
    const int64_t Sq = q->ne[1], Hq = q->ne[2], Hkv = k->ne[2];
    if (t.by_group) {
        const int64_t c = n % t.chunks, g = (n / t.chunks) % Hkv;
        rw = Rows{n / (t.chunks * Hkv), std::min(t.chunk, t.group - c * t.chunk), 0, 0, g * t.group + c * t.chunk, 1,
                  floats(q->nb[2]), 0, nullptr, nullptr, nullptr, nullptr};
    } else {
        const int64_t qb = n % t.nqb, h = (n / t.nqb) % Hq;
        const int64_t nq = qb == t.nqb - 1 ? Sq - qb * t.bq : t.bq;
        rw = Rows{n / (t.nqb * Hq), nq, qb * t.bq, 1, h, 0, floats(q->nb[1]), 0, nullptr, nullptr, nullptr, nullptr};
    }
    rw.Q = row<const float>(q, rw.i0, rw.h0, rw.b);
    rw.K = row<const float>(k, 0, rw.h0 / t.group, rw.b);
    rw.V = row<const float>(v, 0, rw.h0 / t.group, rw.b);
    return rw;
}

// Byte steps of the result between query rows, heads and batches ([Dv, Sq, Hq, B], [Dv, Hq, Sq, B]
// or [Dv, Hq, B, Sq]).
struct OutSteps {
    size_t row, head, batch;
    OutSteps(const ggml_tensor* dst, const AttentionParams& p)
        : row(p.rows_outer ? dst->nb[3] : p.heads_inner ? dst->nb[2] : dst->nb[1]),
          head(p.rows_outer || p.heads_inner ? dst->nb[1] : dst->nb[2]),
          batch(p.rows_outer ? dst->nb[2] : dst->nb[3]) {}
};

void attention_kernel(ggml_tensor* dst, int ith, int nth, void* userdata) {
    const auto& p = *static_cast<const AttentionParams*>(userdata);
    const ggml_tensor *q = dst->src[0], *k = dst->src[1], *v = dst->src[2], *mask = dst->src[3];
    const OutSteps out(dst, p);
    const Tasks plan = plan_tasks(q, k, 1, nth);
    for (int64_t n = ith; n < plan.count; n += nth) {
        Rows rw = task_rows(plan, n, q, k, v);
        rw.ldo = floats(plan.by_group ? out.head : out.row);
        rw.O = reinterpret_cast<float*>(static_cast<char*>(dst->data) + rw.i0 * out.row + rw.h0 * out.head +
                                        rw.b * out.batch);
        if (rw.nq > kSmallGemmMaxRows) lane_rows(rw, k, v, mask, p);
        else few_rows(rw, k, v, mask, p);
    }
}

// Decoding (at most kSmallGemmMaxRows query rows) over more than one block of keys is split into parts of
// this many keys (whole blocks of kKeyBlock); 0: no split. At most kMaxKeyParts parts, and their rows at
// most kMaxPartBytes (a split that would need more takes fewer, longer parts, or none). A property of
// the shapes alone, so the result does not depend on the thread count.
constexpr int64_t kMaxKeyParts = 32;
constexpr double kMaxPartBytes = 64.0 * 1024 * 1024;

int64_t key_span(const ggml_tensor* q, const ggml_tensor* k, const ggml_tensor* v) {
    const int64_t Skv = k->ne[1];
    if (q->ne[1] > kSmallGemmMaxRows || Skv <= kKeyBlock) return 0;
    const int64_t blocks = (Skv + kKeyBlock - 1) / kKeyBlock;
    const double row_bytes = double(v->ne[0] + 2) * double(q->ne[1]) * double(q->ne[2]) * double(q->ne[3]) * 4.0;
    const int64_t parts = int64_t(std::min(double(std::min(blocks, kMaxKeyParts)), kMaxPartBytes / row_bytes));
    return parts < 2 ? 0 : (blocks + parts - 1) / parts * kKeyBlock;
}

// Decoding split over parts of key_span keys (more tasks than kv heads, for the threads): each task's
// rows over one part, unnormalized, each row followed by its max and its sum, in
// part [Dv + 2, Sq, Hq, B * parts] (part kb of batch b at kb * B + b).
void key_part_kernel(ggml_tensor* part, int ith, int nth, void* userdata) {
    const auto& p = *static_cast<const AttentionParams*>(userdata);
    const ggml_tensor *q = part->src[0], *k = part->src[1], *v = part->src[2], *mask = part->src[3];
    const int64_t B = q->ne[3], parts = part->ne[3] / B, Dv = v->ne[0], span = key_span(q, k, v);
    const Tasks plan = plan_tasks(q, k, parts, nth);
    for (int64_t n = ith; n < plan.count * parts; n += nth) {
        const int64_t kb = n % parts;
        Rows rw = task_rows(plan, n / parts, q, k, v);
        rw.ldo = floats(plan.by_group ? part->nb[2] : part->nb[1]);
        rw.O = row<float>(part, rw.i0, rw.h0, kb * B + rw.b);
        float run_max[kSmallGemmMaxRows], run_sum[kSmallGemmMaxRows];
        few_rows_part(rw, k, v, mask, p, kb * span, (kb + 1) * span, run_max, run_sum);
        for (int64_t r = 0; r < rw.nq; ++r) {
            rw.O[r * rw.ldo + Dv] = run_max[r];
            rw.O[r * rw.ldo + Dv + 1] = run_sum[r];
        }
    }
}

// o[c] += a * x[c] for c < n.
DG_VECTOR_BODY void add_scaled_body(float* o, const float* x, int64_t n, float a) {
    for (int64_t c = 0; c < n; ++c) o[c] += a * x[c];
}
DG_VECTORIZED(void, add_scaled, (float* o, const float* x, int64_t n, float a), (o, x, n, a))

// The parts of key_part_kernel joined, in key order (so the result does not depend on the thread
// count): each part's row weighed by e^(its max - the largest), divided by the weighed sums.
void join_key_parts_kernel(ggml_tensor* dst, int ith, int nth, void* userdata) {
    const auto& p = *static_cast<const AttentionParams*>(userdata);
    const ggml_tensor* part = dst->src[0];
    const OutSteps out(dst, p);
    const int64_t Dv = part->ne[0] - 2, Sq = part->ne[1], Hq = part->ne[2];
    const int64_t B = p.rows_outer ? dst->ne[2] : dst->ne[3], parts = part->ne[3] / B;
    const float neg_inf = -std::numeric_limits<float>::infinity();
    for (int64_t n = ith; n < B * Hq * Sq; n += nth) {
        const int64_t i = n % Sq, h = (n / Sq) % Hq, b = n / (Sq * Hq);
        float* o = reinterpret_cast<float*>(static_cast<char*>(dst->data) + i * out.row + h * out.head + b * out.batch);
        float top = neg_inf;
        for (int64_t kb = 0; kb < parts; ++kb) top = std::max(top, row<const float>(part, i, h, kb * B + b)[Dv]);
        std::fill(o, o + Dv, 0.0f);
        if (top == neg_inf) continue;  // every key masked out: 0
        float sum = 0.0f;
        for (int64_t kb = 0; kb < parts; ++kb) {
            const float* x = row<const float>(part, i, h, kb * B + b);
            if (x[Dv] == neg_inf) continue;
            const float w = exp_nonpositive(x[Dv] - top);
            sum += w * x[Dv + 1];
            add_scaled(o, x, Dv, w);
        }
        scale_row(o, Dv, 1.0f / sum);
    }
}

}  // namespace

bool attention_mask_ok(const ggml_tensor* t) {
    constexpr int64_t kMax = int64_t(1) << 31;
    if ((t->type != GGML_TYPE_F32 && t->type != GGML_TYPE_I32) || t->nb[0] != 4) return false;
    for (int d = 1; d < 4; ++d)
        if (t->nb[d] % sizeof(float) != 0 || t->ne[d] >= kMax || int64_t(t->nb[d] / sizeof(float)) >= kMax) return false;
    return t->ne[0] < kMax;
}

bool attention_rows_ok(const ggml_tensor* t) { return t->type == GGML_TYPE_F32 && attention_mask_ok(t); }

ggml_tensor* f32_attention(ggml_context* ctx, ggml_tensor* q, ggml_tensor* k, ggml_tensor* v, ggml_tensor* mask,
                           const AttentionParams* params) {
    auto* userdata = const_cast<AttentionParams*>(params);
    ggml_tensor* args[4] = {q, k, v, mask};
    int nargs = mask ? 4 : 3;
    ggml_custom_op_t kernel = attention_kernel;
    if (const int64_t span = key_span(q, k, v); span > 0) {
        const int64_t parts = (k->ne[1] + span - 1) / span;
        args[0] = gg::custom_4d(ctx, GGML_TYPE_F32, v->ne[0] + 2, q->ne[1], q->ne[2], q->ne[3] * parts, args, nargs,
                                key_part_kernel, GGML_N_TASKS_MAX, userdata);
        nargs = 1;
        kernel = join_key_parts_kernel;
    }
    const int64_t Dv = v->ne[0], Sq = q->ne[1], Hq = q->ne[2], B = q->ne[3];
    if (params->rows_outer)
        return gg::permute(ctx, gg::custom_4d(ctx, GGML_TYPE_F32, Dv, Hq, B, Sq, args, nargs, kernel, GGML_N_TASKS_MAX,
                                              userdata),
                           0, 2, 3, 1);
    if (!params->heads_inner)
        return gg::custom_4d(ctx, GGML_TYPE_F32, Dv, Sq, Hq, B, args, nargs, kernel, GGML_N_TASKS_MAX, userdata);
    return gg::permute(ctx, gg::custom_4d(ctx, GGML_TYPE_F32, Dv, Hq, Sq, B, args, nargs, kernel, GGML_N_TASKS_MAX,
                                          userdata),
                       0, 2, 1, 3);
}

}  // namespace dg::kernels
