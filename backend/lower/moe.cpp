// MatMulId, the experts' product: ggml_mul_mat_id (gg::mul_mat_id) on the
// weights as [experts][N rows of K], the rows [T][U or 1][K] and the ids
// [T][U], every id checked to lie in [0, experts).
#include "../generated/dyngraph_ir_generated.h"
#include "../gg.h"
#include "families.h"

namespace dg {

using K = dyngraph::fb::OpKind;

namespace {

void lower_matmul_id(LowerCtx& c) {
    const bool tb = c.attrs<ops::MatMulIdAttrs>().transpose_b;
    const Dims xs = c.in_shape(0), ws = c.in_shape(1), is = c.in_shape(2);
    if (ws.rank != 3 || (is.rank != 1 && is.rank != 2) || xs.rank != is.rank + 1)
        c.unsupported(cat("src ", xs.str(), ", weights ", ws.str(), ", ids ", is.str()));
    const int64_t E = ws.d[0], K_ = tb ? ws.d[2] : ws.d[1];
    const int64_t T = is.d[0], U = is.rank == 2 ? is.d[1] : 1, Ux = is.rank == 2 ? xs.d[1] : 1;
    if (xs.d[xs.rank - 1] != K_ || xs.d[0] != T || (Ux != 1 && Ux != U))
        c.unsupported(cat("src ", xs.str(), ", weights ", ws.str(), ", ids ", is.str(), " do not match"));
    // weights as ggml [K, N, E]: rows of K (transpose_b), else a transposed copy of each expert
    ggml_tensor* w = c.in[1];
    w = tb ? c.cont(w) : gg::cont(c.ctx, gg::permute(c.ctx, w, 1, 0, 2, 3));
    ggml_tensor* x = gg::reshape_3d(c.ctx, c.cast(c.cont(c.in[0]), GGML_TYPE_F32), K_, Ux, T);
    ggml_tensor* ids = gg::reshape_2d(c.ctx, c.cont(c.in[2]), U, T);
    ids = c.safe_indices(ids, E, "op '" + c.op.name + "': expert id");
    ggml_tensor* r = gg::mul_mat_id(c.ctx, w, x, ids);  // F32 [N, U, T]
    c.out = {c.cast(c.reshape(r, c.out_shape(0)), ggml_type_of(c.out_dtype(0)))};
}

}  // namespace

void register_moe(LoweringTable& t) { t.add(uint16_t(K::MatMulId), lower_matmul_id); }

}  // namespace dg
