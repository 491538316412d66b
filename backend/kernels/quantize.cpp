#include "quantize.h"

#include <algorithm>
#include <cstring>

#include "../gg.h"
#include "f8.h"
#include "thread_share.h"

namespace dg::kernels {

namespace {

// This thread's share [lo, hi) of the rows (i1, i2, i3) of a tensor shaped like dst.
template <class F>
void for_rows(const ggml_tensor* dst, int ith, int nth, F&& f) {
    const int64_t n1 = dst->ne[1], n2 = dst->ne[2];
    const int64_t rows = n1 * n2 * dst->ne[3];
    const auto [r0, r1] = thread_share(rows, ith, nth);
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
            case ZpKind::U4: return float(*reinterpret_cast<const uint8_t*>(at(zps, i)) & 0x0F);
            case ZpKind::S4: return float(((*reinterpret_cast<const uint8_t*>(at(zps, i)) & 0x0F) ^ 0x08) - 0x08);
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

// A byte of the quantized type T, as a value (U8 .. S4: an integer; F8: its f32 value).
template <QType T>
inline float read_q(uint8_t b, const float* f8) {
    if constexpr (T == QType::U8) return float(b);
    if constexpr (T == QType::S8) return float(int8_t(b));
    if constexpr (T == QType::U4) return float(b & 0x0F);
    if constexpr (T == QType::S4) return float(((b & 0x0F) ^ 0x08) - 0x08);
    return f8[b];
}

// x * inv rounded to the quantized type T (for integers, with zp, saturated to T's range).
template <QType T>
inline uint8_t write_q(float x, float inv, float zp) {
    if constexpr (T == QType::F8E4M3 || T == QType::F8E5M2)
        return f32_to_f8(x * inv, T == QType::F8E4M3 ? F8::E4M3 : F8::E5M2);  // (f8 takes no zero points)
    constexpr float lo = T == QType::U8 || T == QType::U4 ? 0.0f : T == QType::S8 ? -128.0f : -8.0f;
    constexpr float hi = T == QType::U8 ? 255.0f : T == QType::S8 ? 127.0f : T == QType::U4 ? 15.0f : 7.0f;
    const int32_t q = quantize_value(x, inv, zp, lo, hi);
    return T == QType::S4 ? uint8_t(q) & 0x0F : uint8_t(q);
}

template <QType T>
void quantize_rows(ggml_tensor* dst, int ith, int nth, const QuantParams& p) {
    const ggml_tensor* src = dst->src[0];
    const Lookup look{p, dst->src[1], dst->src[2]};
    const bool per_elem = look.varies_along_row(dst->ne[0]);
    for_rows(dst, ith, nth, [&](int64_t i1, int64_t i2, int64_t i3) {
        const float* in = reinterpret_cast<const float*>(static_cast<const char*>(src->data) + i1 * src->nb[1] +
                                                         i2 * src->nb[2] + i3 * src->nb[3]);
        auto* out = reinterpret_cast<uint8_t*>(static_cast<char*>(dst->data) + i1 * dst->nb[1] + i2 * dst->nb[2] +
                                               i3 * dst->nb[3]);
        int64_t i[4] = {0, i1, i2, i3};
        float inv = 0, zp = 0;
        if (!per_elem) {
            inv = p.from_tensors ? float(1.0 / double(look.scale(i))) : look.scale(i);
            zp = look.zp(i);
            for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) out[i0] = write_q<T>(in[i0], inv, zp);
            return;
        }
        for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) {
            i[0] = i0;
            inv = p.from_tensors ? float(1.0 / double(look.scale(i))) : look.scale(i);
            out[i0] = write_q<T>(in[i0], inv, look.zp(i));
        }
    });
}

template <QType T>
void dequantize_rows(ggml_tensor* dst, int ith, int nth, const QuantParams& p) {
    const ggml_tensor* src = dst->src[0];
    const Lookup look{p, dst->src[1], dst->src[2]};
    const bool per_elem = look.varies_along_row(dst->ne[0]);
    const float* f8 = T == QType::F8E4M3 ? f8_values(F8::E4M3) : T == QType::F8E5M2 ? f8_values(F8::E5M2) : nullptr;
    for_rows(dst, ith, nth, [&](int64_t i1, int64_t i2, int64_t i3) {
        const auto* q = reinterpret_cast<const uint8_t*>(static_cast<const char*>(src->data) + i1 * src->nb[1] +
                                                         i2 * src->nb[2] + i3 * src->nb[3]);
        float* out = reinterpret_cast<float*>(static_cast<char*>(dst->data) + i1 * dst->nb[1] + i2 * dst->nb[2] +
                                              i3 * dst->nb[3]);
        int64_t i[4] = {0, i1, i2, i3};
        if (!per_elem) {
            const float s = look.scale(i), zp = look.zp(i);
            for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) out[i0] = (read_q<T>(q[i0], f8) - zp) * s;
            return;
        }
        for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) {
            i[0] = i0;
            out[i0] = (read_q<T>(q[i0], f8) - look.zp(i)) * look.scale(i);
        }
    });
}

// the kernel of ggml's custom op: the rows of `dst` for p.qtype
template <template <QType> class Rows>
void dispatch(ggml_tensor* dst, int ith, int nth, void* ud) {
    const auto& p = *static_cast<const QuantParams*>(ud);
    switch (p.qtype) {
        case QType::U8: return Rows<QType::U8>::run(dst, ith, nth, p);
        case QType::S8: return Rows<QType::S8>::run(dst, ith, nth, p);
        case QType::U4: return Rows<QType::U4>::run(dst, ith, nth, p);
        case QType::S4: return Rows<QType::S4>::run(dst, ith, nth, p);
        case QType::F8E4M3: return Rows<QType::F8E4M3>::run(dst, ith, nth, p);
        case QType::F8E5M2: return Rows<QType::F8E5M2>::run(dst, ith, nth, p);
    }
}

template <QType T>
struct QuantizeRows {
    static void run(ggml_tensor* d, int ith, int nth, const QuantParams& p) { quantize_rows<T>(d, ith, nth, p); }
};

template <QType T>
struct DequantizeRows {
    static void run(ggml_tensor* d, int ith, int nth, const QuantParams& p) { dequantize_rows<T>(d, ith, nth, p); }
};

ggml_tensor* custom(ggml_context* ctx, ggml_type type, ggml_tensor* src, ggml_tensor* scales, ggml_tensor* zps,
                    ggml_custom_op_t fn, const QuantParams* p) {
    ggml_tensor* args[3] = {src, scales, zps};
    const int n = zps ? 3 : scales ? 2 : 1;
    return gg::custom_4d(ctx, type, src->ne[0], src->ne[1], src->ne[2], src->ne[3], args, n, fn, GGML_N_TASKS_MAX,
                         const_cast<QuantParams*>(p));
}

}  // namespace

ggml_tensor* quantize(ggml_context* ctx, ggml_tensor* src, ggml_tensor* scales, ggml_tensor* zps, const QuantParams* p) {
    return custom(ctx, GGML_TYPE_I8, src, scales, zps, dispatch<QuantizeRows>, p);
}

ggml_tensor* dequantize(ggml_context* ctx, ggml_tensor* src, ggml_tensor* scales, ggml_tensor* zps,
                        const QuantParams* p) {
    return custom(ctx, GGML_TYPE_F32, src, scales, zps, dispatch<DequantizeRows>, p);
}

}  // namespace dg::kernels
