// MatMul: numpy a @ b (optional transposes, broadcast batch, bias) as ggml_mul_mat.
//
// gg::mul_mat(x, y)[j, i] = dot(x row i, y row j): with x = b^T (rows of K)
// and y = a (rows of K) it is exactly a @ b in logical order.
#include "../generated/dyngraph_ir_generated.h"
#include "../gg.h"
#include "families.h"
#include "fused_activation.h"
#include "../kernels/f32_matmul.h"

namespace dg {

namespace {

ggml_tensor* transposed(LowerCtx& c, ggml_tensor* t) { return gg::cont(c.ctx, gg::transpose(c.ctx, t)); }

// Above rank 4 the batch axes of each operand are folded (program.h): ggml
// broadcasts an operand's folded batch only where it is all 1s, so an operand
// (or bias) whose batch axes are neither all 1 nor the output's is broadcast
// to them by a copy first.
void fold_batches(LowerCtx& c) {
    const Dims out = c.out_shape(0);
    for (size_t k = 0; k < c.n_in(); ++k) {
        const Dims s = c.in_shape(k);
        const int lead = out.rank - s.rank;
        bool ones = true, same = true;
        for (int a = 0; a < out.rank - 2; ++a) {
            const int64_t d = a < lead ? 1 : s.d[a - lead];
            ones = ones && d == 1;
            same = same && d == out.d[a];
        }
        if (ones || same) continue;
        Dims full;
        full.rank = out.rank;
        for (int a = 0; a < out.rank; ++a) full.d[a] = out.d[a];
        if (k < 2) {  // the matrix keeps its own last two axes
            full.d[out.rank - 2] = s.rank >= 2 ? s.d[s.rank - 2] : 1;
            full.d[out.rank - 1] = s.d[s.rank - 1];
        }
        c.in[k] = c.broadcast(c.in[k], s, full);
    }
}

void lower_matmul(LowerCtx& c) {
    for (size_t k = 0; k < 2; ++k)
        if (c.in_shape(k).rank < 2) c.unsupported(cat("input ", k, " ", c.in_shape(k).str(), " must have rank >= 2"));
    if (c.out_shape(0).rank > kGgmlRank) fold_batches(c);
    ggml_tensor* a = c.in[0];
    ggml_tensor* b = c.in[1];
    const bool ta = c.attrs<ops::MatMulAttrs>().transpose_a;
    const bool tb = c.attrs<ops::MatMulAttrs>().transpose_b;
    // x: rows of K, one per output column; y: rows of K, one per output row
    ggml_tensor* x = tb ? c.cont(b) : transposed(c, b);
    ggml_tensor* y = ta ? transposed(c, a) : c.cont(a);
    if (y->type != GGML_TYPE_F32) y = gg::cast(c.ctx, y, GGML_TYPE_F32);
    // f16 / bf16 weights stay in their type: ggml multiplies them by f32 activations (kernels::mul_mat)
    // ggml broadcasts x over y's batch dims, not the other way: repeat y where x is larger
    if (x->ne[2] > y->ne[2] || x->ne[3] > y->ne[3]) {
        y = gg::repeat_4d(c.ctx, y, y->ne[0], y->ne[1], std::max(x->ne[2], y->ne[2]), std::max(x->ne[3], y->ne[3]));
    }
    // weights without batch dims times a batch of activations: one product over all their rows
    // (a [seq, 1, hidden] input is seq rows, not seq batches of one row)
    const int64_t ne_y[4] = {y->ne[0], y->ne[1], y->ne[2], y->ne[3]};
    const bool fold = x->ne[2] == 1 && x->ne[3] == 1 && (y->ne[2] > 1 || y->ne[3] > 1) && ggml_is_contiguous(y);
    if (fold) y = gg::reshape_2d(c.ctx, y, ne_y[0], ne_y[1] * ne_y[2] * ne_y[3]);
    ggml_tensor* bias = nullptr;
    if (c.n_in() == 3) {
        bias = c.cont(c.in[2]);
        if (bias->type != GGML_TYPE_F32) bias = gg::cast(c.ctx, bias, GGML_TYPE_F32);
    }
    // f32 from two rows: our kernels on the host CPU (f32_matmul.h), which add a bias of one value per
    // column in the same pass; ggml's product on other devices
    const bool fused = bias != nullptr && c.host() && kernels::bias_fuses(x, y, bias);
    // and the activation that reads it, where that kernel computes the product with its bias
    const OpDef* reader = nullptr;
    kernels::Activation act = fused_activation(c, c.op.outputs[0], &reader);
    // (weights in f32, f16 or bf16 panels: applied tile by tile, in cache, at any size: f32_panels.h)
    const bool tiled = kernels::in_panels(x) && (x->type == GGML_TYPE_F32 || x->type == GGML_TYPE_F16 ||
                                                 x->type == GGML_TYPE_BF16);
    if (act != kernels::Activation::None &&
        (!kernels::computes(x, y) || (bias != nullptr && !fused) ||
         (!tiled && x->ne[1] * y->ne[1] * y->ne[2] * y->ne[3] > kernels::kActivationFuseMaxValues)))
        act = kernels::Activation::None;
    if (act != kernels::Activation::None) c.absorb(*reader);
    ggml_tensor* r = fused || act != kernels::Activation::None ? kernels::f32_mul_mat(c.ctx, x, y, bias, act)
                     : c.host() ? kernels::mul_mat(c.ctx, x, y)
                                : gg::mul_mat(c.ctx, x, y);
    if (fold) r = gg::reshape_4d(c.ctx, r, r->ne[0], ne_y[1], ne_y[2], ne_y[3]);
    if (bias != nullptr && !fused) r = gg::add(c.ctx, r, bias);
    c.out = {c.cast(r, ggml_type_of(c.out_dtype(0)))};
}

}  // namespace

void register_matmul(LoweringTable& t) {
    t.add(uint16_t(dyngraph::fb::OpKind::MatMul), lower_matmul);
}

}  // namespace dg
