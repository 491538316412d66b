// ScaledDotProductAttention. On the host CPU: our kernel (kernels/attention.h:
// blocked flash attention on sgemm, exact for any f32 mask, the causal cut
// skipping the blocks it masks). On another device: ggml_flash_attn_ext, or
// mul_mat + soft_max_ext when the mask is f32 or the device's flash attention
// does not take the shape.
//
// The logical layouts are ggml's own: q [B, Hq, Sq, D] is ne [D, Sq, Hq, B],
// k ne [D, Skv, Hkv, B], v ne [Dv, Skv, Hkv, B] (flash attention takes v
// untransposed), a mask ne [Skv, Sq, Hm, Bm]. ggml broadcasts kv head
// h / (Hq / Hkv) to query head h, which is grouped-query attention.
//
// The device paths (measured on an AVX2 CPU's ggml, one thread, against a
// float64 reference, shapes from Sq=1/Skv=2048/D=128 to Sq=Skv=512):
// flash attention with K/V in f32 is 2.5-5x faster than mul_mat + softmax
// and as accurate (max error 2e-7 .. 1.5e-6); with K/V in f16 it is slower
// (the casts, f16 V accumulation) and off by ~1e-3, so K/V are always f32.
// Its mask must be f16, which holds 0, -inf and f16 masks exactly but
// rounds an arbitrary f32 mask (4e-4 error for N(0,1) mask values): an f32
// mask takes the exact mul_mat + soft_max_ext path instead. On the host,
// our kernel is 1.2-3.6x faster than either (docs/design/kernels.md).
#include <cmath>

#include "../generated/dyngraph_ir_generated.h"
#include "../gg.h"
#include "../kernels/attention.h"
#include "families.h"

