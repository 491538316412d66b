// MaxPool, AvgPool, AdaptiveAvgPool: our pooling kernel (kernels/pool.h), in f32.
#include "../generated/dyngraph_ir_generated.h"
#include "../kernels/pool.h"
#include "families.h"
#include "portable.h"
#include "spatial.h"

namespace dg {

using K = dyngraph::fb::OpKind;

namespace {

kernels::PoolShape pool_shape(LowerCtx& c, bool nxc, kernels::PoolKind kind) {
    const Dims xs = c.in_shape(0), ys = c.out_shape(0);
    const spatial::Layout x = spatial::layout_of(c, xs, nxc, "src");
    const spatial::Layout y = spatial::layout_of(c, ys, nxc, "dst");
    if (ys.rank != xs.rank || y.N != x.N || y.C != x.C)
        c.unsupported(cat("dst ", ys.str(), " must have the batch and channels of src ", xs.str()));
    kernels::PoolShape s;
    s.kind = kind;
    s.N = x.N, s.C = x.C, s.H = x.H, s.W = x.W, s.OH = y.H, s.OW = y.W;
    s.nxc = nxc;
    spatial::require_int_sizes(c, {s.N, s.C, s.H, s.W, s.OH, s.OW});
    return s;
}

// dst has the size of this window (ops/spatial.py window_out; rounding up adds at most one
// window), and every window overlaps the input (or the kernel would read nothing / divide by 0).
void check_windows(LowerCtx& c, const kernels::PoolShape& s, bool ceil) {
    spatial::require_int_sizes(c, {s.KH, s.KW, s.sh, s.sw, s.dh, s.dw});
    const spatial::WindowAxis axes[2] = {{s.H, s.OH, s.KH, s.sh, s.dh, s.ph, s.ph_end},
                                         {s.W, s.OW, s.KW, s.sw, s.dw, s.pw, s.pw_end}};
    for (const spatial::WindowAxis& w : axes) {
        const int64_t floor_n = w.floor_outputs();
        if (w.n != floor_n && !(ceil && w.n == floor_n + 1))
            c.unsupported(cat("dst ", c.out_shape(0).str(), " is not the output of this pooling of ", c.in_shape(0).str()));
        // the first window reaches 0, the last starts inside
        if (!(w.pad_begin < w.extent() && (w.n - 1) * w.stride - w.pad_begin < w.L))
            c.unsupported(cat("a window of dst ", c.out_shape(0).str(), " lies outside src ", c.in_shape(0).str()));
    }
}

// Off the host CPU: ggml's pool_2d over the NCX planes [W, H] (1-D as H = 1), in f32. ggml pads both
// ends of an axis by the begin padding and skips the padding: end paddings no larger than the begin
// ones (the extra windows are cut off), no dilation. Its average divides by the kernel's size, ours by
// the window's part inside the padded input (or the unpadded, exclude_pad): the same where every
// window lies inside the padded input and, with exclude_pad, there is no padding. Its max starts at
// -FLT_MAX and skips NaN (ggml-cuda's fmaxf): a window of -inf only, or one with a NaN, takes the
// window's average instead (-inf, NaN), as our kernel gives.
void lower_pool_portable(LowerCtx& c, const kernels::PoolShape& s) {
    if (s.dh != 1 || s.dw != 1) c.not_portable("a dilated pooling");
    const spatial::WindowAxis axes[2] = {{s.H, s.OH, s.KH, s.sh, 1, s.ph, s.ph_end}, {s.W, s.OW, s.KW, s.sw, 1, s.pw, s.pw_end}};
    const bool avg = s.kind == kernels::PoolKind::Avg;
    for (const spatial::WindowAxis& w : axes) {
        if (w.pad_end > w.pad_begin || w.pad_begin >= w.k)
            c.not_portable(cat("paddings (", w.pad_begin, ", ", w.pad_end, ") for a window of ", w.k));
        if (w.n > spatial::floor_div(w.L + 2 * w.pad_begin - w.k, w.stride) + 1) c.not_portable("a window past ggml's padding");
        if (avg && ((w.n - 1) * w.stride - w.pad_begin + w.k > w.L + w.pad_end || (s.exclude_pad && w.pad_begin > 0)))
            c.not_portable("an average over a window that reaches outside the padded input, or excludes the padding");
    }
    const int rank = c.in_shape(0).rank;
    ggml_tensor* x = c.in[0];
    if (s.nxc) x = spatial::nxc_to_ncx(c, x, rank);
    x = gg::reshape_4d(c.ctx, portable::dense_f32(c, x), s.W, s.H, s.C, s.N);
    auto pool = [&](ggml_tensor* t, ggml_op_pool op) {
        ggml_tensor* p = gg::pool_2d(c.ctx, t, op, int(s.KW), int(s.KH), int(s.sw), int(s.sh), int(s.pw), int(s.ph));
        if (p->ne[0] != s.OW || p->ne[1] != s.OH)
            p = c.cont(gg::view_4d(c.ctx, p, s.OW, s.OH, s.C, s.N, p->nb[1], p->nb[2], p->nb[3], 0));
        return p;
    };
    ggml_tensor* y = pool(x, avg ? GGML_OP_POOL_AVG : GGML_OP_POOL_MAX);
    if (!avg) {
        ggml_tensor* any_nan = pool(portable::is_nan(c, x), GGML_OP_POOL_MAX);
        ggml_tensor* not_neg_inf = gg::scale_bias(c.ctx, portable::is_neg_inf(c, x), -1.0f, 1.0f);
        ggml_tensor* all_neg_inf = gg::scale_bias(c.ctx, pool(not_neg_inf, GGML_OP_POOL_MAX), -1.0f, 1.0f);
        y = portable::select(c, gg::add(c.ctx, any_nan, all_neg_inf), pool(x, GGML_OP_POOL_AVG), y);
    }
    const Dims ys = c.out_shape(0);
    Dims ncx = ys;  // dst's shape in NCX
    if (s.nxc) {
        ncx.d[1] = ys[rank - 1];
        for (int i = 2; i < rank; ++i) ncx.d[i] = ys[i - 1];
    }
    y = c.reshape(y, ncx);
    if (s.nxc) y = c.cont(spatial::ncx_to_nxc(c, y, rank));
    c.out = {c.cast(y, ggml_type_of(c.out_dtype(0)))};
}

// 3 spatial axes (rank 5): a 2-D pooling of every depth slice's (H, W) plane, then one over depth (a
// 2-D pooling of [D, OH*OW] planes with a window of 1 along the second axis), both by our kernel.
// Pooling is separable: a window's max is the max of its slices' maxima, and an average's divisor
// (the window's input elements, or its positions in the padded input) is the product of the
// per-axis counts. NCX [N, C, D, H, W] pools as [N, C*D, H, W], then [N, C, D, OH*OW]; NXC
// [N, D, H, W, C] as [N*D, H, W, C], then [N, D, OH*OW, C].
template <class Attrs>
void lower_window_pool_3d(LowerCtx& c, const Attrs& a, kernels::PoolKind kind, const std::vector<int64_t>& dilations,
                          bool exclude_pad, bool nxc) {
    if (!c.host()) c.not_portable("a pooling over 3 spatial axes");
    const Dims xs = c.in_shape(0), ys = c.out_shape(0);
    const spatial::Layout3 x = spatial::layout3_of(c, xs, nxc, "src"), y = spatial::layout3_of(c, ys, nxc, "dst");
    if (ys.rank != 5 || y.N != x.N || y.C != x.C)
        c.unsupported(cat("dst ", ys.str(), " must have the batch and channels of src ", xs.str()));
    const auto k = spatial::per_axis3(c, a.kernel, "kernel"), st = spatial::per_axis3(c, a.strides, "strides");
    const auto dl = spatial::per_axis3(c, dilations, "dilations", 1);
    const auto pb = spatial::per_axis3(c, spatial::eval_exprs(c, a.resolved_pads_begin, "resolved_pads_begin"), "pads_begin");
    const auto pe = spatial::per_axis3(
        c, spatial::eval_exprs(c, a.resolved_pads_end, "resolved_pads_end", -spatial::kMaxWindow), "pads_end");
    const bool ceil = a.rounding_type == Attrs::RoundingType::ceil;
    spatial::require_int_sizes(c, {x.N, x.C, x.D, x.H, x.W, y.D, y.H, y.W, x.N * x.D, x.C * x.D, y.H * y.W});
    kernels::PoolShape s;  // the (H, W) planes
    s.kind = kind, s.nxc = nxc, s.exclude_pad = exclude_pad;
    s.N = nxc ? x.N * x.D : x.N, s.C = nxc ? x.C : x.C * x.D;
    s.H = x.H, s.W = x.W, s.OH = y.H, s.OW = y.W;
    s.KH = k[1], s.KW = k[2], s.sh = st[1], s.sw = st[2], s.dh = dl[1], s.dw = dl[2];
    s.ph = pb[1], s.pw = pb[2], s.ph_end = pe[1], s.pw_end = pe[2];
    check_windows(c, s, ceil);
    kernels::PoolShape d = s;  // depth
    d.N = x.N, d.C = x.C, d.H = x.D, d.W = y.H * y.W, d.OH = y.D, d.OW = d.W;
    d.KH = k[0], d.KW = 1, d.sh = st[0], d.sw = 1, d.dh = dl[0], d.dw = 1;
    d.ph = pb[0], d.pw = 0, d.ph_end = pe[0], d.pw_end = 0;
    check_windows(c, d, ceil);
    ggml_tensor* t = spatial::dense_f32(c, c.in[0]);
    t = nxc ? gg::reshape_4d(c.ctx, t, s.C, s.W, s.H, s.N) : gg::reshape_4d(c.ctx, t, s.W, s.H, s.C, s.N);
    const int64_t ne1[4] = {nxc ? s.C : s.OW, nxc ? s.OW : s.OH, nxc ? s.OH : s.C, s.N};
    t = kernels::pool2d(c.ctx, t, c.keep(s), ne1);
    t = nxc ? gg::reshape_4d(c.ctx, t, d.C, d.W, d.H, d.N) : gg::reshape_4d(c.ctx, t, d.W, d.H, d.C, d.N);
    const int64_t ne2[4] = {nxc ? d.C : d.OW, nxc ? d.OW : d.OH, nxc ? d.OH : d.C, d.N};
    t = kernels::pool2d(c.ctx, t, c.keep(d), ne2);
    c.out = {c.cast(c.reshape(t, ys), ggml_type_of(c.out_dtype(0)))};
}

template <class Attrs>
void lower_window_pool(LowerCtx& c, const Attrs& a, kernels::PoolKind kind, const std::vector<int64_t>& dilations,
                       bool exclude_pad) {
    const bool nxc = a.data_format == Attrs::DataFormat::NXC;
    if (c.in_shape(0).rank == 5) return lower_window_pool_3d(c, a, kind, dilations, exclude_pad, nxc);
    kernels::PoolShape s = pool_shape(c, nxc, kind);
    const int ns = c.in_shape(0).rank - 2;
    spatial::per_axis(c, a.kernel, ns, 1, s.KH, s.KW, "kernel");
    spatial::per_axis(c, a.strides, ns, 1, s.sh, s.sw, "strides");
    if (!dilations.empty()) spatial::per_axis(c, dilations, ns, 1, s.dh, s.dw, "dilations");
    spatial::per_axis_exprs(c, a.resolved_pads_begin, ns, s.ph, s.pw, "resolved_pads_begin");
    spatial::per_axis_exprs(c, a.resolved_pads_end, ns, s.ph_end, s.pw_end, "resolved_pads_end", -spatial::kMaxWindow);
    s.exclude_pad = exclude_pad;
    check_windows(c, s, a.rounding_type == Attrs::RoundingType::ceil);
    if (!c.host()) return lower_pool_portable(c, s);
    const auto ne = c.out_shape(0).ne();
    ggml_tensor* y = kernels::pool2d(c.ctx, spatial::dense_f32(c, c.in[0]), c.keep(s), ne.data());
    c.out = {c.cast(y, ggml_type_of(c.out_dtype(0)))};
}

void lower_max_pool(LowerCtx& c) {
    const auto& a = c.attrs<ops::MaxPoolAttrs>();
    lower_window_pool(c, a, kernels::PoolKind::Max, a.dilations, false);
}

void lower_avg_pool(LowerCtx& c) {
    const auto& a = c.attrs<ops::AvgPoolAttrs>();
    lower_window_pool(c, a, kernels::PoolKind::Avg, {}, a.exclude_pad);
}

void lower_adaptive_avg_pool(LowerCtx& c) {
    using A = ops::AdaptiveAvgPoolAttrs;
    const auto& a = c.attrs<A>();
    const kernels::PoolShape s = pool_shape(c, a.data_format == A::DataFormat::NXC, kernels::PoolKind::AdaptiveAvg);
    const auto ne = c.out_shape(0).ne();
    ggml_tensor* y = kernels::pool2d(c.ctx, spatial::dense_f32(c, c.in[0]), c.keep(s), ne.data());
    c.out = {c.cast(y, ggml_type_of(c.out_dtype(0)))};
}

}  // namespace

void register_pool(LoweringTable& t) {
    t.add(uint16_t(K::MaxPool), lower_max_pool);
    t.add(uint16_t(K::AvgPool), lower_avg_pool);
    t.add(uint16_t(K::AdaptiveAvgPool), lower_adaptive_avg_pool);
}

}  // namespace dg
