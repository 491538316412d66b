// Data movement: reshape, transpose, concat, slice, type cast. Each takes
// tensors of rank up to 6 (held folded, see program.h).
#include "../generated/dyngraph_ir_generated.h"
#include "../kernels/kernels.h"
#include "../kernels/quantize.h"
#include "../gg.h"
#include "families.h"
#include "portable.h"
#include "view_chain.h"

namespace dg {

using K = dyngraph::fb::OpKind;

namespace {

void lower_reshape(LowerCtx& c) {
    // The shape rule's guards make the counts equal; ggml_reshape would abort if they were not.
    Dims in = c.in_shape(0), out = c.out_shape(0);
    if (in.numel() != out.numel()) c.unsupported("reshape of " + in.str() + " to " + out.str() + " changes the element count");
    // a strided input (a slice) at the end of a chain with a transpose: one copy from the chain's start
    ggml_tensor* x = c.in[0];
    auto ne = out.ne();
    const bool same = x->ne[0] == ne[0] && x->ne[1] == ne[1] && x->ne[2] == ne[2] && x->ne[3] == ne[3];
    if (!same && !is_dense(x))
        if (ggml_tensor* t = composed_copy(c)) {
            c.out = {t};
            return;
        }
    c.out = {c.reshape(x, out)};
}

// Readers that make dense what they need of a transposed view themselves (a cont of their own where
// the input is not dense already, or a view handed on to such readers): another transpose, a rotation,
// a cache write, attention. (Not a reshape: one to the same sizes hands the view on to any reader.) The
// transpose's output then stays a view for them on a device, where a chain such as [b, s, h, d] ->
// [b, h, s, d] -> [b, s, h, d] (a rotary embedding between a model's transposes) is otherwise a copy
// per step (host CPU partitions compose such chains: view_chain.h).
bool makes_its_own_copy(const OpDef& op, size_t input) {
    switch (K(op.kind)) {
        case K::StaticTranspose:
        case K::RoPE: return input == 0;
        case K::ScatterRows: return input == 2;
        case K::ScaledDotProductAttention: return input < 3;
        default: return false;
    }
}

void lower_transpose(LowerCtx& c) {
    Dims s = c.in_shape(0);
    const std::vector<int64_t>& order = c.attrs<ops::StaticTransposeAttrs>().order;  // a permutation or empty
    int perm[kMaxRank] = {0, 1, 2, 3, 4, 5};
    for (int i = 0; i < s.rank; ++i) {
        int64_t a = order.empty() ? s.rank - 1 - i : order[size_t(i)];
        perm[i] = int(a < 0 ? a + s.rank : a);
    }
    if (s.rank <= kGgmlRank)
        if (ggml_tensor* t = composed_copy(c)) {  // the end of a chain with another transpose: one copy
            c.out = {t};
            return;
        }
    if (c.env.placed && s.rank <= kGgmlRank && !c.in_dims && c.output_viewed_only_by(0, makes_its_own_copy)) {
        c.out = {c.permute(c.in[0], s.rank, perm)};
        return;
    }
    c.out = {c.transposed(c.in[0], s, perm)};
}

// Above rank 4, each input is viewed as [outer, axis, inner] (dense) and joined along the middle.
Dims around(const Dims& s, int axis) {
    Dims m;
    m.rank = 3;
    m.d[0] = m.d[2] = 1;
    for (int i = 0; i < axis; ++i) m.d[0] *= s.d[i];
    m.d[1] = s.d[axis];
    for (int i = axis + 1; i < s.rank; ++i) m.d[2] *= s.d[i];
    return m;
}

void lower_concat(LowerCtx& c) {
    Dims s = c.out_shape(0);
    int64_t axis = c.attrs<ops::ConcatAttrs>().axis;
    if (axis < 0) axis += s.rank;
    const bool high = s.rank > kGgmlRank;
    int dim = high ? 1 : ggml_dim(int(axis), s.rank);
    auto input = [&](size_t k) { return high ? c.reshape(c.in[k], around(c.in_shape(k), int(axis))) : c.cont(c.in[k]); };
    ggml_tensor* r = input(0);
    for (size_t k = 1; k < c.n_in(); ++k) {
        ggml_tensor* b = input(k);
        for (int d = 0; d < 4; ++d)  // ggml_concat aborts on a mismatch; the shape rule's guards prevent one
            if (d != dim && r->ne[d] != b->ne[d]) c.unsupported("concat inputs of different sizes off the concat axis");
        r = gg::concat(c.ctx, r, b, dim);
    }
    c.out = {high ? c.reshape(r, s) : r};
}

// One axis of a slice as a strided view. ggml views cannot stride the
// innermost dimension, so a strided innermost slice goes through a transpose.
ggml_tensor* slice_axis(LowerCtx& c, ggml_tensor* x, int g, int64_t start, int64_t step, int64_t count) {
    if (g == 0 && step != 1) {
        ggml_tensor* t = gg::cont(c.ctx, gg::transpose(c.ctx, x));
        t = slice_axis(c, t, 1, start, step, count);
        return gg::cont(c.ctx, gg::transpose(c.ctx, t));
    }
    if (x->nb[0] != ggml_type_size(x->type)) x = gg::cont(c.ctx, x);
    int64_t ne[4] = {x->ne[0], x->ne[1], x->ne[2], x->ne[3]};
    size_t nb[4] = {x->nb[0], x->nb[1], x->nb[2], x->nb[3]};
    ne[g] = count;
    nb[g] *= size_t(step);
    return gg::view_4d(c.ctx, x, ne[0], ne[1], ne[2], ne[3], nb[1], nb[2], nb[3], size_t(start) * x->nb[g]);
}

// Starts are resolved (clamped) by the shape rule; the output shape gives the counts.
void lower_slice(LowerCtx& c) {
    Dims s = c.in_shape(0);
    Dims o = c.out_shape(0);
    const auto& a = c.attrs<ops::SliceAttrs>();
    const auto& starts = a.starts;  // resolved by the shape rule: one per axis, strides >= 1 (checked at parse)
    const auto& strides = a.strides;
    if (s.rank > kGgmlRank) {  // one strided copy of the selected elements
        Strided st = c.strides_of(c.in[0], s);
        int64_t offset = 0;
        for (int ax = 0; ax < s.rank; ++ax) {
            const int64_t start = c.eval(starts[size_t(ax)]);
            int64_t step = 0;
            if (start < 0 || start >= s.d[ax] || __builtin_mul_overflow(start, st.nb[ax], &step) ||
                __builtin_add_overflow(offset, step, &offset) ||
                __builtin_mul_overflow(st.nb[ax], strides[size_t(ax)], &st.nb[ax]))
                c.unsupported(cat("axis ", ax, ": start ", start, " is outside the input ", s.str()));
            st.ne[ax] = o.d[ax];
        }  // (gather_strided checks that the last element read lies inside the input)
        c.out = {c.gather_strided(c.in[0], st, offset)};
        return;
    }
    ggml_tensor* x = c.in[0];
    for (int a = 0; a < s.rank; ++a) {
        int64_t start = c.eval(starts[size_t(a)]), step = strides[size_t(a)];
        if (start == 0 && step == 1 && o.d[a] == s.d[a]) continue;
        x = slice_axis(c, x, ggml_dim(a, s.rank), start, step, o.d[a]);
    }
    c.out = {x};
}

bool is_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

// f8 to or from a float type (or the other f8): through F32 and our quantize
// kernels at scale 1 (x * 1 is x: the one rounding is Quantize's, to nearest even)
void lower_f8_cast(LowerCtx& c, DType from, DType to) {
    if (!(kernels::is_f8(from) || is_float(from)) || !(kernels::is_f8(to) || is_float(to)))
        c.unsupported(cat("TypeCast ", dtype_name(from), " -> ", dtype_name(to), " (f8 converts only to and from floats)"));
    ggml_tensor* x = c.cont(c.in[0]);
    x = kernels::is_f8(from) ? kernels::dequantize(c.ctx, x, nullptr, nullptr, c.keep(kernels::unit_params(from)))
                             : c.cast(x, GGML_TYPE_F32);
    c.out = {kernels::is_f8(to) ? kernels::quantize(c.ctx, x, nullptr, nullptr, c.keep(kernels::unit_params(to)))
                                : c.cast(x, ggml_type_of(to))};
}

void lower_type_cast(LowerCtx& c) {
    DType from = c.in_dtype(0), to = c.out_dtype(0);
    if (kernels::is_f8(from) || kernels::is_f8(to)) return lower_f8_cast(c, from, to);
    ggml_tensor* x = c.in[0];
    ggml_type gt = ggml_type_of(to);
    if (to == DType::Bool && from != DType::Bool && !c.host()) {
        // off the host CPU, x != 0 (NaN is true, as in numpy) in f32 with ggml's ops: step(|x|) + 1 - step(|x| + 1)
        // (every nonzero integer stays nonzero in f32)
        ggml_tensor* ax = gg::unary(c.ctx, gg::Unary::Abs, portable::dense_f32(c, x));
        ggml_tensor* nonzero = gg::scale_bias(c.ctx, gg::unary(c.ctx, gg::Unary::Step, ax), 1.0f, 1.0f);
        ggml_tensor* number = gg::unary(c.ctx, gg::Unary::Step, gg::scale_bias(c.ctx, ax, 1.0f, 1.0f));
        c.out = {gg::cast(c.ctx, gg::sub(c.ctx, nonzero, number), GGML_TYPE_I32)};
        return;
    }
    if (to == DType::Bool && from != DType::Bool) {
        if (x->type != GGML_TYPE_F32 && x->type != GGML_TYPE_I32) x = gg::cast(c.ctx, c.cont(x), GGML_TYPE_F32);
        c.out = {kernels::nonzero(c.ctx, c.cont(x))};
        return;
    }
    if (x->type == gt) {
        c.out = {x};  // i32 <-> i64 <-> bool share the backend's i32
        return;
    }
    // ggml's CPU copy converts between F32 and each of F16, BF16 and I32, but
    // not directly between two of those (f16 -> i32 crashes, i32 -> f16
    // aborts): every other pair goes through F32. That is exact for f16 and
    // bf16 values and for integers up to 2**24; a larger i32 is rounded to F32
    // before BF16. F32 -> I32 truncates toward zero, like numpy's astype.
    if (x->type != GGML_TYPE_F32 && gt != GGML_TYPE_F32) x = gg::cast(c.ctx, c.cont(x), GGML_TYPE_F32);
    c.out = {gg::cast(c.ctx, c.cont(x), gt)};
}

}  // namespace

void register_layout(LoweringTable& t) {
    t.add(uint16_t(K::StaticReshape), lower_reshape);
    t.add(uint16_t(K::StaticTranspose), lower_transpose);
    t.add(uint16_t(K::Concat), lower_concat);
    t.add(uint16_t(K::Slice), lower_slice);
    t.add(uint16_t(K::TypeCast), lower_type_cast);
}

}  // namespace dg
