// Reductions: the reduced axes are moved innermost and merged, reduced along
// ggml's ne0, and the result is reshaped to the output.
#include "../generated/dyngraph_ir_generated.h"
#include "../kernels/kernels.h"
#include "../gg.h"
#include "families.h"

namespace dg {

using K = dyngraph::fb::OpKind;

namespace {

enum class Reduce { Sum, Mean, Max, Min, Prod };

template <Reduce R>
void lower_reduce(LowerCtx& c) {
    Dims s = c.in_shape(0);
    const int rank = s.rank;
    bool reduced[kMaxRank] = {false, false, false, false, false, false};
    for (int64_t a : c.attrs<ops::ReduceSumAttrs>().axes) reduced[a < 0 ? a + rank : a] = true;  // in range (parse)
    int perm[kMaxRank], n = 0;
    for (int i = 0; i < rank; ++i)
        if (!reduced[i]) perm[n++] = i;
    const int kept = n;
    for (int i = 0; i < rank; ++i)
        if (reduced[i]) perm[n++] = i;
    Dims ps;
    ps.rank = rank;
    for (int i = 0; i < rank; ++i) ps.d[i] = s.d[perm[i]];
    ggml_type t = c.in[0]->type;
    ggml_tensor* x = c.flatten_tail(c.transposed(c.in[0], s, perm), ps, kept);
    if (t != GGML_TYPE_F32 && t != GGML_TYPE_I32) x = gg::cast(c.ctx, x, GGML_TYPE_F32);
    bool is_int = x->type == GGML_TYPE_I32;
    // ggml_mean computes F32 only (it aborts on I32); the shape rule rejects
    // an integer mean, this keeps an IR that bypassed it from crashing.
    if (R == Reduce::Mean && is_int) c.unsupported("ReduceMean of an integer tensor");
    ggml_tensor* r = nullptr;
    switch (R) {
        case Reduce::Sum: r = is_int ? kernels::reduce_rows(c.ctx, kernels::ReduceRows::Sum, x) : gg::sum_rows(c.ctx, x); break;
        case Reduce::Mean: r = gg::mean(c.ctx, x); break;
        case Reduce::Max: r = kernels::reduce_rows(c.ctx, kernels::ReduceRows::Max, x); break;
        case Reduce::Min: r = kernels::reduce_rows(c.ctx, kernels::ReduceRows::Min, x); break;
        case Reduce::Prod: r = kernels::reduce_rows(c.ctx, kernels::ReduceRows::Prod, x); break;
    }
    c.out = {c.cast(c.reshape(r, c.out_shape(0)), t)};
}

// The axis moved innermost, the index of each row's maximum (I32), reshaped to the output.
void lower_arg_max(LowerCtx& c) {
    Dims s = c.in_shape(0);
    const int rank = s.rank;
    int64_t axis = c.attrs<ops::ArgMaxAttrs>().axis;  // in range (parse)
    if (axis < 0) axis += rank;
    int perm[kMaxRank], n = 0;
    for (int i = 0; i < rank; ++i)
        if (i != axis) perm[n++] = i;
    perm[n] = int(axis);
    Dims ps;
    ps.rank = rank;
    for (int i = 0; i < rank; ++i) ps.d[i] = s.d[perm[i]];
    ggml_tensor* x = c.flatten_tail(c.transposed(c.in[0], s, perm), ps, rank - 1);
    if (x->type != GGML_TYPE_F32 && x->type != GGML_TYPE_I32) x = gg::cast(c.ctx, x, GGML_TYPE_F32);
    c.out = {c.reshape(kernels::argmax_rows(c.ctx, x), c.out_shape(0))};
}

}  // namespace

void register_reduce(LoweringTable& t) {
    t.add(uint16_t(K::ReduceSum), lower_reduce<Reduce::Sum>);
    t.add(uint16_t(K::ReduceMean), lower_reduce<Reduce::Mean>);
    t.add(uint16_t(K::ReduceMax), lower_reduce<Reduce::Max>);
    t.add(uint16_t(K::ReduceMin), lower_reduce<Reduce::Min>);
    t.add(uint16_t(K::ReduceProd), lower_reduce<Reduce::Prod>);
    t.add(uint16_t(K::ArgMax), lower_arg_max);
}

}  // namespace dg
