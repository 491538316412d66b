// Convolution and ConvTranspose: our im2col + sgemm kernels (kernels/conv.h;
// 3x3 of stride 1 by Winograd, kernels/winograd.h), in f32; QuantizedConvolution: the integer kernel (kernels/int8_conv.h). The
// shapes of the IR are checked here against each other before a kernel
// indexes with them.
#include "../generated/dyngraph_ir_generated.h"
#include "../kernels/conv.h"
#include "../kernels/int8_conv.h"
#include "../kernels/winograd.h"
#include "families.h"
#include "fused_activation.h"
#include "int8_params.h"
#include "portable.h"
#include "spatial.h"

#include <algorithm>
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
    // a negative end padding crops a convolution's input (not a transposed one's output)
    spatial::per_axis_exprs(c, a.resolved_pads_end, ns, peh, pew, "resolved_pads_end", transposed ? 0 : -spatial::kMaxWindow);
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

// 3 spatial axes (rank 5) as one 2-D convolution by our kernel: the KD depth-shifted views of src
// joined along the channels of a batch of N*OD slices, each group's KD*C/g channels in (kd, channel)
// order, and the weights' depth axis moved beside their input channels.
// NCX [N, C, D, H, W] -> [N*OD, (g, kd, c), H, W]; NXC [N, D, H, W, C] -> [N*OD, H, W, (g, kd, c)];
// dst comes out as [N*OD, O, OH, OW] (permuted to NCX) or directly as NXC [N, OD, OH, OW, O].
// The views are made only of the depth rows some window reads: the output positions whose row lies
// in the depth padding get zeros of their own, so no padded copy of src is made (a stride and a
// padding of 2^31 would have made one of 2^31 rows for a single output).
void lower_convolution_3d(LowerCtx& c, const ops::ConvolutionAttrs& a, bool nxc, bool oix) {
    if (!c.host()) c.not_portable("a convolution over 3 spatial axes");
    const Dims xs = c.in_shape(0), ws = c.in_shape(1), ys = c.out_shape(0);
    const spatial::Layout3 x = spatial::layout3_of(c, xs, nxc, "src"), y = spatial::layout3_of(c, ys, nxc, "dst");
    if (ws.rank != 5 || y.N != x.N) c.unsupported(cat("weights ", ws.str(), " and dst ", ys.str(), " do not fit src ", xs.str()));
    const int64_t G = a.groups;
    if (G < 1 || x.C % G || y.C % G) c.unsupported(cat(x.C, " input and ", y.C, " output channels in ", G, " groups"));
    const int64_t O = y.C, Cg = x.C / G;
    const int64_t KD = oix ? ws[2] : ws[0], KH = oix ? ws[3] : ws[1], KW = oix ? ws[4] : ws[2];
    const Dims want = oix ? Dims{5, {O, Cg, KD, KH, KW}} : Dims{5, {KD, KH, KW, Cg, O}};
    for (int i = 0; i < 5; ++i)
        if (ws[i] != want[i]) c.unsupported(cat("weights ", ws.str(), " do not fit src ", xs.str(), " and dst ", ys.str()));
    // one view per kernel depth: a bound on the graph this lowering makes (ops/spatial.py MAX_KERNEL_DEPTH)
    if (KD > spatial::kMaxKernelDepth)
        c.unsupported(cat("a kernel depth of ", KD, " (weights ", ws.str(), ") is above the limit of ",
                          spatial::kMaxKernelDepth, " of a convolution over 3 spatial axes"));
    const auto st = spatial::per_axis3(c, a.strides, "strides"), dl = spatial::per_axis3(c, a.dilations, "dilations");
    const auto pb = spatial::per_axis3(c, spatial::eval_exprs(c, a.resolved_pads_begin, "resolved_pads_begin"), "pads_begin");
    const auto pe = spatial::per_axis3(
        c, spatial::eval_exprs(c, a.resolved_pads_end, "resolved_pads_end", -spatial::kMaxWindow), "pads_end");
    spatial::require_int_sizes(c, {x.N, x.C, x.D, x.H, x.W, O, y.D, y.H, y.W, KD, KH, KW, st[0], st[1], st[2], dl[0],
                                   dl[1], dl[2], G, x.N * y.D, x.H * x.W * x.C, KD * x.C, KD * KH * KW * x.C,
                                   KH * KW * O * KD, y.H * y.W});
    const spatial::WindowAxis axes[3] = {{x.D, y.D, KD, st[0], dl[0], pb[0], pe[0]},
                                         {x.H, y.H, KH, st[1], dl[1], pb[1], pe[1]},
                                         {x.W, y.W, KW, st[2], dl[2], pb[2], pe[2]}};
    for (const spatial::WindowAxis& w : axes)
        if (w.extent() > w.L + w.pad_begin + w.pad_end || w.floor_outputs() != w.n)
            c.unsupported(cat("dst ", ys.str(), " is not the output of this convolution of ", xs.str()));
    const int64_t D = x.D, OD = y.D, HW = x.H * x.W;
    // src as [inner, D, outer...] (ggml ne): NCX [HW, D, C, N], NXC [HW*C, D, N, 1]
    ggml_tensor* t = spatial::dense_f32(c, c.in[0]);
    const int64_t inner = nxc ? HW * x.C : HW, outer2 = nxc ? x.N : x.C, outer3 = nxc ? 1 : x.N;
    t = gg::reshape_4d(c.ctx, t, inner, D, outer2, outer3);
    // a view's output positions as ggml ne: NXC [HW*C, OD, N, 1], NCX [HW, C, OD, N]
    const int od_axis = nxc ? 1 : 2;
    auto zeros = [&](int64_t n_od) {
        int64_t ne[4] = {inner, nxc ? n_od : x.C, nxc ? x.N : n_od, nxc ? 1 : x.N};
        return gg::fill(c.ctx, gg::new_tensor(c.ctx, GGML_TYPE_F32, ne), 0.0f);
    };
    ggml_tensor* cols = nullptr;
    for (int64_t kd = 0; kd < KD; ++kd) {
        // output o reads depth row base + o*sd (all below 2^44: kd < 2^12, dilation and padding < 2^31);
        // rows in [0, D) for o in [lo, hi), the padding (zeros) elsewhere
        const int64_t base = kd * dl[0] - pb[0];
        const int64_t lo = std::min(OD, base >= 0 ? 0 : (-base + st[0] - 1) / st[0]);
        const int64_t hi = std::max(lo, std::min(OD, base >= D ? 0 : (D - 1 - base) / st[0] + 1));
        ggml_tensor* v = nullptr;
        if (hi > lo) {
            const size_t off = size_t(base + lo * st[0]) * t->nb[1];
            v = nxc ? gg::view_4d(c.ctx, t, inner, hi - lo, x.N, 1, t->nb[1] * size_t(st[0]), t->nb[2], t->nb[3], off)
                    : gg::view_4d(c.ctx, t, HW, x.C, hi - lo, x.N, t->nb[2], t->nb[1] * size_t(st[0]), t->nb[3], off);
            v = c.cont(v);
            if (lo > 0) v = gg::concat(c.ctx, zeros(lo), v, od_axis);
            if (hi < OD) v = gg::concat(c.ctx, v, zeros(OD - hi), od_axis);
        } else {
            v = zeros(OD);
        }
        // NXC [HW*C, OD, N] -> [Cg, G, HW*OD*N]; NCX [HW, C, OD, N] -> [HW, Cg, G, OD*N]
        v = nxc ? gg::reshape_4d(c.ctx, v, Cg, G, HW * OD * x.N, 1) : gg::reshape_4d(c.ctx, v, HW, Cg, G, OD * x.N);
        cols = cols ? gg::concat(c.ctx, cols, v, nxc ? 0 : 1) : v;
    }
    // weights: OIX [O, Cg, KD, KH, KW] -> [O, KD*Cg, KH, KW]; XIO [KD, KH, KW, Cg, O] -> [KH, KW, KD*Cg, O]
    ggml_tensor* w = spatial::dense_f32(c, c.in[1]);
    if (oix) {
        w = gg::reshape_4d(c.ctx, w, KH * KW, KD, Cg, O);
        w = gg::reshape_4d(c.ctx, c.cont(gg::permute(c.ctx, w, 0, 2, 1, 3)), KW, KH, KD * Cg, O);
    } else {
        w = gg::reshape_4d(c.ctx, w, O * Cg, KH * KW, KD, 1);
        w = gg::reshape_4d(c.ctx, c.cont(gg::permute(c.ctx, w, 0, 2, 1, 3)), O, KD * Cg, KW, KH);
    }
    kernels::ConvShape s;
    s.N = x.N * OD, s.C = KD * x.C, s.H = x.H, s.W = x.W;
    s.O = O, s.OH = y.H, s.OW = y.W, s.KH = KH, s.KW = KW;
    s.sh = st[1], s.sw = st[2], s.dh = dl[1], s.dw = dl[2], s.ph = pb[1], s.pw = pb[2];
    s.groups = G, s.nxc = nxc, s.channels_first_weights = oix;
    cols = nxc ? gg::reshape_4d(c.ctx, cols, s.C, s.W, s.H, s.N) : gg::reshape_4d(c.ctx, cols, s.W, s.H, s.C, s.N);
    const int64_t ne[4] = {nxc ? O : y.W, nxc ? y.W : y.H, nxc ? y.H : O, s.N};
    ggml_tensor* r = kernels::conv2d(c.ctx, cols, w, bias_of(c, O), c.keep(s), ne);
    if (!nxc) {  // [OH*OW, O, OD, N] -> [OH*OW, OD, O, N]
        r = gg::reshape_4d(c.ctx, r, y.H * y.W, O, OD, x.N);
        r = c.cont(gg::permute(c.ctx, r, 0, 2, 1, 3));
    }
    c.out = {c.cast(c.reshape(r, ys), ggml_type_of(c.out_dtype(0)))};
}

