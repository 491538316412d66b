// SoftMax, LayerNorm, RMSNorm: ggml normalizes along ne0, so the normalized
// axes are brought innermost (softmax) or merged into one (norms).
#include "../generated/dyngraph_ir_generated.h"
#include "../gg.h"
#include "../kernels/row_norm.h"
#include "families.h"

namespace dg {

using K = dyngraph::fb::OpKind;

namespace {

ggml_tensor* to_f32(LowerCtx& c, ggml_tensor* t) { return c.cast(c.cont(t), GGML_TYPE_F32); }

void lower_softmax(LowerCtx& c) {
    Dims s = c.in_shape(0);
    int rank = s.rank;
    int axis = int(c.attrs<ops::SoftMaxAttrs>().axis);
    if (axis < 0) axis += rank;
    ggml_type t = c.in[0]->type;
    ggml_tensor* x = c.in[0];
    if (rank > kGgmlRank) {  // [outer, axis, inner]: the same softmax over a rank-3 view
        Dims m;
        m.rank = 3;
        m.d[0] = m.d[2] = 1;
        for (int i = 0; i < axis; ++i) m.d[0] *= s.d[i];
        m.d[1] = s.d[axis];
        for (int i = axis + 1; i < rank; ++i) m.d[2] *= s.d[i];
        x = c.reshape(x, m);
        rank = 3;
        axis = 1;
    }
    if (axis == rank - 1 || rank == 0) {
        x = gg::soft_max(c.ctx, to_f32(c, x));
    } else {
        int perm[4] = {0, 1, 2, 3};  // swap axis and the last one (its own inverse)
        perm[axis] = rank - 1;
        perm[rank - 1] = axis;
        x = gg::soft_max(c.ctx, to_f32(c, c.permute(x, rank, perm)));
        x = gg::cont(c.ctx, c.permute(x, rank, perm));
    }
    c.out = {c.cast(c.reshape(x, s), t)};
}

// The norm's input is ggml's sum of two dense f32 tensors of its shape that nothing else reads (a
// residual added just before a post-LN norm, as in BERT and PyTorch's encoder layers).
bool residual_sum(const LowerCtx& c) {
    const ggml_tensor* t = c.in[0];
    if (t->op != GGML_OP_ADD || t->type != GGML_TYPE_F32 || t->view_src) return false;  // (not an in-place add)
    for (const ggml_tensor* a : {t->src[0], t->src[1]})
        if (!a || a->type != GGML_TYPE_F32 || !ggml_is_contiguous(a) || a->ne[0] != t->ne[0] || a->ne[1] != t->ne[1] ||
            a->ne[2] != t->ne[2] || a->ne[3] != t->ne[3])
            return false;
    return c.input_read_only_here(0);
}

template <ggml_tensor* (*NORM)(ggml_context*, ggml_tensor*, float)>
void lower_norm(LowerCtx& c, int64_t begin, float eps, ggml_tensor* gamma, ggml_tensor* beta) {
    Dims s = c.in_shape(0);
    ggml_type t = c.in[0]->type;
    ggml_tensor* x = to_f32(c, c.in[0]);
    const int first = int(begin < 0 ? begin + s.rank : begin);
    x = c.flatten_tail(x, s, first);
    // on the host, one pass with gamma and beta (kernels/row_norm.h) where they are dense rows of the
    // normalized size, as the shape rule makes them
    ggml_tensor* g = gamma && c.host() ? to_f32(c, gamma) : nullptr;
    ggml_tensor* b = beta && c.host() ? to_f32(c, beta) : nullptr;
    if (c.host() && kernels::row_norm_ok(x, g, b) && (g || !gamma) && (b || !beta)) {
        ggml_tensor* addend = nullptr;
        if (residual_sum(c)) {  // the kernel adds the two instead (the ADD node is then unused)
            x = c.flatten_tail(c.in[0]->src[0], s, first);
            addend = c.flatten_tail(c.in[0]->src[1], s, first);
        }
        c.out = {c.cast(c.reshape(kernels::row_norm(c.ctx, x, g, b, eps, NORM == gg::rms_norm, addend), s), t)};
        return;
    }
    x = NORM(c.ctx, x, eps);
    x = c.reshape(x, s);
    // gamma and beta have the normalized shape (the shape rule's guards);
    // ggml_mul / ggml_add would abort on one that does not broadcast.
    for (ggml_tensor* p : {gamma, beta})
        if (p && !ggml_can_repeat(p, x)) c.unsupported("gamma or beta does not have the normalized shape");
    if (gamma) x = gg::mul(c.ctx, x, to_f32(c, gamma));
    if (beta) x = gg::add(c.ctx, x, to_f32(c, beta));
    c.out = {c.cast(x, t)};
}

void lower_layer_norm(LowerCtx& c) {
    const auto& a = c.attrs<ops::LayerNormAttrs>();
    bool affine = a.use_affine && c.n_in() == 3;
    lower_norm<gg::norm>(c, a.begin_norm_axis, float(a.epsilon), affine ? c.in[1] : nullptr, affine ? c.in[2] : nullptr);
}

void lower_rms_norm(LowerCtx& c) {
    const auto& a = c.attrs<ops::RMSNormAttrs>();
    lower_norm<gg::rms_norm>(c, a.begin_norm_axis, float(a.epsilon), c.n_in() == 2 ? c.in[1] : nullptr, nullptr);
}

}  // namespace

void register_norm(LoweringTable& t) {
    t.add(uint16_t(K::SoftMax), lower_softmax);
    t.add(uint16_t(K::LayerNorm), lower_layer_norm);
    t.add(uint16_t(K::RMSNorm), lower_rms_norm);
}

}  // namespace dg
