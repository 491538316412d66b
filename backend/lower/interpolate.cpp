// Interpolate: (bi)linear and bicubic through ggml_interpolate on NCX data (ggml's
// half-pixel and align-corners rules are PyTorch's and oneDNN's, its bicubic
// PyTorch's: a = -0.75, taps clamped to the input); nearest
// through our kernel (kernels/resize.h: PyTorch's index arithmetic).
// 3 spatial axes: both modes are separable (trilinear weights are products of
// 1-D ones, nearest picks an index per axis), so depth is resized first as a
// 2-D resize of [D, H*W] planes that keeps the second axis (an identity there:
// scale 1), then every depth slice's (H, W) plane.
#include "../generated/dyngraph_ir_generated.h"
#include "../kernels/resize.h"
#include "families.h"
#include "spatial.h"

namespace dg {

using K = dyngraph::fb::OpKind;

namespace {

using A = ops::InterpolateAttrs;

// `t` (dense f32, NCX [N, C, H, W] or NXC [N, H, W, C] by x) resized to y's (H, W), in the same layout.
ggml_tensor* resize2d(LowerCtx& c, const A& a, ggml_tensor* t, bool nxc, const spatial::Layout& x,
                      const spatial::Layout& y) {
    spatial::require_int_sizes(c, {x.N, x.C, x.H, x.W, y.H, y.W});
    if (a.mode == A::Mode::nearest) {
        if (a.coordinate_transformation_mode == A::CoordinateTransformationMode::align_corners)
            c.unsupported("nearest with align_corners");
        kernels::ResizeShape s;
        s.N = x.N, s.C = x.C, s.H = x.H, s.W = x.W, s.OH = y.H, s.OW = y.W;
        s.nxc = nxc;
        s.half_pixel = a.coordinate_transformation_mode == A::CoordinateTransformationMode::half_pixel;
        t = nxc ? gg::reshape_4d(c.ctx, t, x.C, x.W, x.H, x.N) : gg::reshape_4d(c.ctx, t, x.W, x.H, x.C, x.N);
        const int64_t ne[4] = {nxc ? x.C : y.W, nxc ? y.W : y.H, nxc ? y.H : x.C, x.N};
        return kernels::resize_nearest(c.ctx, t, c.keep(s), ne);
    }
    if (a.coordinate_transformation_mode == A::CoordinateTransformationMode::asymmetric)
        c.unsupported("linear or cubic interpolation with asymmetric coordinates");
    uint32_t mode = a.mode == A::Mode::bicubic ? GGML_SCALE_MODE_BICUBIC : GGML_SCALE_MODE_BILINEAR;
    if (a.coordinate_transformation_mode == A::CoordinateTransformationMode::align_corners)
        mode |= GGML_SCALE_FLAG_ALIGN_CORNERS;
    if (nxc) {  // [C, W, H, N] (ggml ne) -> [W, H, C, N]
        t = gg::reshape_4d(c.ctx, t, x.C, x.W, x.H, x.N);
        t = c.cont(gg::permute(c.ctx, t, 2, 0, 1, 3));
    } else {
        t = gg::reshape_4d(c.ctx, t, x.W, x.H, x.C, x.N);
    }
    t = gg::interpolate(c.ctx, t, y.W, y.H, x.C, x.N, mode);
    if (nxc) t = c.cont(gg::permute(c.ctx, t, 1, 2, 0, 3));  // back to [C, W, H, N]
    return t;
}

void lower_interpolate(LowerCtx& c) {
    const auto& a = c.attrs<A>();
    const bool nxc = a.data_format == A::DataFormat::NXC;
    const Dims xs = c.in_shape(0), ys = c.out_shape(0);
    if (ys.rank != xs.rank) c.unsupported(cat("dst ", ys.str(), " must have src's rank ", xs.str()));
    ggml_tensor* t = spatial::dense_f32(c, c.in[0]);
    if (xs.rank == 5) {
        const spatial::Layout3 x = spatial::layout3_of(c, xs, nxc, "src"), y = spatial::layout3_of(c, ys, nxc, "dst");
        if (y.N != x.N || y.C != x.C)
            c.unsupported(cat("dst ", ys.str(), " must have the batch and channels of src ", xs.str()));
        spatial::require_int_sizes(c, {x.H * x.W, x.C * y.D, x.N * y.D});
        // depth: NCX [N, C, D, H*W], NXC [N, D, H*W, C]
        t = resize2d(c, a, t, nxc, {x.N, x.C, x.D, x.H * x.W}, {x.N, x.C, y.D, x.H * x.W});
        // (H, W): NCX [N, C*OD, H, W], NXC [N*OD, H, W, C]
        const spatial::Layout in2 = nxc ? spatial::Layout{x.N * y.D, x.C, x.H, x.W} : spatial::Layout{x.N, x.C * y.D, x.H, x.W};
        spatial::Layout out2 = in2;
        out2.H = y.H, out2.W = y.W;
        t = resize2d(c, a, t, nxc, in2, out2);
    } else {
        const spatial::Layout x = spatial::layout_of(c, xs, nxc, "src");
        const spatial::Layout y = spatial::layout_of(c, ys, nxc, "dst");
        if (y.N != x.N || y.C != x.C)
            c.unsupported(cat("dst ", ys.str(), " must have the batch and channels of src ", xs.str()));
        t = resize2d(c, a, t, nxc, x, y);
    }
    c.out = {c.cast(c.reshape(t, ys), ggml_type_of(c.out_dtype(0)))};
}

}  // namespace

void register_interpolate(LoweringTable& t) { t.add(uint16_t(K::Interpolate), lower_interpolate); }

}  // namespace dg
