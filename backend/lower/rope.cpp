// RoPE as ggml_rope_ext.
//
// x [B, S, H, D] is ne [D, H, S, B]: ggml_rope_ext rotates ne0 and takes one
// position per ne2 index, which is the sequence axis. Positions [B, S] (ne
// [S, B]) are used by merging S and B: x becomes ne [D, H, S*B], whose ne2
// index s + S*b is the flat index of positions[b, s].
//
// ggml's angle for pair i < n/2 is p * freq_scale * base^(-2i/n) / ff[i]
// with its cos and sin times attn_factor (YaRN off: ext_factor 0), which is
// the op's definition with freq_scale = scale, ff = freq_factors and
// attn_factor = attention_factor.
#include <string>

#include "../generated/dyngraph_ir_generated.h"
#include "../gg.h"
#include "families.h"

namespace dg {

namespace {

void lower_rope(LowerCtx& c) {
    ggml_tensor* x = c.cont(c.in[0]);
    ggml_tensor* pos = c.cont(c.in[1]);
    const ggml_type out_type = ggml_type_of(c.out_dtype(0));
    if (x->type != GGML_TYPE_F32 && x->type != GGML_TYPE_F16) x = gg::cast(c.ctx, x, GGML_TYPE_F32);
    const int64_t d = x->ne[0], h = x->ne[1], s = x->ne[2], b = x->ne[3];
    const auto& a = c.attrs<ops::RoPEAttrs>();
    const int64_t rot = a.rotary_dims;
    const int64_t n = rot == 0 ? d : rot;
    // the shape rule guarantees these; ggml aborts the process if they fail
    if (n <= 0 || n % 2 != 0 || n > d) c.unsupported("rotary_dims must be even and at most the head size");
    if (pos->type != GGML_TYPE_I32) c.unsupported("positions must be integers");
    const bool per_batch = c.in_shape(1).rank == 2;
    // (with B = 1, positions [1, S] are ne [S, 1]: already the vector ggml wants)
    const bool merge = per_batch && b > 1;
    if (per_batch) {
        if (pos->ne[0] != s || pos->ne[1] != b) c.unsupported("positions [B, S] do not match x");
        if (merge) {
            ggml_tensor*& flat = c.env.flat_positions[pos];
            if (!flat) flat = gg::reshape_1d(c.ctx, pos, s * b);
            pos = flat;
            x = gg::reshape_3d(c.ctx, x, d, h, s * b);
        }
    } else if (pos->ne[0] != s || pos->ne[1] != 1) {
        c.unsupported("positions [S] do not match x");
    }
    const int mode = a.mode == ops::RoPEAttrs::Mode::neox ? GGML_ROPE_TYPE_NEOX : GGML_ROPE_TYPE_NORMAL;
    const float base = float(a.base);
    const float scale = float(a.scale);
    ggml_tensor* ff = nullptr;
    if (c.in.size() > 2) {
        ff = c.cont(c.in[2]);
        if (ff->type != GGML_TYPE_F32) ff = gg::cast(c.ctx, ff, GGML_TYPE_F32);
        if (ff->ne[0] != n / 2 || ff->ne[1] * ff->ne[2] * ff->ne[3] != 1) c.unsupported("freq_factors must have n/2 values");
        // ggml's CPU rope reads a factor for every pair of the row, rotated or passed through: ones after them
        if (d / 2 > n / 2) ff = gg::concat(c.ctx, ff, gg::fill(c.ctx, gg::arange(c.ctx, 0.0f, float(d / 2 - n / 2), 1.0f), 1.0f), 0);
    }
    ggml_tensor* r = gg::rope_ext(c.ctx, x, pos, ff, int(n), mode, base, scale, float(a.attention_factor));
    if (merge) r = gg::reshape_4d(c.ctx, r, d, h, s, b);
    c.out = {c.cast(r, out_type)};
}

}  // namespace

// cont x, pos, freq_factors; cast; pad the factors (arange, fill, concat); reshape pos, x; rope; reshape
// back; cast back.
void register_rope(LoweringTable& t) { t.add(uint16_t(dyngraph::fb::OpKind::RoPE), lower_rope); }

}  // namespace dg
