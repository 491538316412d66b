// TopK and ArgSort: the sorted axis moved innermost, each row's indices
// sorted stably by our kernel (kernels/sort.h), the values taken at them,
// and the axis moved back.
#include "../generated/dyngraph_ir_generated.h"
#include "../gg.h"
#include "../kernels/sort.h"
#include "families.h"

namespace dg {

using K = dyngraph::fb::OpKind;

namespace {

struct Sorted {
    ggml_tensor* values;   // in the input's ggml type (F32 or I32), axis innermost
    ggml_tensor* indices;  // I32, axis innermost
    Dims moved;            // the logical shape with the axis last (and k in it)
    int perm[4];           // moved axis i = input axis perm[i]
};

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
    if (x->type != GGML_TYPE_F32 && x->type != GGML_TYPE_I32) x = gg::cast(c.ctx, c.cont(x), GGML_TYPE_F32);
    x = c.cont(c.permute(x, s.rank, r.perm));
    r.indices = kernels::argsort_rows(c.ctx, x, k, descending);
    if (want_values) r.values = kernels::take_rows(c.ctx, x, r.indices);
    r.moved.d[s.rank - 1] = k;
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
