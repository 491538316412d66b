// Interpolate: (bi)linear through ggml_interpolate on NCX data (ggml's
// half-pixel and align-corners rules are PyTorch's and oneDNN's); nearest
// through our kernel (kernels/resize.h: PyTorch's index arithmetic).
#include "../generated/dyngraph_ir_generated.h"
#include "../kernels/resize.h"
#include "families.h"
#include "spatial.h"

namespace dg {

using K = dyngraph::fb::OpKind;

namespace {

void lower_interpolate(LowerCtx& c) {
    using A = ops::InterpolateAttrs;
    const auto& a = c.attrs<A>();
    const bool nxc = a.data_format == A::DataFormat::NXC;
    const Dims xs = c.in_shape(0), ys = c.out_shape(0);
    const spatial::Layout x = spatial::layout_of(c, xs, nxc, "src");
    const spatial::Layout y = spatial::layout_of(c, ys, nxc, "dst");
    if (ys.rank != xs.rank || y.N != x.N || y.C != x.C)
        c.unsupported(cat("dst ", ys.str(), " must have the batch and channels of src ", xs.str()));
    spatial::require_int_sizes(c, {x.N, x.C, x.H, x.W, y.H, y.W});
    ggml_tensor* r;
    if (a.mode == A::Mode::nearest) {
        if (a.coordinate_transformation_mode == A::CoordinateTransformationMode::align_corners)
            c.unsupported("nearest with align_corners");
        kernels::ResizeShape s;
        s.N = x.N, s.C = x.C, s.H = x.H, s.W = x.W, s.OH = y.H, s.OW = y.W;
        s.nxc = nxc;
        s.half_pixel = a.coordinate_transformation_mode == A::CoordinateTransformationMode::half_pixel;
        const auto ne = ys.ne();
        r = kernels::resize_nearest(c.ctx, spatial::dense_f32(c, c.in[0]), c.keep(s), ne.data());
    } else {
        if (a.coordinate_transformation_mode == A::CoordinateTransformationMode::asymmetric)
            c.unsupported("linear interpolation with asymmetric coordinates");
        uint32_t mode = GGML_SCALE_MODE_BILINEAR;
        if (a.coordinate_transformation_mode == A::CoordinateTransformationMode::align_corners)
            mode |= GGML_SCALE_FLAG_ALIGN_CORNERS;
        ggml_tensor* t = c.in[0];
        if (nxc) t = spatial::nxc_to_ncx(c, t, xs.rank);
        t = gg::reshape_4d(c.ctx, spatial::dense_f32(c, t), x.W, x.H, x.C, x.N);
        t = gg::interpolate(c.ctx, t, y.W, y.H, x.C, x.N, mode);
        if (nxc) {
            Dims ncx = ys;
            ncx.d[1] = y.C;
            for (int i = 2; i < ys.rank; ++i) ncx.d[i] = ys[i - 1];
            t = gg::cont(c.ctx, spatial::ncx_to_nxc(c, c.reshape(t, ncx), ys.rank));
        }
        r = c.reshape(t, ys);
    }
    c.out = {c.cast(r, ggml_type_of(c.out_dtype(0)))};
}

}  // namespace

void register_interpolate(LoweringTable& t) { t.add(uint16_t(K::Interpolate), lower_interpolate); }

}  // namespace dg
