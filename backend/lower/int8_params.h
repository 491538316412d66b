// The checks and kernel parameters the fused int8 lowerings share
// (quantize.cpp: QuantizedMatMul; conv.cpp: QuantizedConvolution):
// scales and zero points of the IR checked against the dtypes they quantize
// (a file may carry anything), then converted as ops/quantize.py says.
#pragma once

#include <cmath>

#include "../errors.h"
#include "../kernels/int8_dot.h"
#include "../lowering.h"

namespace dg::int8 {

inline bool is_int8(DType t) { return t == DType::U8 || t == DType::S8; }

// a zero point of quantized type t (u8, s8, u4, s4; f8 takes only 0) inside t's range
inline void check_zp(const LowerCtx& c, int64_t zp, DType t, const char* what) {
    int64_t lo = 0, hi = 0;
    switch (t) {
        case DType::U8: hi = 255; break;
        case DType::S8: lo = -128, hi = 127; break;
        case DType::U4: hi = 15; break;
        case DType::S4: lo = -8, hi = 7; break;
        default: break;
    }
    if (zp < lo || zp > hi) c.unsupported(cat(what, " ", zp, " is outside the range of ", dtype_name(t)));
}

inline void check_scale(const LowerCtx& c, double s, const char* what) {
    if (!(s > 0) || !std::isfinite(s) || !std::isfinite(float(s)) || float(s) == 0.0f)
        c.unsupported(cat(what, " ", s, " is not a positive f32"));
}

// The parameters of a fused int8 op (src_scale, src_zp, wei_scales, wei_zps, dst_scale, dst_zp: the
// attributes of QuantizedMatMul and QuantizedConvolution) for src input 0, weights input 1, output 0,
// and n output columns (or channels: `what` names them).
template <class Attrs>
kernels::Int8Params params(const LowerCtx& c, const Attrs& a, int64_t n, const char* what = "columns") {
    const DType at = c.in_dtype(0), wt = c.in_dtype(1), ot = c.out_dtype(0);
    if (!is_int8(at) || !is_int8(wt)) c.internal_error("the inputs are not u8 / s8");
    if (!is_int8(ot) && ot != DType::F32 && ot != DType::F16 && ot != DType::BF16)
        c.internal_error("the output is not u8 / s8 or a float");
    kernels::Int8Params p;
    p.a_unsigned = at == DType::U8;
    p.w_unsigned = wt == DType::U8;
    check_zp(c, a.src_zp, at, "src_zp");
    p.a_zp = int32_t(a.src_zp);
    if (a.wei_zps.size() > 1 && int64_t(a.wei_zps.size()) != n) c.unsupported(cat(a.wei_zps.size(), " wei_zps for ", n, " ", what));
    for (int64_t z : a.wei_zps) {
        check_zp(c, z, wt, "wei_zps");
        p.w_zp.push_back(int32_t(z));
    }
    if (a.wei_scales.empty() || (a.wei_scales.size() > 1 && int64_t(a.wei_scales.size()) != n))
        c.unsupported(cat(a.wei_scales.size(), " wei_scales for ", n, " ", what));
    check_scale(c, a.src_scale, "src_scale");
    for (double s : a.wei_scales) {
        check_scale(c, s, "wei_scales");
        p.scale.push_back(float(a.src_scale) * float(s));
    }
    if (is_int8(ot)) {
        check_scale(c, a.dst_scale, "dst_scale");
        check_zp(c, a.dst_zp, ot, "dst_zp");
        p.quantize_out = true;
        p.out_unsigned = ot == DType::U8;
        p.out_inv = float(1.0 / a.dst_scale);
        p.out_zp = float(a.dst_zp);
    }
    return p;
}

}  // namespace dg::int8