// Winograd's transformed weights held by the partition (computed at the first build that needs them)
// where the weights are one of its constants as uploaded; else nullptr (the convolution transforms them).
ggml_tensor* winograd_weights(LowerCtx& c, const kernels::ConvShape& s, ggml_tensor* w) {
    if (!c.env.derived || !kernels::winograd_fits(s, true) || w != c.in[1] || !w->data ||
        c.prog.tensors[size_t(c.op.inputs[1])].property != Property::Constant)
        return nullptr;
    const auto ne = kernels::winograd_weights_ne(s);
    const auto* wd = static_cast<const float*>(w->data);
    return c.env.derived->get(w, kWinogradWeights, {s.groups, s.channels_first_weights}, ne.data(),
                              [&](float* u) { kernels::winograd_transform_weights(wd, s, u); });
}

// dst + r as the Add that alone reads dst (once) stands for it: r, its other input, already computed as
// dense f32 of dst's very shape (a residual: ResNet's block output), and the sum f32 of dst's shape and
// rank; else nullptr. *add gets that Add, *at the input that is dst.
ggml_tensor* fused_residual(const LowerCtx& c, const int64_t ne[4], const OpDef** add, size_t* at) {
    *add = c.out_dtype(0) == DType::F32 && c.env.vals ? c.only_reader(c.op.outputs[0], at) : nullptr;
    const OpDef* a = *add;
    if (!a || a->kind != uint16_t(K::Add) || a->inputs.size() != 2 || a->outputs.size() != 1 ||
        c.prog.tensors[size_t(a->outputs[0])].dtype != DType::F32)
        return nullptr;
    const Dims sum = c.shape_of(a->outputs[0]), dst = c.out_shape(0);
    if (sum.rank != dst.rank || !std::equal(sum.d, sum.d + sum.rank, dst.d)) return nullptr;
    const int32_t other = a->inputs[1 - *at];
    ggml_tensor* r = size_t(other) < c.env.vals->size() ? (*c.env.vals)[size_t(other)] : nullptr;
    if (!r || r->type != GGML_TYPE_F32 || !is_dense(r)) return nullptr;
    for (int i = 0; i < 4; ++i)
        if (r->ne[i] != ne[i]) return nullptr;
    return r;
}

