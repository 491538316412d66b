#include "quantize.h"

#include <algorithm>
#include <cstring>

#include "../gg.h"

namespace dg::kernels {

namespace {

// This thread's share [lo, hi) of the rows (i1, i2, i3) of a tensor shaped like dst.
template <class F>
void for_rows(const ggml_tensor* dst, int ith, int nth, F&& f) {
    const int64_t n1 = dst->ne[1], n2 = dst->ne[2];
    const int64_t rows = n1 * n2 * dst->ne[3];
    const int64_t per = (rows + nth - 1) / nth;
    const int64_t r0 = std::min(rows, per * ith), r1 = std::min(rows, r0 + per);
    for (int64_t r = r0; r < r1; ++r) f(r % n1, (r / n1) % n2, r / (n1 * n2));
}

// The scale (or inverse scale) and zero point of element i0 of row (i1, i2, i3).
struct Lookup {
    const QuantParams& p;
    const ggml_tensor* scales;
    const ggml_tensor* zps;

    bool varies_along_row(int64_t ne0) const {
        if (p.from_tensors) return p.group[0] < ne0;
        return p.dim == 0 && p.scale.size() > 1;
    }

    // the attribute form's channel of an element
    size_t channel(const int64_t i[4]) const { return p.scale.size() > 1 ? size_t(i[p.dim]) : 0; }

    float scale(const int64_t i[4]) const {
        if (!p.from_tensors) return p.scale[channel(i)];
        return *reinterpret_cast<const float*>(at(scales, i));
    }

    float zp(const int64_t i[4]) const {
        if (!p.from_tensors) return p.zp.empty() ? 0.0f : p.zp[p.zp.size() > 1 ? channel(i) : 0];
        switch (p.zp_kind) {
            case ZpKind::None: return 0.0f;
            case ZpKind::U8: return float(*reinterpret_cast<const uint8_t*>(at(zps, i)));
            case ZpKind::S8: return float(*reinterpret_cast<const int8_t*>(at(zps, i)));
            case ZpKind::I32: {
                int32_t v;
                std::memcpy(&v, at(zps, i), sizeof v);
                return float(v);
            }
        }
        return 0.0f;
    }

    // the entry of a scales / zps tensor for element i (its groups checked by the lowering)
    const char* at(const ggml_tensor* t, const int64_t i[4]) const {
        return static_cast<const char*>(t->data) + (i[0] / p.group[0]) * t->nb[0] + (i[1] / p.group[1]) * t->nb[1] +
               (i[2] / p.group[2]) * t->nb[2] + (i[3] / p.group[3]) * t->nb[3];
    }
};

void quantize_kernel(ggml_tensor* dst, int ith, int nth, void* ud) {
    const auto& p = *static_cast<const QuantParams*>(ud);
    const ggml_tensor* src = dst->src[0];
    const Lookup look{p, dst->src[1], dst->src[2]};
    const float lo = p.q_unsigned ? 0.0f : -128.0f, hi = p.q_unsigned ? 255.0f : 127.0f;
    const bool per_elem = look.varies_along_row(dst->ne[0]);
    for_rows(dst, ith, nth, [&](int64_t i1, int64_t i2, int64_t i3) {
        const float* in = reinterpret_cast<const float*>(static_cast<const char*>(src->data) + i1 * src->nb[1] +
                                                         i2 * src->nb[2] + i3 * src->nb[3]);
        char* out = static_cast<char*>(dst->data) + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3];
        int64_t i[4] = {0, i1, i2, i3};
        float inv = 0, zp = 0;
        if (!per_elem) {
            inv = p.from_tensors ? float(1.0 / double(look.scale(i))) : look.scale(i);
            zp = look.zp(i);
        }
        for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) {
            if (per_elem) {
                i[0] = i0;
                inv = p.from_tensors ? float(1.0 / double(look.scale(i))) : look.scale(i);
                zp = look.zp(i);
            }
            const int32_t q = quantize_value(in[i0], inv, zp, lo, hi);
            out[i0] = p.q_unsigned ? char(uint8_t(q)) : char(int8_t(q));
        }
    });
}

void dequantize_kernel(ggml_tensor* dst, int ith, int nth, void* ud) {
    const auto& p = *static_cast<const QuantParams*>(ud);
    const ggml_tensor* src = dst->src[0];
    const Lookup look{p, dst->src[1], dst->src[2]};
    const bool per_elem = look.varies_along_row(dst->ne[0]);
    for_rows(dst, ith, nth, [&](int64_t i1, int64_t i2, int64_t i3) {
        const char* in = static_cast<const char*>(src->data) + i1 * src->nb[1] + i2 * src->nb[2] + i3 * src->nb[3];
        float* out = reinterpret_cast<float*>(static_cast<char*>(dst->data) + i1 * dst->nb[1] + i2 * dst->nb[2] +
                                              i3 * dst->nb[3]);
        int64_t i[4] = {0, i1, i2, i3};
        if (!per_elem) {
            const float s = look.scale(i), zp = look.zp(i);
            if (p.q_unsigned) {
                const auto* q = reinterpret_cast<const uint8_t*>(in);
                for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) out[i0] = (float(q[i0]) - zp) * s;
            } else {
                const auto* q = reinterpret_cast<const int8_t*>(in);
                for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) out[i0] = (float(q[i0]) - zp) * s;
            }
            return;
        }
        for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) {
            i[0] = i0;
            const float q = p.q_unsigned ? float(uint8_t(in[i0])) : float(int8_t(in[i0]));
            out[i0] = (q - look.zp(i)) * look.scale(i);
        }
    });
}

ggml_tensor* custom(ggml_context* ctx, ggml_type type, ggml_tensor* src, ggml_tensor* scales, ggml_tensor* zps,
                    ggml_custom_op_t fn, const QuantParams* p) {
    ggml_tensor* args[3] = {src, scales, zps};
    const int n = zps ? 3 : scales ? 2 : 1;
    return gg::custom_4d(ctx, type, src->ne[0], src->ne[1], src->ne[2], src->ne[3], args, n, fn, GGML_N_TASKS_MAX,
                         const_cast<QuantParams*>(p));
}

}  // namespace

ggml_tensor* quantize(ggml_context* ctx, ggml_tensor* src, ggml_tensor* scales, ggml_tensor* zps, const QuantParams* p) {
    return custom(ctx, GGML_TYPE_I8, src, scales, zps, quantize_kernel, p);
}

ggml_tensor* dequantize(ggml_context* ctx, ggml_tensor* src, ggml_tensor* scales, ggml_tensor* zps,
                        const QuantParams* p) {
    return custom(ctx, GGML_TYPE_F32, src, scales, zps, dequantize_kernel, p);
}

}  // namespace dg::kernels
