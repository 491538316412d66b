// MaxPool, AvgPool, AdaptiveAvgPool: our pooling kernel (kernels/pool.h), in f32.
#include "../generated/dyngraph_ir_generated.h"
#include "../kernels/pool.h"
#include "families.h"
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

template <class Attrs>
void lower_window_pool(LowerCtx& c, const Attrs& a, kernels::PoolKind kind, const std::vector<int64_t>& dilations,
                       bool exclude_pad) {
    const bool nxc = a.data_format == Attrs::DataFormat::NXC;
    kernels::PoolShape s = pool_shape(c, nxc, kind);
    const int ns = c.in_shape(0).rank - 2;
    spatial::per_axis(c, a.kernel, ns, 1, s.KH, s.KW, "kernel");
    spatial::per_axis(c, a.strides, ns, 1, s.sh, s.sw, "strides");
    if (!dilations.empty()) spatial::per_axis(c, dilations, ns, 1, s.dh, s.dw, "dilations");
    spatial::per_axis_exprs(c, a.resolved_pads_begin, ns, s.ph, s.pw, "resolved_pads_begin");
    spatial::per_axis_exprs(c, a.resolved_pads_end, ns, s.ph_end, s.pw_end, "resolved_pads_end");
    s.exclude_pad = exclude_pad;
    check_windows(c, s, a.rounding_type == Attrs::RoundingType::ceil);
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
