#include "int8_gemm.h"

#include <algorithm>

#include "../gg.h"
#include "thread_share.h"

namespace dg::kernels {

namespace {

constexpr int64_t kRowBlock = 64;  // activation rows per unit of work
constexpr int64_t kColBlock = 32;  // weight rows (output columns) per unit of work: 32 KB of weights at K = 1024

// The activation rows as int8_dot takes them (flipped into a copy, or in place) and their sums (when a
// weight zero point needs them); one per thread, as every thread reads all rows.
struct Rows {
    std::vector<char> copy;
    std::vector<int64_t> sum;
    const char* data = nullptr;
    int64_t ld = 0;
};

void prepare_rows(Rows& rows, const Int8Params& p, const Int8Act& act, const ggml_tensor* a, int64_t M, int64_t K) {
    const bool sums = !p.w_zp.empty();
    const bool a_unsigned = !p.w_unsigned;  // the signedness int8_dot reads
    rows.sum.assign(sums ? size_t(M) : 0, 0);
    if (act.flip) {
        rows.copy.resize(size_t(M * K));
        for (int64_t m = 0; m < M; ++m) {
            const char* row = static_cast<const char*>(a->data) + m * a->nb[1];
            char* d = rows.copy.data() + m * K;
            for (int64_t k = 0; k < K; ++k) d[k] = char(row[k] ^ 0x80);
        }
        rows.data = rows.copy.data(), rows.ld = K;
    } else {
        rows.data = static_cast<const char*>(a->data), rows.ld = int64_t(a->nb[1]);
    }
    if (sums)
        for (int64_t m = 0; m < M; ++m) rows.sum[size_t(m)] = int8_sum(rows.data + m * rows.ld, K, a_unsigned);
}

// Units of work: blocks of kRowBlock rows x kColBlock columns, column block by column block, so that a
// thread's consecutive units share their weights (read from cache) and their column sums.
void int8_kernel(ggml_tensor* dst, int ith, int nth, void* ud) {
    const auto& p = *static_cast<const Int8Params*>(ud);
    const ggml_tensor* a = dst->src[0];
    const ggml_tensor* w = dst->src[1];
    const float* bias = dst->src[2] ? static_cast<const float*>(dst->src[2]->data) : nullptr;
    const int64_t K = a->ne[0], M = a->ne[1], N = w->ne[1];
    const int64_t mb = (M + kRowBlock - 1) / kRowBlock, nb = (N + kColBlock - 1) / kColBlock;
    const int64_t units = mb * nb;
    const auto [u0, u1] = thread_share(units, ith, nth);
    if (u0 >= u1) return;
    const Int8Act act = int8_act(p);
    thread_local Rows rows;
    prepare_rows(rows, p, act, a, M, K);
    int64_t tot[kRowBlock * kColBlock], col_sum[kColBlock] = {};
    int64_t summed = -1;  // the column block col_sum holds
    for (int64_t u = u0; u < u1; ++u) {
        const int64_t n0 = (u / mb) * kColBlock, n1 = std::min(N, n0 + kColBlock);
        const int64_t m0 = (u % mb) * kRowBlock, m1 = std::min(M, m0 + kRowBlock);
        const char* wb = static_cast<const char*>(w->data) + n0 * w->nb[1];
        if (act.zp != 0 && summed != n0) {
            for (int64_t n = n0; n < n1; ++n) col_sum[n - n0] = int8_sum(wb + (n - n0) * w->nb[1], K, p.w_unsigned);
            summed = n0;
        }
        int8_dot(rows.data + m0 * rows.ld, rows.ld, m1 - m0, K, wb, int64_t(w->nb[1]), n1 - n0, p.w_unsigned, tot,
                 kColBlock);
        for (int64_t m = m0; m < m1; ++m) {
            int64_t* acc = tot + (m - m0) * kColBlock;
            int8_correct_row(p, act, K, rows.sum.empty() ? 0 : rows.sum[size_t(m)], col_sum, n0, n1 - n0, acc);
            int8_finish_row(p, bias, n0, n1 - n0, acc, static_cast<char*>(dst->data) + m * dst->nb[1], n0, 1);
        }
    }
}

}  // namespace

ggml_tensor* int8_matmul(ggml_context* ctx, ggml_tensor* a, ggml_tensor* w, ggml_tensor* bias, const Int8Params* p) {
    if (a->type != GGML_TYPE_I8 || w->type != GGML_TYPE_I8 || a->ne[0] != w->ne[0] || a->ne[2] != 1 || a->ne[3] != 1 ||
        w->ne[2] != 1 || w->ne[3] != 1 || a->nb[0] != 1 || w->nb[0] != 1)
        fail<gg::Violation>("int8_matmul: a ", gg::describe(a), " and w ", gg::describe(w),
                            " must be dense I8 matrices of one row length");
    if (bias && (bias->type != GGML_TYPE_F32 || bias->ne[0] != w->ne[1] || ggml_nelements(bias) != w->ne[1] ||
                 !ggml_is_contiguous(bias)))
        fail<gg::Violation>("int8_matmul: bias ", gg::describe(bias), " must be F32 [", w->ne[1], "]");
    const size_t n = size_t(w->ne[1]);
    if (!p->fits(n))
        fail<gg::Violation>("int8_matmul: ", p->scale.size(), " scales and ", p->w_zp.size(), " zero points for ", n,
                            " columns");
    ggml_tensor* args[3] = {a, w, bias};
    return gg::custom_4d(ctx, p->quantize_out ? GGML_TYPE_I8 : GGML_TYPE_F32, w->ne[1], a->ne[1], 1, 1, args,
                         bias ? 3 : 2, int8_kernel, GGML_N_TASKS_MAX, const_cast<Int8Params*>(p));
}

}  // namespace dg::kernels