void lower_convolution(LowerCtx& c) {
    const auto& a = c.attrs<ops::ConvolutionAttrs>();
    using A = ops::ConvolutionAttrs;
    const bool nxc = a.data_format == A::DataFormat::NXC;
    if (c.in_shape(0).rank == 5) return lower_convolution_3d(c, a, nxc, a.weights_format == A::WeightsFormat::OIX);
    kernels::ConvShape s =
        checked_conv_shape(c, a, nxc, a.weights_format == A::WeightsFormat::OIX ? Channels::first : Channels::last);
    if (!c.host()) return lower_convolution_portable(c, a, s, nxc, a.weights_format == A::WeightsFormat::OIX);
    const auto ne = c.out_shape(0).ne();
    // our kernel applies to each block it writes: the residual an Add alone reading dst adds, then the
    // ReLU (or GELU) that alone reads the result
    const OpDef* add = nullptr;
    size_t at = 0;
    ggml_tensor* residual = fused_residual(c, ne.data(), &add, &at);
    if (residual) {
        c.absorb(*add, at);
        s.residual = true;
    }
    const OpDef* reader = nullptr;
    s.act = fused_activation(c, residual ? add->outputs[0] : c.op.outputs[0], &reader);
    if (s.act != kernels::Activation::None) c.absorb(*reader);
    ggml_tensor* x = spatial::dense_f32(c, c.in[0]);
    ggml_tensor* w = spatial::dense_f32(c, c.in[1]);
    ggml_tensor* y = kernels::conv2d(c.ctx, x, w, bias_of(c, s.O), c.keep(s), ne.data(), winograd_weights(c, s, w),
                                     residual);
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
