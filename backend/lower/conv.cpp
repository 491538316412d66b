// Convolution and ConvTranspose: our im2col + sgemm kernels (kernels/conv.h),
// in f32; QuantizedConvolution: the integer kernel (kernels/int8_conv.h). The
// shapes of the IR are checked here against each other before a kernel
// indexes with them.
#include "../generated/dyngraph_ir_generated.h"
#include "../kernels/conv.h"
#include "../kernels/int8_conv.h"
#include "families.h"
#include "int8_params.h"
#include "portable.h"
#include "spatial.h"

#include <array>

namespace dg {

using K = dyngraph::fb::OpKind;

namespace {

using spatial::Layout;

// Where the weights keep their channel axes: OIX / IOX (first), XIO / XOI (last), OXI (around the kernel).
enum class Channels { first, last, around };

template <class Attrs>
kernels::ConvShape conv_shape(LowerCtx& c, const Attrs& a, bool nxc, Channels wch) {
    const Dims xs = c.in_shape(0), ws = c.in_shape(1), ys = c.out_shape(0);
    const Layout x = spatial::layout_of(c, xs, nxc, "src");
    const Layout y = spatial::layout_of(c, ys, nxc, "dst");
    const int ns = xs.rank - 2;
    if (ws.rank != xs.rank || ys.rank != xs.rank) c.unsupported(cat("weights ", ws.str(), " and dst ", ys.str(), " must have src's rank"));
    kernels::ConvShape s;
    s.N = x.N, s.C = x.C, s.H = x.H, s.W = x.W;
    s.O = y.C, s.OH = y.H, s.OW = y.W;
    s.nxc = nxc;
    s.channels_first_weights = wch == Channels::first;
    // kernel sizes: the spatial axes of the weights (last two in OIX / IOX, first two in XIO / XOI, the middle
    // in OXI)
    const int k0 = wch == Channels::first ? 2 : wch == Channels::last ? 0 : 1;
    s.KH = ns == 2 ? ws[k0] : 1;
    s.KW = ws[k0 + ns - 1];
    spatial::per_axis(c, a.strides, ns, 1, s.sh, s.sw, "strides");
    spatial::per_axis(c, a.dilations, ns, 1, s.dh, s.dw, "dilations");
    spatial::per_axis_exprs(c, a.resolved_pads_begin, ns, s.ph, s.pw, "resolved_pads_begin");
    s.groups = a.groups;
    if (y.N != x.N) c.unsupported(cat("src ", xs.str(), " and dst ", ys.str(), " differ in batch"));
    spatial::require_int_sizes(c, {s.N, s.C, s.H * s.W, s.O, s.OH * s.OW, s.KH * s.KW * s.C, s.KH * s.KW * s.O});
    spatial::require_int_sizes(c, {s.sh, s.sw, s.dh, s.dw, s.groups});
    return s;
}

// The windows of both spatial axes (H and W), their end paddings from `pads_end`.
template <class Attrs>
std::array<spatial::WindowAxis, 2> windows(LowerCtx& c, const Attrs& a, const kernels::ConvShape& s, bool transposed) {
    const int ns = c.out_shape(0).rank - 2;
    int64_t peh = 0, pew = 0;
    spatial::per_axis_exprs(c, a.resolved_pads_end, ns, peh, pew, "resolved_pads_end");
    // a convolution slides over src (L = H, n = OH); a transposed one over dst
    const int64_t H = transposed ? s.OH : s.H, OH = transposed ? s.H : s.OH;
    const int64_t W = transposed ? s.OW : s.W, OW = transposed ? s.W : s.OW;
    return {spatial::WindowAxis{H, OH, s.KH, s.sh, s.dh, s.ph, peh}, spatial::WindowAxis{W, OW, s.KW, s.sw, s.dw, s.pw, pew}};
}

// Weights of `shape` must be [a, b, KH, KW] (channels first), [KH, KW, b, a] (last) or [a, KH, KW, b]
// (around) (1-D: without KH).
void check_weights(LowerCtx& c, const kernels::ConvShape& s, Channels wch, int64_t first, int64_t second) {
    const Dims ws = c.in_shape(1);
    Dims want = ws;
    const int ns = ws.rank - 2;
    int i = 0;
    auto put = [&](int64_t v) { want.d[i++] = v; };
    auto kernel = [&] {
        if (ns == 2) put(s.KH);
        put(s.KW);
    };
    if (wch == Channels::first) {
        put(first), put(second), kernel();
    } else if (wch == Channels::last) {
        kernel(), put(second), put(first);
    } else {
        put(first), kernel(), put(second);
    }
    for (int d = 0; d < ws.rank; ++d)
        if (ws[d] != want[d]) c.unsupported(cat("weights ", ws.str(), " do not fit src ", c.in_shape(0).str(), " and dst ",
                                                c.out_shape(0).str(), " (", s.groups, " groups): want ", want.str()));
}

ggml_tensor* bias_of(LowerCtx& c, int64_t O) {
    if (c.n_in() < 3) return nullptr;
    const Dims b = c.in_shape(2);
    if (b.rank != 1 || b[0] != O) c.unsupported(cat("bias ", b.str(), " must have the ", O, " output channels"));
    return spatial::dense_f32(c, c.in[2]);
}

// The checks of a Convolution's (or QuantizedConvolution's) shapes: groups, weights, the window's output size.
template <class Attrs>
kernels::ConvShape checked_conv_shape(LowerCtx& c, const Attrs& a, bool nxc, Channels wch) {
    const kernels::ConvShape s = conv_shape(c, a, nxc, wch);
    if (s.C % s.groups || s.O % s.groups) c.unsupported(cat(s.C, " input and ", s.O, " output channels in ", s.groups, " groups"));
    check_weights(c, s, wch, s.O, s.C / s.groups);
    // the output sizes are those of this window (the IR's shapes are not trusted blindly)
    const Dims ys = c.out_shape(0);
    for (const spatial::WindowAxis& w : windows(c, a, s, false))
        if (w.extent() > w.L + w.pad_begin + w.pad_end || w.floor_outputs() != w.n)
            c.unsupported(cat("dst ", ys.str(), " is not the output of this convolution of ", c.in_shape(0).str()));
    return s;
}

// Off the host CPU: ggml's im2col (windows as columns, zeros in the padding) and one product with
// the weights, in f32, in NCX: src [W, H, C, N] and weights [KW, KH, C, O] (ggml ne; 1-D as H = 1).
// One group only, and end paddings no larger than the begin ones (ggml pads both ends alike: the
// extra windows that gives are cut off).
void lower_convolution_portable(LowerCtx& c, const ops::ConvolutionAttrs& a, const kernels::ConvShape& s, bool nxc,
                                bool oix) {
    if (s.groups != 1) c.not_portable(cat("a convolution in ", s.groups, " groups"));
    const auto win = windows(c, a, s, false);
    for (const spatial::WindowAxis& w : win)
        if (w.pad_end > w.pad_begin) c.not_portable(cat("an end padding of ", w.pad_end, " above the begin padding of ", w.pad_begin));
    const int rank = c.in_shape(0).rank;
    ggml_tensor* x = c.in[0];
    if (nxc) x = spatial::nxc_to_ncx(c, x, rank);
    x = gg::reshape_4d(c.ctx, portable::dense_f32(c, x), s.W, s.H, s.C, s.N);
    ggml_tensor* w = c.in[1];
    if (!oix) {  // XIO [K..., I, O] -> OIX [O, I, K...]
        const int xio4[4] = {3, 2, 0, 1}, xio3[3] = {2, 1, 0};
        w = c.permute(w, rank, rank == 4 ? xio4 : xio3);
    }
    w = gg::reshape_4d(c.ctx, portable::dense_f32(c, w), s.KW, s.KH, s.C, s.O);
    ggml_tensor* cols = gg::im2col(c.ctx, w, x, int(s.sw), int(s.sh), int(s.pw), int(s.ph), int(s.dw), int(s.dh));
    if (cols->ne[1] != s.OW || cols->ne[2] != s.OH)
        cols = c.cont(gg::view_4d(c.ctx, cols, cols->ne[0], s.OW, s.OH, s.N, cols->nb[1], cols->nb[2], cols->nb[3], 0));
    const int64_t K = cols->ne[0];
    ggml_tensor* y = gg::mul_mat(c.ctx, gg::reshape_2d(c.ctx, cols, K, s.OW * s.OH * s.N), gg::reshape_2d(c.ctx, w, K, s.O));
    y = c.cont(gg::permute(c.ctx, gg::reshape_4d(c.ctx, y, s.OW, s.OH, s.N, s.O), 0, 1, 3, 2));  // [OW, OH, O, N]
    if (ggml_tensor* bias = bias_of(c, s.O)) y = gg::add(c.ctx, y, gg::reshape_4d(c.ctx, bias, 1, 1, s.O, 1));
    const Dims ys = c.out_shape(0);
    Dims ncx = ys;  // dst's shape in NCX
    if (nxc) {
        ncx.d[1] = ys[rank - 1];
        for (int i = 2; i < rank; ++i) ncx.d[i] = ys[i - 1];
    }
    y = c.reshape(y, ncx);
    if (nxc) y = c.cont(spatial::ncx_to_nxc(c, y, rank));
    c.out = {c.cast(y, ggml_type_of(c.out_dtype(0)))};
}

void lower_convolution(LowerCtx& c) {
    const auto& a = c.attrs<ops::ConvolutionAttrs>();
    using A = ops::ConvolutionAttrs;
    const bool nxc = a.data_format == A::DataFormat::NXC;
    const kernels::ConvShape s =
        checked_conv_shape(c, a, nxc, a.weights_format == A::WeightsFormat::OIX ? Channels::first : Channels::last);
    if (!c.host()) return lower_convolution_portable(c, a, s, nxc, a.weights_format == A::WeightsFormat::OIX);
    ggml_tensor* x = spatial::dense_f32(c, c.in[0]);
    ggml_tensor* w = spatial::dense_f32(c, c.in[1]);
    const auto ne = c.out_shape(0).ne();
    ggml_tensor* y = kernels::conv2d(c.ctx, x, w, bias_of(c, s.O), c.keep(s), ne.data());
    c.out = {c.cast(y, ggml_type_of(c.out_dtype(0)))};
}

// src made NXC and weights OXI (byte copies, unless they are so already), then the integer kernel.
void lower_quantized_convolution(LowerCtx& c) {
    const auto& a = c.attrs<ops::QuantizedConvolutionAttrs>();
    using A = ops::QuantizedConvolutionAttrs;
    const bool nxc = a.data_format == A::DataFormat::NXC;
    const Channels wch = a.weights_format == A::WeightsFormat::OIX   ? Channels::first
                         : a.weights_format == A::WeightsFormat::XIO ? Channels::last
                                                                     : Channels::around;
    kernels::Int8ConvParams p;
    p.shape = checked_conv_shape(c, a, nxc, wch);
    p.q = int8::params(c, a, p.shape.O, "output channels");
    p.shape.channels_first_weights = false;
    const kernels::ConvShape& s = p.shape;
    const int rank = c.in_shape(0).rank;
    p.src_nxc = nxc || !(s.C == s.groups && s.O == s.groups);  // depthwise kernels read NCX planes as they are
    ggml_tensor* x = c.cont(c.in[0]);
    if (!nxc && p.src_nxc) x = kernels::int8_ncx_to_nxc(c.ctx, x, s.N, s.C, s.H, s.W);
    ggml_tensor* w = c.cont(c.in[1]);
    if (wch != Channels::around) {  // OIX [O, I, K...] or XIO [K..., I, O] -> [O, K..., I]
        const int oix4[4] = {0, 2, 3, 1}, oix3[3] = {0, 2, 1}, xio4[4] = {3, 0, 1, 2}, xio3[3] = {2, 0, 1};
        const int* perm = wch == Channels::first ? (rank == 4 ? oix4 : oix3) : (rank == 4 ? xio4 : xio3);
        w = c.cont(c.permute(w, rank, perm));
    }
    const auto ne = c.out_shape(0).ne();
    ggml_tensor* y = kernels::int8_conv2d(c.ctx, x, w, bias_of(c, p.shape.O), c.keep(std::move(p)), ne.data());
    c.out = {c.cast(y, ggml_type_of(c.out_dtype(0)))};
}

void lower_conv_transpose(LowerCtx& c) {
    const auto& a = c.attrs<ops::ConvTransposeAttrs>();
    using A = ops::ConvTransposeAttrs;
    const bool nxc = a.data_format == A::DataFormat::NXC;
    const Channels wch = a.weights_format == A::WeightsFormat::IOX ? Channels::first : Channels::last;
    const kernels::ConvShape s = conv_shape(c, a, nxc, wch);
    if (s.C % s.groups || s.O % s.groups) c.unsupported(cat(s.C, " input and ", s.O, " output channels in ", s.groups, " groups"));
    check_weights(c, s, wch, s.C, s.O / s.groups);
    // dst = (src - 1) * stride + dilated kernel + output_padding - pads, per axis
    const int ns = c.in_shape(0).rank - 2;
    int64_t oph = 0, opw = 0;
    if (!a.output_padding.empty()) spatial::per_axis(c, a.output_padding, ns, 0, oph, opw, "output_padding");
    const auto win = windows(c, a, s, true);
    const int64_t op[2] = {oph, opw};
    for (int i = 0; i < 2; ++i)
        if (op[i] < 0 || op[i] > spatial::kMaxWindow ||
            (win[i].n - 1) * win[i].stride + win[i].extent() + op[i] - win[i].pad_begin - win[i].pad_end != win[i].L)
            c.unsupported(cat("dst ", c.out_shape(0).str(), " is not the output of this transposed convolution of ",
                              c.in_shape(0).str()));
    ggml_tensor* x = spatial::dense_f32(c, c.in[0]);
    ggml_tensor* w = spatial::dense_f32(c, c.in[1]);
    const auto ne = c.out_shape(0).ne();
    ggml_tensor* y = kernels::conv_transpose2d(c.ctx, x, w, bias_of(c, s.O), c.keep(s), ne.data());
    c.out = {c.cast(y, ggml_type_of(c.out_dtype(0)))};
}

}  // namespace

void register_conv(LoweringTable& t) {
    t.add(uint16_t(K::Convolution), lower_convolution);
    t.add(uint16_t(K::ConvTranspose), lower_conv_transpose);
    t.add(uint16_t(K::QuantizedConvolution), lower_quantized_convolution);
}

}  // namespace dg
