#include "portable.h"

#include <cfloat>

#include "../gg.h"

namespace dg::portable {

ggml_tensor* dense_f32(const LowerCtx& c, ggml_tensor* x) { return c.cast(c.cont(x), GGML_TYPE_F32); }

ggml_tensor* is_nan(const LowerCtx& c, ggml_tensor* x) {
    ggml_tensor* above = gg::scale_bias(c.ctx, gg::unary(c.ctx, gg::Unary::Abs, x), 1.0f, 1.0f);
    return gg::scale_bias(c.ctx, gg::unary(c.ctx, gg::Unary::Step, above), -1.0f, 1.0f);
}

ggml_tensor* is_neg_inf(const LowerCtx& c, ggml_tensor* x) {
    return gg::unary(c.ctx, gg::Unary::Step, gg::scale_bias(c.ctx, x, -1.0f, -FLT_MAX));
}

ggml_tensor* select(const LowerCtx& c, ggml_tensor* pick, ggml_tensor* a, ggml_tensor* b) {
    const int64_t R = a->ne[0], S = ggml_nelements(a) / R;
    // row indices computed in f32: exact below 2^24 (2 R of them)
    if (R > (int64_t(1) << 23)) c.not_portable(cat("a selection in rows of ", R, " values"));
    ggml_tensor* rows = gg::concat(c.ctx, gg::reshape_3d(c.ctx, a, 1, R, S), gg::reshape_3d(c.ctx, b, 1, R, S), 1);
    // element i of a row: row i of a (pick 1) or row R + i (b)
    ggml_tensor* offset = gg::scale_bias(c.ctx, gg::reshape_2d(c.ctx, pick, R, S), -float(R), float(R));
    ggml_tensor* idx = gg::cast(c.ctx, gg::add(c.ctx, offset, gg::arange(c.ctx, 0.0f, float(R), 1.0f)), GGML_TYPE_I32);
    ggml_tensor* r = gg::get_rows(c.ctx, rows, idx);  // [1, R, S]
    return gg::reshape_4d(c.ctx, r, a->ne[0], a->ne[1], a->ne[2], a->ne[3]);
}

}  // namespace dg::portable
