// BatchNormInference (our one-pass kernel, kernels/batch_norm.h) and
// GroupNorm (ggml_group_norm on NCX data, then the per-channel affine).
#include "../generated/dyngraph_ir_generated.h"
#include "../kernels/batch_norm.h"
#include "families.h"
#include "spatial.h"

namespace dg {

using K = dyngraph::fb::OpKind;

namespace {

// [N, C, S] sizes of a rank 2-4 tensor in NCX / NXC (S: the spatial size).
void channel_sizes(LowerCtx& c, const Dims& d, bool nxc, int64_t& N, int64_t& C, int64_t& S) {
    if (d.rank < 2 || d.rank > 4) c.unsupported(cat("src ", d.str(), " must have rank 2 to 4"));
    N = d[0];
    C = nxc ? d[d.rank - 1] : d[1];
    S = d.numel() / (N * C);
}

ggml_tensor* channel_vector(LowerCtx& c, size_t k, int64_t C, const char* what) {
    const Dims p = c.in_shape(k);
    if (p.rank != 1 || p[0] != C) c.unsupported(cat(what, " ", p.str(), " must have the ", C, " channels"));
    return spatial::dense_f32(c, c.in[k]);
}

void lower_batch_norm(LowerCtx& c) {
    using A = ops::BatchNormInferenceAttrs;
    const auto& a = c.attrs<A>();
    const bool nxc = a.data_format == A::DataFormat::NXC;
    int64_t N, C, S;
    channel_sizes(c, c.in_shape(0), nxc, N, C, S);
    kernels::BatchNormShape s;
    s.outer = nxc ? N * S : N;
    s.C = C;
    s.inner = nxc ? 1 : S;
    s.eps = float(a.epsilon);
    ggml_tensor* p[4];
    const char* names[4] = {"gamma", "beta", "mean", "variance"};
    for (size_t k = 0; k < 4; ++k) p[k] = channel_vector(c, k + 1, C, names[k]);
    ggml_tensor* y = kernels::batch_norm(c.ctx, spatial::dense_f32(c, c.in[0]), p[0], p[1], p[2], p[3], c.keep(s));
    c.out = {c.cast(y, ggml_type_of(c.out_dtype(0)))};
}

void lower_group_norm(LowerCtx& c) {
    using A = ops::GroupNormAttrs;
    const auto& a = c.attrs<A>();
    const bool nxc = a.data_format == A::DataFormat::NXC;
    const Dims xs = c.in_shape(0);
    int64_t N, C, S;
    channel_sizes(c, xs, nxc, N, C, S);
    if (a.groups < 1 || a.groups > C || C % a.groups) c.unsupported(cat(a.groups, " groups of ", C, " channels"));
    ggml_tensor* x = c.in[0];
    if (nxc && xs.rank > 2) x = spatial::nxc_to_ncx(c, x, xs.rank);
    // [N, C, S] as ggml [S, 1, C, N]: ggml normalizes groups of ne2 over ne0 * ne1
    x = gg::reshape_4d(c.ctx, spatial::dense_f32(c, x), S, 1, C, N);
    x = gg::group_norm(c.ctx, x, int(a.groups), float(a.epsilon));
    if (a.use_affine && c.n_in() == 3) {
        x = gg::mul(c.ctx, x, gg::reshape_4d(c.ctx, channel_vector(c, 1, C, "gamma"), 1, 1, C, 1));
        x = gg::add(c.ctx, x, gg::reshape_4d(c.ctx, channel_vector(c, 2, C, "beta"), 1, 1, C, 1));
    }
    if (nxc && xs.rank > 2) {
        Dims ncx = xs;  // the logical NCX shape, then back to NXC
        ncx.d[1] = C;
        for (int i = 2; i < xs.rank; ++i) ncx.d[i] = xs[i - 1];
        x = gg::cont(c.ctx, spatial::ncx_to_nxc(c, c.reshape(x, ncx), xs.rank));
    } else {
        x = c.reshape(x, xs);
    }
    c.out = {c.cast(x, ggml_type_of(c.out_dtype(0)))};
}

}  // namespace

void register_channel_norm(LoweringTable& t) {
    t.add(uint16_t(K::BatchNormInference), lower_batch_norm);
    t.add(uint16_t(K::GroupNorm), lower_group_norm);
}

}  // namespace dg
