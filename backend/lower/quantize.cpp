// Quantization: Quantize, Dequantize (scales and zero points as attributes),
// DynamicQuantize, DynamicDequantize (as tensors), all computed by our
// kernels (kernels/quantize.h) for u8, s8, s4, u4, f8_e4m3 and f8_e5m2, and QuantizedMatMul, the int8 product
// (kernels/int8_gemm.h). The IR's attributes and shapes are checked here
// against the data they index (a file may carry anything).
#include "../generated/dyngraph_ir_generated.h"
#include "../gg.h"
#include "../kernels/int8_gemm.h"
#include "../kernels/quantize.h"
#include "families.h"
#include "int8_params.h"

namespace dg {

using K = dyngraph::fb::OpKind;

namespace {

using kernels::is_f8;
using kernels::qtype_of;

bool is_quant(DType t) { return kernels::is_quantized(t); }

using int8::check_scale;
using int8::check_zp;

// The attribute form's parameters: per tensor, or per channel along `axis`.
kernels::QuantParams attr_params(const LowerCtx& c, const ops::QuantizeAttrs& a, const Dims& s, DType qt, bool inverse) {
    kernels::QuantParams p;
    p.qtype = qtype_of(qt);
    size_t n = 1;
    if (a.qtype == ops::QuantizeAttrs::Qtype::per_channel) {
        if (a.axis < -s.rank || a.axis >= s.rank) c.unsupported(cat("axis ", a.axis, " is out of range for rank ", s.rank));
        const int axis = int(a.axis < 0 ? a.axis + s.rank : a.axis);
        p.dim = ggml_dim(axis, s.rank);
        n = size_t(s.d[axis]);
    }
    if (a.scales.size() != n || (a.zps.size() > 1 && a.zps.size() != n))
        c.unsupported(cat(a.scales.size(), " scales and ", a.zps.size(), " zero points for ", n, " channels"));
    for (double v : a.scales) {
        check_scale(c, v, "scale");
        p.scale.push_back(inverse ? float(1.0 / v) : float(v));
    }
    for (int64_t z : a.zps) {
        check_zp(c, z, qt, "zero point");
        p.zp.push_back(float(z));
    }
    return p;
}

void lower_quantize(LowerCtx& c) {
    const auto& a = c.attrs<ops::QuantizeAttrs>();
    const DType qt = c.out_dtype(0);
    if (!is_quant(qt)) c.internal_error("the output is not a quantized type");
    const auto* p = c.keep(attr_params(c, a, c.in_shape(0), qt, /*inverse=*/true));
    ggml_tensor* x = c.cast(c.cont(c.in[0]), GGML_TYPE_F32);
    c.out = {kernels::quantize(c.ctx, x, nullptr, nullptr, p)};
}

void lower_dequantize(LowerCtx& c) {
    const auto& a = c.attrs<ops::DequantizeAttrs>();
    const DType qt = c.in_dtype(0);
    if (!is_quant(qt)) c.internal_error("the input is not a quantized type");
    const auto* p = c.keep(attr_params(c, a, c.in_shape(0), qt, /*inverse=*/false));
    ggml_tensor* y = kernels::dequantize(c.ctx, c.cont(c.in[0]), nullptr, nullptr, p);
    c.out = {c.cast(y, ggml_type_of(c.out_dtype(0)))};
}

// The tensor form: scales (and zps) laid out so that element i of src reads entry i / group of them.
struct TensorScales {
    ggml_tensor* scales;
    ggml_tensor* zps;
    kernels::QuantParams params;
};

TensorScales tensor_params(LowerCtx& c, int qtype /*0 tensor, 1 channel, 2 group*/, int64_t axis,
                           const std::vector<int64_t>& group_shape, DType qt) {
    const Dims s = c.in_shape(0), ss = c.in_shape(1);
    TensorScales r{nullptr, nullptr, {}};
    r.params.qtype = qtype_of(qt);
    r.params.from_tensors = true;
    Dims laid;  // the scales' shape in src's rank
    laid.rank = s.rank;
    for (int d = 0; d < s.rank; ++d) laid.d[d] = 1;
    if (qtype == 0) {
        if (ss.numel() != 1) c.unsupported(cat("per_tensor takes one scale, got ", ss.str()));
    } else if (qtype == 1) {
        if (axis < -s.rank || axis >= s.rank) c.unsupported(cat("axis ", axis, " is out of range for rank ", s.rank));
        const int ax = int(axis < 0 ? axis + s.rank : axis);
        if (ss.rank != 1 || ss.d[0] != s.d[ax]) c.unsupported(cat("per_channel scales ", ss.str(), " for ", s.str()));
        laid.d[ax] = s.d[ax];
    } else {
        if (ss.rank != s.rank || int(group_shape.size()) != s.rank)
            c.unsupported(cat("per_group scales ", ss.str(), " and groups of ", group_shape.size(), " for ", s.str()));
        for (int d = 0; d < s.rank; ++d) {
            if (group_shape[size_t(d)] < 1 || ss.d[d] * group_shape[size_t(d)] != s.d[d])
                c.unsupported(cat("per_group scales ", ss.str(), " do not divide ", s.str(), " in groups"));
            laid.d[d] = ss.d[d];
        }
    }
    const auto ne_src = s.ne(), ne_sc = laid.ne();
    for (int d = 0; d < 4; ++d) r.params.group[d] = ne_src[size_t(d)] / ne_sc[size_t(d)];
    r.scales = c.cast(c.reshape(c.cont(c.in[1]), laid), GGML_TYPE_F32);
    if (c.n_in() == 3) {
        if (is_f8(qt)) c.unsupported(cat("zero points for ", dtype_name(qt), " (f8 takes none)"));
        const Dims zs = c.in_shape(2);
        if (zs.numel() != ss.numel() || (qtype == 2 && zs.rank != ss.rank)) c.unsupported(cat("zps ", zs.str(), " for scales ", ss.str()));
        if (qtype == 2)
            for (int d = 0; d < zs.rank; ++d)
                if (zs.d[d] != ss.d[d]) c.unsupported(cat("zps ", zs.str(), " for scales ", ss.str()));
        r.zps = c.reshape(c.cont(c.in[2]), laid);
        switch (c.in_dtype(2)) {
            case DType::U8: r.params.zp_kind = kernels::ZpKind::U8; break;
            case DType::S8: r.params.zp_kind = kernels::ZpKind::S8; break;
            case DType::U4: r.params.zp_kind = kernels::ZpKind::U4; break;
            case DType::S4: r.params.zp_kind = kernels::ZpKind::S4; break;
            case DType::I32: r.params.zp_kind = kernels::ZpKind::I32; break;
            default: c.internal_error("zps of an unexpected dtype");
        }
    }
    return r;
}

void lower_dynamic_quantize(LowerCtx& c) {
    const auto& a = c.attrs<ops::DynamicQuantizeAttrs>();
    const DType qt = c.out_dtype(0);
    if (!is_quant(qt)) c.internal_error("the output is not a quantized type");
    TensorScales t = tensor_params(c, int(a.qtype), a.axis, {}, qt);
    const auto* p = c.keep(std::move(t.params));
    ggml_tensor* x = c.cast(c.cont(c.in[0]), GGML_TYPE_F32);
    c.out = {kernels::quantize(c.ctx, x, t.scales, t.zps, p)};
}

void lower_dynamic_dequantize(LowerCtx& c) {
    const auto& a = c.attrs<ops::DynamicDequantizeAttrs>();
    const DType qt = c.in_dtype(0);
    if (!is_quant(qt)) c.internal_error("the input is not a quantized type");
    TensorScales t = tensor_params(c, int(a.qtype), a.axis, a.group_shape, qt);
    const auto* p = c.keep(std::move(t.params));
    ggml_tensor* y = kernels::dequantize(c.ctx, c.cont(c.in[0]), t.scales, t.zps, p);
    c.out = {c.cast(y, ggml_type_of(c.out_dtype(0)))};
}

void lower_quantized_matmul(LowerCtx& c) {
    const auto& a = c.attrs<ops::QuantizedMatMulAttrs>();
    const Dims as = c.in_shape(0), ws = c.in_shape(1);
    if (as.rank < 2 || ws.rank != 2) c.unsupported(cat("src ", as.str(), " and weights ", ws.str()));
    const int64_t K = as.d[as.rank - 1], M = as.numel() / K;
    const int64_t N = a.transpose_b ? ws.d[0] : ws.d[1];
    if ((a.transpose_b ? ws.d[1] : ws.d[0]) != K) c.unsupported(cat("src ", as.str(), " and weights ", ws.str(), " do not multiply"));
    kernels::Int8Params p = int8::params(c, a, N);
    ggml_tensor* src = gg::reshape_2d(c.ctx, c.cont(c.in[0]), K, M);
    // weights as rows of K: [N, K] logically (transpose_b), else a transposed copy
    ggml_tensor* w = a.transpose_b ? c.cont(c.in[1]) : gg::cont(c.ctx, gg::transpose(c.ctx, c.in[1]));
    ggml_tensor* bias = nullptr;
    if (c.n_in() == 3) {
        if (c.in_shape(2).numel() != N || c.in_dtype(2) != DType::F32) c.unsupported(cat("bias ", c.in_shape(2).str(), " for ", N, " columns"));
        bias = gg::reshape_1d(c.ctx, c.cont(c.in[2]), N);
    }
    ggml_tensor* y = kernels::int8_matmul(c.ctx, src, w, bias, c.keep(std::move(p)));
    c.out = {c.cast(c.reshape(y, c.out_shape(0)), ggml_type_of(c.out_dtype(0)))};
}

}  // namespace

void register_quantize(LoweringTable& t) {
    t.add(uint16_t(K::Quantize), lower_quantize);
    t.add(uint16_t(K::Dequantize), lower_dequantize);
    t.add(uint16_t(K::DynamicQuantize), lower_dynamic_quantize);
    t.add(uint16_t(K::DynamicDequantize), lower_dynamic_dequantize);
    t.add(uint16_t(K::QuantizedMatMul), lower_quantized_matmul);
}

}  // namespace dg
