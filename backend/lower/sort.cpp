// TopK and ArgSort: the sorted axis moved innermost, each row's indices
// sorted stably by our kernel (kernels/sort.h), the values taken at them,
// and the axis moved back.
#include <cmath>

#include "../generated/dyngraph_ir_generated.h"
#include "../gg.h"
#include "../kernels/sort.h"
#include "families.h"
#include "portable.h"

namespace dg {

using K = dyngraph::fb::OpKind;

namespace {

struct Sorted {
    ggml_tensor* values;   // in the input's ggml type (F32 or I32), axis innermost
    ggml_tensor* indices;  // I32, axis innermost
    Dims moved;            // the logical shape with the axis last (and k in it)
    int perm[4];           // moved axis i = input axis perm[i]
};

// Off the host CPU: ggml's argsort of each row (x F32, dense), NaN sorted as +inf (above every number, as
// our kernel puts it; ggml's std::sort is undefined with NaN), its first k columns, and the values
// gathered at them. Not stable: equal values may come in another order than the host CPU's.
void portable_sort(LowerCtx& c, Sorted& r, ggml_tensor* x, int64_t k, bool descending, bool want_values) {
    ggml_tensor* inf = gg::fill(c.ctx, x, INFINITY);
    ggml_tensor* idx = gg::argsort(c.ctx, portable::select(c, portable::is_nan(c, x), inf, x), descending);
    const int64_t L = x->ne[0], rows = ggml_nrows(x);
    if (k < L) idx = c.cont(gg::view_4d(c.ctx, idx, k, idx->ne[1], idx->ne[2], idx->ne[3], idx->nb[1], idx->nb[2], idx->nb[3], 0));
    r.indices = idx;
    if (!want_values) return;
    ggml_tensor* v = gg::get_rows(c.ctx, gg::reshape_3d(c.ctx, x, 1, L, rows), gg::reshape_2d(c.ctx, idx, k, rows));
    r.values = gg::reshape_4d(c.ctx, v, k, x->ne[1], x->ne[2], x->ne[3]);
}

Sorted sort_along(LowerCtx& c, int64_t axis_attr, int64_t k, bool descending, bool want_values) {
    const Dims s = c.in_shape(0);
    if (axis_attr < -s.rank || axis_attr >= s.rank) c.unsupported(cat("axis ", axis_attr, " for rank ", s.rank));
    const int axis = int(axis_attr < 0 ? axis_attr + s.rank : axis_attr);
    if (k < 1 || k > s.d[axis])
        fail<ShapeError>("op '", c.op.name, "': k = ", k, " is outside [1, ", s.d[axis], "] (the size of axis ", axis, ")");
    Sorted r{nullptr, nullptr, {}, {0, 1, 2, 3}};
    for (int i = 0, j = 0; i < s.rank; ++i)
        if (i != axis) r.perm[j++] = i;
    r.perm[s.rank - 1] = axis;
    r.moved.rank = s.rank;
    for (int i = 0; i < s.rank; ++i) r.moved.d[i] = s.d[r.perm[i]];
    ggml_tensor* x = c.in[0];
    if (!c.host() && x->type == GGML_TYPE_I32) c.not_portable("sorting integers (ggml's argsort sorts f32 only)");
    if (x->type != GGML_TYPE_F32 && x->type != GGML_TYPE_I32) x = gg::cast(c.ctx, c.cont(x), GGML_TYPE_F32);
    x = c.cont(c.permute(x, s.rank, r.perm));
    r.moved.d[s.rank - 1] = k;
    if (!c.host()) {
        portable_sort(c, r, x, k, descending, want_values);
        return r;
    }
    r.indices = kernels::argsort_rows(c.ctx, x, k, descending);
    if (want_values) r.values = kernels::take_rows(c.ctx, x, r.indices);
    return r;
}

// a result with the axis innermost, moved back to its place and cast to output k's type
ggml_tensor* put_back(LowerCtx& c, ggml_tensor* t, const Sorted& r, size_t k) {
    int inv[4] = {0, 1, 2, 3};
    for (int i = 0; i < r.moved.rank; ++i) inv[r.perm[i]] = i;
    t = c.cont(c.permute(t, r.moved.rank, inv));
    return c.cast(c.reshape(t, c.out_shape(k)), ggml_type_of(c.out_dtype(k)));
}

void lower_topk(LowerCtx& c) {
    const auto& a = c.attrs<ops::TopKAttrs>();
    Sorted r = sort_along(c, a.axis, c.eval(a.k), a.largest, true);
    c.out = {put_back(c, r.values, r, 0), put_back(c, r.indices, r, 1)};
}

void lower_argsort(LowerCtx& c) {
    const auto& a = c.attrs<ops::ArgSortAttrs>();
    const Dims s = c.in_shape(0);
    const int64_t axis = a.axis < 0 ? a.axis + s.rank : a.axis;
    Sorted r = sort_along(c, a.axis, axis >= 0 && axis < s.rank ? s.d[axis] : 1, a.descending, false);
    c.out = {put_back(c, r.indices, r, 0)};
}

}  // namespace

void register_sort(LoweringTable& t) {
    t.add(uint16_t(K::TopK), lower_topk);
    t.add(uint16_t(K::ArgSort), lower_argsort);
}

}  // namespace dg