namespace dg {

namespace {

ggml_tensor* to_f32(LowerCtx& c, ggml_tensor* t) { return c.cast(c.cont(t), GGML_TYPE_F32); }  // <= 2 tensors

// The input mask as an additive f32 tensor of ne [Skv, Sq or 1, Hm, Bm] (its
// rows repeated to Sq when `all_rows`; a bool mask left as it is held, I32,
// when `keep_bool`), or nullptr. At most 5 tensors.
ggml_tensor* input_mask(LowerCtx& c, int64_t skv, int64_t sq, bool all_rows, bool keep_bool = false) {
    if (c.n_in() != 4) return nullptr;
    ggml_tensor* m = c.cont(c.in[3]);
    if (c.in_dtype(3) != DType::Bool)
        m = c.cast(m, GGML_TYPE_F32);
    else if (!keep_bool)  // held as i32 0/1: log gives -inf / 0
        m = gg::unary(c.ctx, gg::Unary::Log, gg::cast(c.ctx, m, GGML_TYPE_F32));
    if ((m->ne[0] != 1 && m->ne[0] != skv) || (m->ne[1] != 1 && m->ne[1] != sq))
        c.unsupported("the mask does not broadcast to the attention scores");
    const int64_t rows = all_rows ? sq : m->ne[1];
    if (m->ne[0] != skv || m->ne[1] != rows) m = gg::repeat_4d(c.ctx, m, skv, rows, m->ne[2], m->ne[3]);
    return m;
}

// The additive mask as a contiguous f32 tensor of ne [Skv, Sq, Hm, Bm]
// (causal part included), or nullptr. At most 9 tensors.
ggml_tensor* additive_mask(LowerCtx& c, int64_t skv, int64_t sq, bool causal) {
    ggml_tensor* m = input_mask(c, skv, sq, true);
    if (causal) {
        // zeros [Skv, Sq], then -inf above the diagonal: key j > query i
        ggml_tensor* z = gg::fill(c.ctx, gg::arange(c.ctx, 0.0f, float(skv), 1.0f), 0.0f);
        if (z->ne[0] != skv) c.unsupported("the key sequence is too long for a causal mask");
        z = gg::repeat_4d(c.ctx, z, skv, sq, 1, 1);
        ggml_tensor* tri = gg::diag_mask_inf_inplace(c.ctx, z, 0);
        m = m ? gg::add(c.ctx, m, tri) : tri;
    }
    return m;
}

// additive_mask, made once per mask input and sizes for every attention of the graph on a device.
BuildEnv::DeviceMask& device_mask(LowerCtx& c, int64_t skv, int64_t sq, bool causal) {
    const ggml_tensor* src = c.n_in() == 4 ? c.in[3] : nullptr;
    for (BuildEnv::DeviceMask& m : c.env.device_masks)
        if (m.src == src && m.skv == skv && m.sq == sq && m.causal == causal) return m;
    ggml_tensor* f32 = additive_mask(c, skv, sq, causal);
    c.env.device_masks.push_back({src, skv, sq, causal, f32, nullptr});
    return c.env.device_masks.back();
}

// softmax(k q * scale + mask) v by two products: exact for any f32 mask. [Dv, Sq, Hq, B]
ggml_tensor* matmul_attention(LowerCtx& c, ggml_tensor* q, ggml_tensor* k, ggml_tensor* v, ggml_tensor* mask, double scale) {
    ggml_tensor* kq = gg::mul_mat(c.ctx, k, q);  // [Skv, Sq, Hq, B]
    kq = gg::soft_max_ext(c.ctx, kq, mask, float(scale), 0.0f);
    kq = gg::unary(c.ctx, gg::Unary::Relu, kq);  // a row with every key masked is NaN: make it 0, as flash attention does
    ggml_tensor* vt = gg::cont(c.ctx, gg::transpose(c.ctx, v));  // [Skv, Dv, Hkv, B]
    return gg::mul_mat(c.ctx, vt, kq);                             // [Dv, Sq, Hq, B]
}

// On the host CPU, f32 tensors are read where they lie (kernels::f32_attention takes strided rows).
ggml_tensor* f32_input(LowerCtx& c, ggml_tensor* t) {
    return c.host() && kernels::attention_rows_ok(t) ? t : to_f32(c, t);
}

// Whether `op` is a rank-4 transpose of `order` reading its input 0.
bool transposes(const OpDef& op, size_t input, const int64_t (&want)[4]) {
    if (op.kind != uint16_t(dyngraph::fb::OpKind::StaticTranspose) || input != 0) return false;
    const auto* a = std::get_if<ops::StaticTransposeAttrs>(&op.attrs);
    if (!a || a->order.size() != 4) return false;
    const std::vector<int64_t>& order = a->order;
    for (size_t i = 0; i < 4; ++i)
        if ((order[i] < 0 ? order[i] + 4 : order[i]) != want[i]) return false;
    return true;
}

// [B, H, S, D] -> [B, S, H, D]: a model merging its heads.
bool swaps_heads_and_rows(const OpDef& op, size_t input) { return transposes(op, input, {0, 2, 1, 3}); }

// [B, H, S, D] -> [S, B, H, D]: a sequence-first model merging its heads (nn.MultiheadAttention).
bool brings_rows_first(const OpDef& op, size_t input) { return transposes(op, input, {2, 0, 1, 3}); }

void lower_sdpa(LowerCtx& c) {
    ggml_tensor* q = f32_input(c, c.in[0]);
    ggml_tensor* k = f32_input(c, c.in[1]);
    ggml_tensor* v = f32_input(c, c.in[2]);
    const int64_t d = q->ne[0], sq = q->ne[1], hq = q->ne[2], skv = k->ne[1], hkv = k->ne[2];
    // the shape rule guarantees these; ggml aborts the process if they fail
    if (k->ne[0] != d || v->ne[1] != skv || v->ne[2] != hkv || hkv < 1 || hq % hkv != 0 || k->ne[3] != q->ne[3] ||
        v->ne[3] != q->ne[3])
        c.unsupported("q, k and v shapes do not fit together");
    const auto& a = c.attrs<ops::ScaledDotProductAttentionAttrs>();
    const double scale = a.scale == 0.0 ? 1.0 / std::sqrt(double(d)) : a.scale;
    const bool causal = a.is_causal;
    const bool exact_mask = c.n_in() == 4 && c.in_dtype(3) == DType::F32;
    auto check_heads = [&](const ggml_tensor* mask) {
        if (mask && (hq % mask->ne[2] != 0 || q->ne[3] % mask->ne[3] != 0))
            c.unsupported("the mask does not broadcast to the attention scores");
    };
    // our kernel: the causal cut made in it, the mask's rows broadcast by it (sizes past 2^31: ggml's paths)
    ggml_tensor* kernel_mask = c.host() ? input_mask(c, skv, sq, false, true) : nullptr;
    if (c.host() && kernels::attention_rows_ok(q) && kernels::attention_rows_ok(k) && kernels::attention_rows_ok(v) &&
        (!kernel_mask || kernels::attention_mask_ok(kernel_mask))) {
        ggml_tensor* mask = kernel_mask;
        check_heads(mask);
        // read only by a transpose of heads and rows (a model merging its heads): written in that order
        // (or by a transpose that brings the rows to the front: [s, b, h, dv])
        const bool merged = c.out_dtype(0) == DType::F32 && c.out_shape(0).rank == 4;
        const bool heads_inner = merged && c.output_read_only_by(0, swaps_heads_and_rows);
        const bool rows_outer = merged && !heads_inner && c.output_read_only_by(0, brings_rows_first);
        ggml_tensor* r = kernels::f32_attention(
            c.ctx, q, k, v, mask, c.keep(kernels::AttentionParams{float(scale), causal, heads_inner, rows_outer}));
        c.out = {c.cast(r, ggml_type_of(c.out_dtype(0)))};
        return;
    }

    // (a device: the mask shared with the other attentions reading it; the unplaced host path's ggml
    // form, sizes past 2^31, makes its own)
    BuildEnv::DeviceMask* shared = c.host() ? nullptr : &device_mask(c, skv, sq, causal);
    ggml_tensor* mask = shared ? shared->f32 : additive_mask(c, skv, sq, causal);
    check_heads(mask);

    ggml_tensor* r = nullptr;
    if (!exact_mask) {
        ggml_tensor* f16 = nullptr;
        if (mask) {
            if (shared && !shared->f16) shared->f16 = gg::cast(c.ctx, mask, GGML_TYPE_F16);
            f16 = shared ? shared->f16 : gg::cast(c.ctx, mask, GGML_TYPE_F16);
        }
        // (q as it comes where its rows are dense f32: flash attention reads it by its strides, as
        // llama.cpp hands it a permuted view; the matmul path below takes the dense copy)
        ggml_tensor* q_rows = c.in[0]->type == GGML_TYPE_F32 && c.in[0]->nb[0] == sizeof(float) ? c.in[0] : q;
        ggml_tensor* fa = gg::flash_attn_ext(c.ctx, q_rows, k, v, f16, float(scale));  // [Dv, Hq, Sq, B], f32 precision
        // a device's flash attention may not take these head sizes or types (CUDA's has no f32 kernel for
        // a head size of 16): the device computes the mul_mat path instead (the unused tensors stay unused)
        if (c.device_supports(fa)) {
            // a view in [b, h, s, d] order of the [b, s, h, d] rows flash attention writes: made dense
            // unless all that reads it is a transpose merging the heads (which then views dense rows)
            r = gg::permute(c.ctx, fa, 0, 2, 1, 3);
            if (c.out_dtype(0) == DType::F32 && !c.output_viewed_only_by(0, swaps_heads_and_rows)) r = gg::cont(c.ctx, r);
        }
    }
    if (!r) r = matmul_attention(c, q, k, v, mask, scale);
    c.out = {c.cast(r, ggml_type_of(c.out_dtype(0)))};
}

}  // namespace

void register_attention(LoweringTable& t) {
    t.add(uint16_t(dyngraph::fb::OpKind::ScaledDotProductAttention), lower_sdpa);
}

}  // namespace dg
