// Quantize and dequantize (ops/quantize.py), as ggml custom ops, with the
// arithmetic the op rules define exactly:
//   quantize:   q = clamp(round_half_even(x * inv_scale) + zp, lo, hi)   (f32; NaN -> zp)
//               q = f8(x * inv_scale)                                    (f8: f8.h's rounding)
//   dequantize: x = (q - zp) * scale                                      (f32)
// u8, s8, s4, u4 and the f8 types are held one element a byte in I8 tensors
// (s4 / u4: the value in the low 4 bits, two's complement for s4, written with
// the high 4 bits zero and read ignoring them); which one a tensor is
// travels in the parameters. Scales and zero points come from a list per channel
// (the attribute forms: one entry, or one per index along one ggml
// dimension) or from tensors (the Dynamic forms: one entry per group of
// elements, group[d] elements along ggml dimension d).
//
// This file is compiled with -ffp-contract=off (CMakeLists.txt): a product
// followed by a sum must round twice, as the definition says, never fuse.
#pragma once

#include <cstdint>
#include <vector>

#include "../dtype.h"
#include "ggml.h"

namespace dg::kernels {

enum class ZpKind : uint8_t { None, U8, S8, U4, S4, I32 };

// the quantized side's type
enum class QType : uint8_t { U8, S8, U4, S4, F8E4M3, F8E5M2 };

struct QuantParams {
    QType qtype = QType::S8;
    // attribute form: scale[c] / zp[c] for c the index along ggml dimension `dim` (or c = 0 when the list has
    // one entry). For quantize, scale holds the inverse scales (1 / scale, rounded to f32).
    int dim = 0;
    std::vector<float> scale;
    std::vector<float> zp;  // empty: zero
    // tensor form (src[1] F32 scales, src[2] zero points): entry (i0 / group[0], i1 / group[1], ...)
    bool from_tensors = false;
    int64_t group[4] = {1, 1, 1, 1};
    ZpKind zp_kind = ZpKind::None;
};

inline bool is_f8(DType t) { return t == DType::F8E4M3 || t == DType::F8E5M2; }

// Whether quantize / dequantize take `t` as their quantized side.
inline bool is_quantized(DType t) {
    return t == DType::U8 || t == DType::S8 || t == DType::S4 || t == DType::U4 || is_f8(t);
}

// The quantized side's QType of a dtype (is_quantized(t)).
inline QType qtype_of(DType t) {
    switch (t) {
        case DType::U8: return QType::U8;
        case DType::U4: return QType::U4;
        case DType::S4: return QType::S4;
        case DType::F8E4M3: return QType::F8E4M3;
        case DType::F8E5M2: return QType::F8E5M2;
        default: return QType::S8;
    }
}

// Per tensor, scale 1, no zero point: a plain conversion (TypeCast of an f8 type).
inline QuantParams unit_params(DType t) {
    QuantParams p;
    p.qtype = qtype_of(t);
    p.scale = {1.0f};
    return p;
}

// I8 (p.qtype's bytes) from F32 `src` (dense); scales / zps: the tensor form's inputs (or null).
ggml_tensor* quantize(ggml_context* ctx, ggml_tensor* src, ggml_tensor* scales, ggml_tensor* zps, const QuantParams* p);

// F32 from I8 `src` (dense).
ggml_tensor* dequantize(ggml_context* ctx, ggml_tensor* src, ggml_tensor* scales, ggml_tensor* zps,
                        const QuantParams* p);

// The quantization of one f32 value (shared with the int8 products' requantization). Written as selects
// (no branch on the data: a branch per clamp mispredicts wherever outputs saturate at random).
inline int32_t quantize_value(float x, float inv_scale, float zp, float lo, float hi) {
    float p = x * inv_scale;
    p = p == p ? p : 0.0f;  // NaN: rounds to 0, so the result is zp
    // clamped first (the result saturates beyond anyway), so the rounding below is exact
    p = p < -4194304.0f ? -4194304.0f : p;
    p = p > 4194304.0f ? 4194304.0f : p;
    const float magic = 12582912.0f;  // 1.5 * 2^23: adding and subtracting it rounds half to even
    float r = (p + magic) - magic;
    r += zp;
    r = r < lo ? lo : r;
    r = r > hi ? hi : r;
    return int32_t(r);
}

}  // namespace dg::kernels
