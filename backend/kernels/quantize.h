// Quantize and dequantize (ops/quantize.py), as ggml custom ops, with the
// arithmetic the op rules define exactly:
//   quantize:   q = clamp(round_half_even(x * inv_scale) + zp, lo, hi)   (f32; NaN -> zp)
//   dequantize: x = (q - zp) * scale                                      (f32)
// u8 and s8 are held as bytes in I8 tensors; which one a tensor is travels
// in the parameters. Scales and zero points come from a list per channel
// (the attribute forms: one entry, or one per index along one ggml
// dimension) or from tensors (the Dynamic forms: one entry per group of
// elements, group[d] elements along ggml dimension d).
//
// This file is compiled with -ffp-contract=off (CMakeLists.txt): a product
// followed by a sum must round twice, as the definition says, never fuse.
#pragma once

#include <cstdint>
#include <vector>

#include "ggml.h"

namespace dg::kernels {

enum class ZpKind : uint8_t { None, U8, S8, I32 };

struct QuantParams {
    bool q_unsigned = false;  // the quantized side is u8 (else s8)
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

// I8 (u8 or s8 per p) from F32 `src` (dense); scales / zps: the tensor form's inputs (or null).
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
