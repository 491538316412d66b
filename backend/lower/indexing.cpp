// Rows by index: Gather (ggml_get_rows) and the state writes ScatterRows
// (ggml_set_rows) and CopyToSlice (a copy into a view). A write whose
// destination is (a view of) a state tensor happens in place; otherwise it
// writes into a copy, as the functional op says.
#include "../generated/dyngraph_ir_generated.h"
#include "../errors.h"
#include "../gg.h"
#include "../kernels/f32_matmul.h"
#include "../kernels/panel_rows.h"
#include "families.h"

namespace dg {

using K = dyngraph::fb::OpKind;

namespace {

void lower_gather(LowerCtx& c) {
    Dims ts = c.in_shape(0), is = c.in_shape(1), os = c.out_shape(0);
    int axis = int(c.attrs<ops::GatherAttrs>().axis);  // in range (checked at parse)
    if (axis < 0) axis += ts.rank;
    if (ts.rank < 1 || is.rank + ts.rank - 1 != os.rank)
        c.unsupported(cat("table ", ts.str(), " and indices ", is.str(), " do not give dst ", os.str()));
    // the table with `axis` first, the other axes merged: [V, R]
    int perm[4] = {0, 1, 2, 3};
    perm[0] = axis;
    for (int i = 0, k = 1; i < ts.rank; ++i)
        if (i != axis) perm[k++] = i;
    Dims moved;
    moved.rank = ts.rank;
    for (int i = 0; i < ts.rank; ++i) moved.d[i] = ts.d[perm[i]];
    // a table a MatMul reads too, laid out in panels (resident.cpp: only where it is a 2-D table gathered
    // along its rows): its rows put back together (kernels/panel_rows.h)
    const bool panels = kernels::in_panels(c.in[0]);
    if (panels && (ts.rank != 2 || axis != 0))
        fail<CompileError>("internal error: op '", c.op.name, "': a table in panels is gathered only along the rows of a 2-D "
                           "table");
    ggml_tensor* table = panels ? c.in[0] : c.flatten_tail(c.cont(c.permute(c.in[0], ts.rank, perm)), moved, 1);
    if (ts.rank == 1) table = gg::reshape_2d(c.ctx, table, 1, ts.d[0]);
    ggml_tensor* idx = c.in[1];
    idx = gg::reshape_1d(c.ctx, c.cont(idx), is.numel());
    idx = c.safe_indices(idx, ts.d[axis], "op '" + c.op.name + "'");
    // [R, N] in ne: F32 (or I32 for an I32 table)
    ggml_tensor* rows = panels ? kernels::gather_panel_rows(c.ctx, table, idx) : gg::get_rows(c.ctx, table, idx);
    // logical order now: indices' dims, then table dims other than axis; move table[:axis] to the front
    Dims got;
    got.rank = is.rank + ts.rank - 1;
    for (int i = 0; i < is.rank; ++i) got.d[i] = is.d[i];
    for (int i = 1; i < ts.rank; ++i) got.d[is.rank + i - 1] = moved.d[i];
    ggml_tensor* r = c.reshape(rows, got);
    if (axis > 0) {
        int back[4] = {0, 1, 2, 3};
        int k = 0;
        for (int i = 0; i < axis; ++i) back[k++] = is.rank + i;
        for (int i = 0; i < is.rank; ++i) back[k++] = i;
        for (int i = axis + 1; i < ts.rank; ++i) back[k++] = is.rank + i - 1;
        r = gg::cont(c.ctx, c.permute(r, got.rank, back));
    }
    c.out = {c.cast(c.reshape(r, os), ggml_type_of(c.out_dtype(0)))};
}

// The destination of a write: the state itself (in place) or a private copy.
ggml_tensor* write_target(LowerCtx& c, bool& in_place) {
    ggml_tensor* dst = c.in[0];
    in_place = c.is_state(dst);
    return in_place ? dst : gg::dup(c.ctx, dst);
}

void lower_scatter_rows(LowerCtx& c) {
    Dims ds = c.in_shape(0);
    if (ds.rank < 2) c.unsupported(cat("dst ", ds.str(), " must have rank >= 2 (rows of a width)"));
    bool in_place = false;
    ggml_tensor* dst = write_target(c, in_place);
    ggml_tensor* src = c.in[2];
    if (src->type != GGML_TYPE_F32) src = gg::cast(c.ctx, c.cont(src), GGML_TYPE_F32);
    ggml_tensor* idx = c.safe_indices(c.cont(c.in[1]), ds.d[ds.rank - 2], "op '" + c.op.name + "'");
    // (a device's ggml_set_rows reads the rows by their strides: a transposed view stays one, as a
    // decoder's [b, h, s, d] keys and values are; the host CPU's journal wants them dense)
    if (c.host() || src->nb[0] != ggml_type_size(src->type)) src = c.cont(src);
    ggml_tensor* r = in_place ? c.write_state_rows(dst, src, idx) : gg::set_rows(c.ctx, dst, src, idx);
    if (in_place) c.env.side_effects.push_back(r);
    c.out = {r};
}

void no_op(ggml_tensor*, int, int, void*) {}

void lower_copy_to_slice(LowerCtx& c) {
    Dims ds = c.in_shape(0), ss = c.in_shape(1);
    const auto& starts = c.attrs<ops::CopyToSliceAttrs>().starts;  // one per axis (checked at parse)
    bool in_place = false;
    ggml_tensor* dst = write_target(c, in_place);
    size_t offset = 0;
    for (int a = 0; a < ds.rank; ++a) {
        int64_t s = c.eval(starts[size_t(a)]);
        if (s < 0 || s > ds.d[a] - ss.d[a])
            fail<ShapeError>("op '", c.op.name, "': axis ", a, ": a slice of ", ss.d[a], " from ", s,
                             " is outside the destination's ", ds.d[a]);
        offset += size_t(s) * dst->nb[ggml_dim(a, ds.rank)];
    }
    auto ne = ss.ne();
    ggml_tensor* view = gg::view_4d(c.ctx, dst, ne[0], ne[1], ne[2], ne[3], dst->nb[1], dst->nb[2], dst->nb[3], offset);
    ggml_tensor* w = in_place ? c.write_state_view(c.in[1], view) : gg::cpy(c.ctx, c.in[1], view);
    // the whole destination, after the copy: an in-place no-op that depends on it
    ggml_tensor* r = gg::custom_inplace(c.ctx, dst, &w, 1, no_op, 1, nullptr);
    if (in_place) c.env.side_effects.push_back(r);
    c.out = {r};
}

}  // namespace

void register_indexing(LoweringTable& t) {
    t.add(uint16_t(K::Gather), lower_gather);
    t.add(uint16_t(K::ScatterRows), lower_scatter_rows);
    t.add(uint16_t(K::CopyToSlice), lower_copy_to_slice);
}

}  // namespace dg
