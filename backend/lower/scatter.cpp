// ScatterND: data flattened to [outer slices, slice], the index tuples to
// [T, q], the updates to [T, slice], scattered by our kernel (kernels/scatter.h),
// which checks every index component against its dimension.
#include "../generated/dyngraph_ir_generated.h"
#include "../gg.h"
#include "../kernels/scatter.h"
#include "families.h"

namespace dg {

using K = dyngraph::fb::OpKind;

namespace {

void lower_scatter_nd(LowerCtx& c) {
    const auto& a = c.attrs<ops::ScatterNDAttrs>();
    const Dims ds = c.in_shape(0), is = c.in_shape(1), us = c.in_shape(2);
    if (is.rank < 1) c.unsupported(cat("indices ", is.str(), " must have rank >= 1"));
    const int64_t q = is.d[is.rank - 1];
    if (q < 1 || q > ds.rank) c.unsupported(cat("indices ", is.str(), " for data ", ds.str()));
    int64_t slice = 1, outer = 1;
    for (int d = int(q); d < ds.rank; ++d) slice *= ds.d[d];
    for (int d = 0; d < int(q); ++d) outer *= ds.d[d];
    const int64_t T = is.numel() / q;
    if (us.numel() != T * slice) c.unsupported(cat("updates ", us.str(), " for indices ", is.str(), " into ", ds.str()));
    kernels::ScatterParams p;
    p.q = int(q);
    p.reduce = kernels::ScatterReduce(int(a.reduction));
    int64_t stride = 1;
    for (int j = int(q) - 1; j >= 0; --j) {
        p.dims[j] = ds.d[j];
        p.stride[j] = stride;
        stride *= ds.d[j];
        c.env.kernel_checks.push_back(std::make_unique<KernelIndexCheck>());
        KernelIndexCheck* chk = c.env.kernel_checks.back().get();
        chk->limit = ds.d[j];
        chk->what = cat("op '", c.op.name, "': index component ", j, " (negative values count from the end)");
        p.check[j] = chk;
    }
    ggml_tensor* data = gg::reshape_2d(c.ctx, c.cont(c.in[0]), slice, outer);
    ggml_tensor* idx = gg::reshape_2d(c.ctx, c.cont(c.in[1]), q, T);
    ggml_tensor* upd = gg::reshape_2d(c.ctx, c.cont(c.in[2]), slice, T);
    ggml_tensor* r = kernels::scatter_nd(c.ctx, data, idx, upd, c.keep(p));
    c.out = {c.reshape(r, c.out_shape(0))};
}

}  // namespace

void register_scatter(LoweringTable& t) { t.add(uint16_t(K::ScatterND), lower_scatter_nd); }

}  // namespace dg
