#include "gg.h"

#include <cmath>

#include "kernel_guard.h"

namespace dg::gg {

namespace {

[[noreturn]] void violated(const char* fn, const std::string& what) { fail<Violation>(fn, ": ", what); }

bool dense_rows(const ggml_tensor* t) { return t->nb[0] == ggml_type_size(t->type); }

bool one_of(ggml_type t, std::initializer_list<ggml_type> ts) {
    for (ggml_type x : ts)
        if (t == x) return true;
    return false;
}

void need_types(const char* fn, const char* which, const ggml_tensor* t, std::initializer_list<ggml_type> ts) {
    if (!one_of(t->type, ts)) {
        std::string list;
        for (ggml_type x : ts) list += cat(list.empty() ? "" : ", ", ggml_type_name(x));
        violated(fn, cat(which, " must be ", list, ", got ", describe(t)));
    }
}

void need_positive(const char* fn, const int64_t ne[4]) {
    for (int i = 0; i < 4; ++i)
        if (ne[i] < 1) violated(fn, cat("ne[", i, "] is ", ne[i], ", every size must be >= 1"));
}

bool can_repeat(const ggml_tensor* small, const ggml_tensor* big) {
    for (int i = 0; i < 4; ++i)
        if (small->ne[i] < 1 || big->ne[i] % small->ne[i] != 0) return false;
    return true;
}

// The pair of types ggml's CPU copy converts (dup / cpy kernels).
bool convertible(ggml_type from, ggml_type to) {
    if (from == to) return true;
    const bool plain_from = one_of(from, {GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_I32});
    if (from == GGML_TYPE_F32) return one_of(to, {GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_I32}) || ggml_is_quantized(to);
    return plain_from && to == GGML_TYPE_F32;
}

void need_convertible(const char* fn, const ggml_tensor* a, ggml_type to) {
    if (!convertible(a->type, to)) violated(fn, cat("cannot convert ", describe(a), " to ", ggml_type_name(to)));
    if (ggml_is_quantized(to) && a->ne[0] % ggml_blck_size(to) != 0)
        violated(fn, cat("rows of ", a->ne[0], " values cannot be stored as ", ggml_type_name(to)));
}

void need_contiguous(const char* fn, const char* which, const ggml_tensor* t) {
    if (!ggml_is_contiguous(t)) violated(fn, cat(which, " must be contiguous, got ", describe(t)));
}

ggml_tensor* binary(const char* fn, ggml_context* ctx, ggml_tensor* a, ggml_tensor* b,
                    ggml_tensor* (*op)(ggml_context*, ggml_tensor*, ggml_tensor*)) {
    need_room(ctx);
    if (!can_repeat(b, a)) violated(fn, cat("b ", describe(b), " does not repeat to a ", describe(a)));
    if (!dense_rows(a) || !dense_rows(b)) violated(fn, "a and b must be dense along ne0");
    const bool ok = (a->type == b->type && one_of(a->type, {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16})) ||
                    (one_of(a->type, {GGML_TYPE_F16, GGML_TYPE_BF16}) && b->type == GGML_TYPE_F32);
    if (!ok) violated(fn, cat("unsupported types a ", describe(a), ", b ", describe(b)));
    return op(ctx, a, b);
}

}  // namespace

std::string describe(const ggml_tensor* t) {
    if (!t) return "nothing";
    return cat(ggml_type_name(t->type), " [", t->ne[0], ", ", t->ne[1], ", ", t->ne[2], ", ", t->ne[3], "]");
}

void need_room(ggml_context* ctx, int n) {
    const size_t need = size_t(n) * ggml_tensor_overhead();
    if (ggml_get_mem_size(ctx) - ggml_used_mem(ctx) < need + 64) throw OutOfRoom{};
}

ggml_tensor* new_tensor(ggml_context* ctx, ggml_type type, const int64_t ne[4], bool allow_empty) {
    need_room(ctx);
    if (!allow_empty) need_positive("ggml_new_tensor", ne);
    for (int i = 0; i < 4; ++i)
        if (ne[i] < 0) violated("ggml_new_tensor", cat("ne[", i, "] is ", ne[i]));
    if (ne[0] % ggml_blck_size(type) != 0)
        violated("ggml_new_tensor", cat("rows of ", ne[0], " values cannot be stored as ", ggml_type_name(type)));
    size_t bytes = 0;
    if (__builtin_mul_overflow(size_t(ne[0]), ggml_type_size(type), &bytes)) violated("ggml_new_tensor", "the byte size overflows");
    bytes = ggml_row_size(type, ne[0]);
    for (int i = 1; i < 4; ++i)
        if (__builtin_mul_overflow(bytes, size_t(ne[i]), &bytes)) violated("ggml_new_tensor", "the byte size overflows");
    return ggml_new_tensor_4d(ctx, type, ne[0], ne[1], ne[2], ne[3]);
}

ggml_tensor* add(ggml_context* ctx, ggml_tensor* a, ggml_tensor* b) { return binary("ggml_add", ctx, a, b, ggml_add); }
ggml_tensor* sub(ggml_context* ctx, ggml_tensor* a, ggml_tensor* b) { return binary("ggml_sub", ctx, a, b, ggml_sub); }
ggml_tensor* mul(ggml_context* ctx, ggml_tensor* a, ggml_tensor* b) { return binary("ggml_mul", ctx, a, b, ggml_mul); }
ggml_tensor* div(ggml_context* ctx, ggml_tensor* a, ggml_tensor* b) { return binary("ggml_div", ctx, a, b, ggml_div); }

ggml_tensor* mul_mat(ggml_context* ctx, ggml_tensor* a, ggml_tensor* b) {
    const char* fn = "ggml_mul_mat";
    need_room(ctx);
    if (a->ne[0] != b->ne[0] || a->ne[2] < 1 || a->ne[3] < 1 || b->ne[2] % a->ne[2] != 0 || b->ne[3] % a->ne[3] != 0)
        violated(fn, cat("a ", describe(a), " and b ", describe(b), " do not multiply"));
    if (ggml_is_transposed(a)) violated(fn, cat("a ", describe(a), " must not be transposed"));
    if (a->type == GGML_TYPE_I32 || a->type == GGML_TYPE_I64) violated(fn, cat("a ", describe(a), " has no dot product"));
    need_types(fn, "b", b, {GGML_TYPE_F32});
    ggml_tensor* r = ggml_mul_mat(ctx, a, b);
    // sums in f32 on every backend (CUDA's cuBLAS path otherwise sums f16 weights' products in f16)
    ggml_mul_mat_set_prec(r, GGML_PREC_F32);
    return r;
}

ggml_tensor* mul_mat_id(ggml_context* ctx, ggml_tensor* as, ggml_tensor* b, ggml_tensor* ids) {
    const char* fn = "ggml_mul_mat_id";
    need_room(ctx);
    if (ggml_is_transposed(as) || !dense_rows(as)) violated(fn, cat("as ", describe(as), " must have dense rows"));
    if (!(one_of(as->type, {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16}) || ggml_is_quantized(as->type)))
        violated(fn, cat("as ", describe(as), " has no dot product"));
    need_types(fn, "b", b, {GGML_TYPE_F32});
    need_types(fn, "ids", ids, {GGML_TYPE_I32});
    if (!dense_rows(b)) violated(fn, cat("b ", describe(b), " must have dense rows"));
    if (as->ne[3] != 1 || b->ne[3] != 1 || ids->ne[2] != 1 || ids->ne[3] != 1)
        violated(fn, cat("as ", describe(as), ", b ", describe(b), " must be 3-D and ids ", describe(ids), " 2-D"));
    if (as->ne[0] != b->ne[0]) violated(fn, cat("as ", describe(as), " and b ", describe(b), " have different K"));
    if (ids->ne[1] != b->ne[2]) violated(fn, cat("ids ", describe(ids), " has no expert list per b row ", describe(b)));
    if (b->ne[1] < 1 || ids->ne[0] % b->ne[1] != 0)
        violated(fn, cat("b ", describe(b), " does not broadcast over ids ", describe(ids)));
    return ggml_mul_mat_id(ctx, as, b, ids);
}

ggml_tensor* cast(ggml_context* ctx, ggml_tensor* a, ggml_type type) {
    need_room(ctx);
    need_convertible("ggml_cast", a, type);
    return ggml_cast(ctx, a, type);
}

ggml_tensor* cont(ggml_context* ctx, ggml_tensor* a) {
    need_room(ctx);
    if (ggml_is_quantized(a->type)) violated("ggml_cont", cat("cannot copy quantized ", describe(a)));
    return ggml_cont(ctx, a);
}

ggml_tensor* dup(ggml_context* ctx, ggml_tensor* a) {
    need_room(ctx);
    if (ggml_is_quantized(a->type)) violated("ggml_dup", cat("cannot copy quantized ", describe(a)));
    return ggml_dup(ctx, a);
}

ggml_tensor* cpy(ggml_context* ctx, ggml_tensor* a, ggml_tensor* b) {
    need_room(ctx, 2);
    if (ggml_nelements(a) != ggml_nelements(b))
        violated("ggml_cpy", cat("a ", describe(a), " and b ", describe(b), " have different element counts"));
    need_convertible("ggml_cpy", a, b->type);
    return ggml_cpy(ctx, a, b);
}

ggml_tensor* repeat_4d(ggml_context* ctx, ggml_tensor* a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    const char* fn = "ggml_repeat_4d";
    need_room(ctx);
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    need_positive(fn, ne);
    for (int i = 0; i < 4; ++i)
        if (a->ne[i] < 1 || ne[i] % a->ne[i] != 0) violated(fn, cat(describe(a), " does not repeat to [", ne0, ", ", ne1, ", ", ne2, ", ", ne3, "]"));
    need_types(fn, "a", a, {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_I32});
    return ggml_repeat_4d(ctx, a, ne0, ne1, ne2, ne3);
}

namespace {

void need_reshape(const char* fn, const ggml_tensor* a, int64_t n) {
    need_contiguous(fn, "a", a);
    if (ggml_nelements(a) != n) violated(fn, cat(describe(a), " has ", ggml_nelements(a), " elements, the new shape ", n));
}

int64_t product(std::initializer_list<int64_t> ne, const char* fn) {
    int64_t n = 1;
    for (int64_t x : ne) {
        if (x < 1) violated(fn, cat("size ", x, " must be >= 1"));
        if (__builtin_mul_overflow(n, x, &n)) violated(fn, "the element count overflows");
    }
    return n;
}

}  // namespace

ggml_tensor* reshape_1d(ggml_context* ctx, ggml_tensor* a, int64_t ne0) {
    need_room(ctx);
    need_reshape("ggml_reshape_1d", a, product({ne0}, "ggml_reshape_1d"));
    return ggml_reshape_1d(ctx, a, ne0);
}

ggml_tensor* reshape_2d(ggml_context* ctx, ggml_tensor* a, int64_t ne0, int64_t ne1) {
    need_room(ctx);
    need_reshape("ggml_reshape_2d", a, product({ne0, ne1}, "ggml_reshape_2d"));
    return ggml_reshape_2d(ctx, a, ne0, ne1);
}

ggml_tensor* reshape_3d(ggml_context* ctx, ggml_tensor* a, int64_t ne0, int64_t ne1, int64_t ne2) {
    need_room(ctx);
    need_reshape("ggml_reshape_3d", a, product({ne0, ne1, ne2}, "ggml_reshape_3d"));
    return ggml_reshape_3d(ctx, a, ne0, ne1, ne2);
}

ggml_tensor* reshape_4d(ggml_context* ctx, ggml_tensor* a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    need_room(ctx);
    need_reshape("ggml_reshape_4d", a, product({ne0, ne1, ne2, ne3}, "ggml_reshape_4d"));
    return ggml_reshape_4d(ctx, a, ne0, ne1, ne2, ne3);
}

ggml_tensor* view_4d(ggml_context* ctx, ggml_tensor* a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3, size_t nb1,
                     size_t nb2, size_t nb3, size_t offset) {
    const char* fn = "ggml_view_4d";
    need_room(ctx);
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    need_positive(fn, ne);
    const ggml_tensor* root = a->view_src ? a->view_src : a;
    size_t base = a->view_src ? a->view_offs : 0;
    // ggml's measure: offset + the dense size; the bytes really reached: offset + one row + (ne[i] - 1) strides
    const size_t row = ggml_row_size(a->type, ne0), nb[4] = {0, nb1, nb2, nb3};
    size_t off = 0, end_dense = row, end_extent = row;
    bool overflow = __builtin_add_overflow(base, offset, &off);
    for (int i = 1; i < 4; ++i) {
        size_t step = 0;
        overflow |= __builtin_mul_overflow(end_dense, size_t(ne[i]), &end_dense);
        overflow |= __builtin_mul_overflow(size_t(ne[i] - 1), nb[i], &step);
        overflow |= __builtin_add_overflow(end_extent, step, &end_extent);
    }
    overflow |= __builtin_add_overflow(end_dense, off, &end_dense);
    overflow |= __builtin_add_overflow(end_extent, off, &end_extent);
    const size_t have = ggml_nbytes(root);
    if (overflow || end_dense > have || end_extent > have)
        violated(fn, cat("the view [", ne0, ", ", ne1, ", ", ne2, ", ", ne3, "] at byte ", off, " does not fit in ", describe(root),
                         " (", have, " bytes)"));
    return ggml_view_4d(ctx, a, ne0, ne1, ne2, ne3, nb1, nb2, nb3, offset);
}

ggml_tensor* permute(ggml_context* ctx, ggml_tensor* a, int ax0, int ax1, int ax2, int ax3) {
    need_room(ctx);
    const int ax[4] = {ax0, ax1, ax2, ax3};
    bool seen[4] = {false, false, false, false};
    for (int x : ax) {
        if (x < 0 || x > 3 || seen[x]) violated("ggml_permute", cat("axes ", ax0, ", ", ax1, ", ", ax2, ", ", ax3, " are not a permutation"));
        seen[x] = true;
    }
    return ggml_permute(ctx, a, ax0, ax1, ax2, ax3);
}

ggml_tensor* transpose(ggml_context* ctx, ggml_tensor* a) {
    need_room(ctx);
    return ggml_transpose(ctx, a);
}

ggml_tensor* concat(ggml_context* ctx, ggml_tensor* a, ggml_tensor* b, int dim) {
    const char* fn = "ggml_concat";
    need_room(ctx);
    if (dim < 0 || dim > 3) violated(fn, cat("dim ", dim, " is not in [0, 4)"));
    if (a->type != b->type) violated(fn, cat("a ", describe(a), " and b ", describe(b), " differ in type"));
    need_types(fn, "a", a, {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_I32});
    for (int d = 0; d < 4; ++d)
        if (d != dim && a->ne[d] != b->ne[d]) violated(fn, cat("a ", describe(a), " and b ", describe(b), " differ off dim ", dim));
    if (!dense_rows(a) || !dense_rows(b)) violated(fn, "a and b must have contiguous rows");
    return ggml_concat(ctx, a, b, dim);
}

ggml_tensor* soft_max(ggml_context* ctx, ggml_tensor* a) { return soft_max_ext(ctx, a, nullptr, 1.0f, 0.0f); }

ggml_tensor* soft_max_ext(ggml_context* ctx, ggml_tensor* a, ggml_tensor* mask, float scale, float max_bias) {
    const char* fn = "ggml_soft_max_ext";
    need_room(ctx);
    need_types(fn, "a", a, {GGML_TYPE_F32});
    need_contiguous(fn, "a", a);
    if (!std::isfinite(scale)) violated(fn, "scale must be finite");
    if (max_bias != 0.0f) violated(fn, "max_bias must be 0");
    if (mask) {
        need_types(fn, "the mask", mask, {GGML_TYPE_F16, GGML_TYPE_F32});
        need_contiguous(fn, "the mask", mask);
        if (mask->ne[0] != a->ne[0] || mask->ne[1] < a->ne[1] || a->ne[2] % mask->ne[2] != 0 || a->ne[3] % mask->ne[3] != 0)
            violated(fn, cat("the mask ", describe(mask), " does not broadcast to ", describe(a)));
        return ggml_soft_max_ext(ctx, a, mask, scale, max_bias);
    }
    return scale == 1.0f ? ggml_soft_max(ctx, a) : ggml_soft_max_ext(ctx, a, nullptr, scale, 0.0f);
}

namespace {

void need_norm(const char* fn, const ggml_tensor* a, float eps) {
    need_types(fn, "a", a, {GGML_TYPE_F32});
    if (!dense_rows(a)) violated(fn, "a must be dense along ne0");
    if (!(eps >= 0.0f) || !std::isfinite(eps)) violated(fn, cat("eps must be >= 0 and finite, got ", eps));
}

}  // namespace

ggml_tensor* norm(ggml_context* ctx, ggml_tensor* a, float eps) {
    need_room(ctx);
    need_norm("ggml_norm", a, eps);
    return ggml_norm(ctx, a, eps);
}

ggml_tensor* rms_norm(ggml_context* ctx, ggml_tensor* a, float eps) {
    need_room(ctx);
    need_norm("ggml_rms_norm", a, eps);
    return ggml_rms_norm(ctx, a, eps);
}

ggml_tensor* group_norm(ggml_context* ctx, ggml_tensor* a, int n_groups, float eps) {
    const char* fn = "ggml_group_norm";
    need_room(ctx);
    need_types(fn, "a", a, {GGML_TYPE_F32});
    if (!dense_rows(a)) violated(fn, "a must be dense along ne0");
    if (n_groups < 1 || n_groups > a->ne[2] || a->ne[2] % n_groups != 0)
        violated(fn, cat(n_groups, " groups do not divide the ", a->ne[2], " channels of ", describe(a)));
    if (!(eps >= 0.0f) || !std::isfinite(eps)) violated(fn, cat("eps must be >= 0 and finite, got ", eps));
    return ggml_group_norm(ctx, a, n_groups, eps);
}

ggml_tensor* interpolate(ggml_context* ctx, ggml_tensor* a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3,
                         uint32_t mode) {
    const char* fn = "ggml_interpolate";
    need_room(ctx);
    need_types(fn, "a", a, {GGML_TYPE_F32});
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    need_positive(fn, ne);
    const uint32_t base = mode & 0xFF, flags = mode & ~0xFFu;
    const bool ok = base < GGML_SCALE_MODE_COUNT &&
                    (flags == 0 || (flags == GGML_SCALE_FLAG_ALIGN_CORNERS &&
                                      (base == GGML_SCALE_MODE_BILINEAR || base == GGML_SCALE_MODE_BICUBIC)));
    if (!ok) violated(fn, cat("mode ", mode, " is not a scale mode with the flags it takes"));
    if (ne2 != a->ne[2] || ne3 != a->ne[3]) violated(fn, cat("ne2 and ne3 of ", describe(a), " must be kept"));
    return ggml_interpolate(ctx, a, ne0, ne1, ne2, ne3, mode);
}

ggml_tensor* get_rows(ggml_context* ctx, ggml_tensor* a, ggml_tensor* b) {
    const char* fn = "ggml_get_rows";
    need_room(ctx);
    need_types(fn, "the indices", b, {GGML_TYPE_I32});
    if (a->ne[2] != b->ne[1] || a->ne[3] != b->ne[2] || b->ne[3] != 1)
        violated(fn, cat("indices ", describe(b), " do not fit the table ", describe(a)));
    if (!(one_of(a->type, {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_I32}) || ggml_is_quantized(a->type)))
        violated(fn, cat("cannot read rows of ", describe(a)));
    return ggml_get_rows(ctx, a, b);
}

ggml_tensor* set_rows(ggml_context* ctx, ggml_tensor* a, ggml_tensor* b, ggml_tensor* c) {
    const char* fn = "ggml_set_rows";
    need_room(ctx, 2);
    need_types(fn, "the destination", a, {GGML_TYPE_F32, GGML_TYPE_F16});
    need_types(fn, "the rows", b, {GGML_TYPE_F32, GGML_TYPE_F16});
    need_types(fn, "the indices", c, {GGML_TYPE_I32, GGML_TYPE_I64});
    if (a->ne[0] != b->ne[0] || a->ne[2] != b->ne[2] || a->ne[3] != b->ne[3] || b->ne[1] != c->ne[0] || c->ne[1] < 1 ||
        c->ne[2] < 1 || b->ne[2] % c->ne[1] != 0 || b->ne[3] % c->ne[2] != 0 || c->ne[3] != 1)
        violated(fn, cat("rows ", describe(b), " and indices ", describe(c), " do not fit the destination ", describe(a)));
    if (!dense_rows(a) || !dense_rows(b)) violated(fn, "the destination and the rows must have contiguous rows");
    return ggml_set_rows(ctx, a, b, c);
}

ggml_tensor* rope_ext(ggml_context* ctx, ggml_tensor* a, ggml_tensor* b, ggml_tensor* freq_factors, int n_dims, int mode,
                      float freq_base, float freq_scale, float attn_factor) {
    const char* fn = "ggml_rope_ext";
    need_room(ctx);
    need_types(fn, "x", a, {GGML_TYPE_F32, GGML_TYPE_F16});
    if (!dense_rows(a)) violated(fn, "x must be dense along ne0");
    need_types(fn, "the positions", b, {GGML_TYPE_I32});
    if (!ggml_is_vector(b) || b->ne[0] != a->ne[2])
        violated(fn, cat("positions ", describe(b), " must be a vector of ", a->ne[2]));
    if (n_dims <= 0 || n_dims % 2 != 0 || n_dims > a->ne[0]) violated(fn, cat("n_dims ", n_dims, " must be even and in (0, ", a->ne[0], "]"));
    // ggml's rope (CPU and CUDA) moves the features past n_dims two at a time: an odd row's last pair
    // would reach one past it
    if (a->ne[0] % 2 != 0) violated(fn, cat("x's rows (", a->ne[0], ") must have an even length"));
    if (mode & 1) violated(fn, "mode bit 0 is not supported");
    if (!std::isfinite(freq_base) || !(freq_base > 0) || !std::isfinite(freq_scale) || !std::isfinite(attn_factor))
        violated(fn, "freq_base must be positive, freq_scale and attn_factor finite");
    if (freq_factors) {
        need_types(fn, "the frequency factors", freq_factors, {GGML_TYPE_F32});
        // (ggml's CPU rope reads one for every pair of a row, also past n_dims)
        if (!ggml_is_vector(freq_factors) || !ggml_is_contiguous(freq_factors) || freq_factors->ne[0] < a->ne[0] / 2)
            violated(fn, cat("frequency factors ", describe(freq_factors), " must be a contiguous vector of at least ", a->ne[0] / 2));
    }
    return ggml_rope_ext(ctx, a, b, freq_factors, n_dims, mode, /*n_ctx_orig=*/0, freq_base, freq_scale, /*ext_factor=*/0.0f,
                         attn_factor, /*beta_fast=*/32.0f, /*beta_slow=*/1.0f);
}

ggml_tensor* flash_attn_ext(ggml_context* ctx, ggml_tensor* q, ggml_tensor* k, ggml_tensor* v, ggml_tensor* mask,
                            float scale) {
    const char* fn = "ggml_flash_attn_ext";
    need_room(ctx);
    for (auto [name, t] : {std::pair<const char*, ggml_tensor*>{"q", q}, {"k", k}, {"v", v}}) {
        need_types(fn, name, t, {GGML_TYPE_F32});
        if (!dense_rows(t)) violated(fn, cat(name, " must be dense along ne0"));
    }
    if (k->ne[0] != q->ne[0] || k->ne[2] < 1 || q->ne[2] % k->ne[2] != 0 || v->ne[1] != k->ne[1] || v->ne[2] != k->ne[2] ||
        q->ne[3] != k->ne[3] || q->ne[3] != v->ne[3])
        violated(fn, cat("q ", describe(q), ", k ", describe(k), " and v ", describe(v), " do not fit together"));
    if (!std::isfinite(scale)) violated(fn, "scale must be finite");
    if (mask) {
        need_types(fn, "the mask", mask, {GGML_TYPE_F16});
        need_contiguous(fn, "the mask", mask);
        if (mask->ne[0] != k->ne[1] || mask->ne[1] < q->ne[1] || mask->ne[2] < 1 || mask->ne[3] < 1 ||
            q->ne[2] % mask->ne[2] != 0 || q->ne[3] % mask->ne[3] != 0)
            violated(fn, cat("the mask ", describe(mask), " does not fit q ", describe(q), " and k ", describe(k)));
    }
    ggml_tensor* r = ggml_flash_attn_ext(ctx, q, k, v, mask, scale, 0.0f, 0.0f);
    ggml_flash_attn_ext_set_prec(r, GGML_PREC_F32);
    return r;
}

ggml_tensor* arange(ggml_context* ctx, float start, float stop, float step) {
    need_room(ctx);
    if (!(stop > start) || !(step > 0) || !std::isfinite(stop)) violated("ggml_arange", "stop must be above start and step positive");
    return ggml_arange(ctx, start, stop, step);
}

ggml_tensor* fill(ggml_context* ctx, ggml_tensor* a, float value) {
    need_room(ctx);
    need_types("ggml_fill", "a", a, {GGML_TYPE_F32, GGML_TYPE_F16});
    need_contiguous("ggml_fill", "a", a);
    return ggml_fill(ctx, a, value);
}

ggml_tensor* diag_mask_inf_inplace(ggml_context* ctx, ggml_tensor* a, int n_past) {
    need_room(ctx);
    need_types("ggml_diag_mask_inf_inplace", "a", a, {GGML_TYPE_F32});
    return ggml_diag_mask_inf_inplace(ctx, a, n_past);
}

ggml_tensor* sum_rows(ggml_context* ctx, ggml_tensor* a) {
    need_room(ctx);
    need_types("ggml_sum_rows", "a", a, {GGML_TYPE_F32});
    return ggml_sum_rows(ctx, a);
}

ggml_tensor* mean(ggml_context* ctx, ggml_tensor* a) {
    need_room(ctx);
    need_types("ggml_mean", "a", a, {GGML_TYPE_F32});
    return ggml_mean(ctx, a);
}

ggml_tensor* clamp(ggml_context* ctx, ggml_tensor* a, float lo, float hi) {
    need_room(ctx);
    need_types("ggml_clamp", "a", a, {GGML_TYPE_F32});
    if (!dense_rows(a)) violated("ggml_clamp", cat("a ", describe(a), " must have contiguous rows"));
    if (!(lo <= hi)) violated("ggml_clamp", cat("the range [", lo, ", ", hi, "] is empty"));
    return ggml_clamp(ctx, a, lo, hi);
}

ggml_tensor* scale_bias(ggml_context* ctx, ggml_tensor* a, float s, float b) {
    need_room(ctx);
    need_types("ggml_scale_bias", "a", a, {GGML_TYPE_F32});
    if (!dense_rows(a)) violated("ggml_scale_bias", cat("a ", describe(a), " must have contiguous rows"));
    if (!std::isfinite(s) || !std::isfinite(b)) violated("ggml_scale_bias", cat("scale ", s, " and bias ", b, " must be finite"));
    return ggml_scale_bias(ctx, a, s, b);
}

ggml_tensor* unary(ggml_context* ctx, Unary op, ggml_tensor* a) {
    need_room(ctx);
    need_types("ggml_unary", "a", a, {GGML_TYPE_F32, GGML_TYPE_F16});
    if (!dense_rows(a)) violated("ggml_unary", cat("a ", describe(a), " must have contiguous rows"));
    switch (op) {
        case Unary::Silu: return ggml_silu(ctx, a);
        case Unary::Sigmoid: return ggml_sigmoid(ctx, a);
        case Unary::Tanh: return ggml_tanh(ctx, a);
        case Unary::Exp: return ggml_exp(ctx, a);
        case Unary::Log: return ggml_log(ctx, a);
        case Unary::Sqrt: return ggml_sqrt(ctx, a);
        case Unary::Sqr: return ggml_sqr(ctx, a);
        case Unary::Abs: return ggml_abs(ctx, a);
        case Unary::Neg: return ggml_neg(ctx, a);
        case Unary::Sin: return ggml_sin(ctx, a);
        case Unary::Cos: return ggml_cos(ctx, a);
        case Unary::Relu: return ggml_relu(ctx, a);
        case Unary::Step: return ggml_step(ctx, a);
        case Unary::GeluErf: return ggml_gelu_erf(ctx, a);
    }
    violated("ggml_unary", "unknown op");
}

bool is_unary(const ggml_tensor* t, Unary op) {
    auto unary_is = [&](ggml_unary_op u) { return t->op == GGML_OP_UNARY && ggml_get_unary_op(t) == u; };
    switch (op) {
        case Unary::Silu: return unary_is(GGML_UNARY_OP_SILU);
        case Unary::Sigmoid: return unary_is(GGML_UNARY_OP_SIGMOID);
        case Unary::Tanh: return unary_is(GGML_UNARY_OP_TANH);
        case Unary::Exp: return unary_is(GGML_UNARY_OP_EXP);
        case Unary::Abs: return unary_is(GGML_UNARY_OP_ABS);
        case Unary::Neg: return unary_is(GGML_UNARY_OP_NEG);
        case Unary::Relu: return unary_is(GGML_UNARY_OP_RELU);
        case Unary::Step: return unary_is(GGML_UNARY_OP_STEP);
        case Unary::GeluErf: return unary_is(GGML_UNARY_OP_GELU_ERF);
        case Unary::Log: return t->op == GGML_OP_LOG;
        case Unary::Sqrt: return t->op == GGML_OP_SQRT;
        case Unary::Sqr: return t->op == GGML_OP_SQR;
        case Unary::Sin: return t->op == GGML_OP_SIN;
        case Unary::Cos: return t->op == GGML_OP_COS;
    }
    return false;
}

ggml_tensor* swiglu(ggml_context* ctx, ggml_tensor* a, ggml_tensor* b) {
    const char* fn = "ggml_swiglu_split";
    need_room(ctx);
    need_types(fn, "a", a, {GGML_TYPE_F32, GGML_TYPE_F16});
    if (b->type != a->type || !ggml_are_same_shape(a, b))
        violated(fn, cat("a ", describe(a), " and b ", describe(b), " differ in type or shape"));
    if (!ggml_is_contiguous(a) || !ggml_is_contiguous(b)) violated(fn, "a and b must be contiguous");
    return ggml_swiglu_split(ctx, a, b);
}

namespace {

// strides (dilations) >= 1, paddings >= 0; the windows' extent within the padded size
void need_window(const char* fn, int64_t size, int64_t k, int s, int p, int d, int axis) {
    if (s < 1 || d < 1 || p < 0) violated(fn, cat("axis ", axis, ": stride ", s, ", padding ", p, ", dilation ", d));
    if (k < 1 || size + 2 * int64_t(p) < int64_t(d) * (k - 1) + 1)
        violated(fn, cat("axis ", axis, ": a kernel of ", k, " (dilation ", d, ") does not fit ", size, " + 2 * ", p));
}

}  // namespace

ggml_tensor* im2col(ggml_context* ctx, ggml_tensor* a, ggml_tensor* b, int s0, int s1, int p0, int p1, int d0, int d1) {
    const char* fn = "ggml_im2col";
    need_room(ctx);
    need_types(fn, "the kernel", a, {GGML_TYPE_F32, GGML_TYPE_F16});
    need_types(fn, "the input", b, {GGML_TYPE_F32});
    need_contiguous(fn, "the input", b);
    if (a->ne[2] != b->ne[2]) violated(fn, cat("the kernel ", describe(a), " and the input ", describe(b), " differ in channels"));
    need_window(fn, b->ne[0], a->ne[0], s0, p0, d0, 0);
    need_window(fn, b->ne[1], a->ne[1], s1, p1, d1, 1);
    return ggml_im2col(ctx, a, b, s0, s1, p0, p1, d0, d1, true, GGML_TYPE_F32);
}

ggml_tensor* pool_2d(ggml_context* ctx, ggml_tensor* a, ggml_op_pool op, int k0, int k1, int s0, int s1, int p0, int p1) {
    const char* fn = "ggml_pool_2d";
    need_room(ctx);
    if (op != GGML_OP_POOL_MAX && op != GGML_OP_POOL_AVG) violated(fn, "op must be max or avg");
    need_types(fn, "a", a, {GGML_TYPE_F32});
    need_contiguous(fn, "a", a);
    if (p0 >= k0 || p1 >= k1) violated(fn, cat("paddings (", p0, ", ", p1, ") must be below the kernel (", k0, ", ", k1, ")"));
    need_window(fn, a->ne[0], k0, s0, p0, 1, 0);
    need_window(fn, a->ne[1], k1, s1, p1, 1, 1);
    return ggml_pool_2d(ctx, a, op, k0, k1, s0, s1, float(p0), float(p1));
}

ggml_tensor* argsort(ggml_context* ctx, ggml_tensor* a, bool descending) {
    const char* fn = "ggml_argsort";
    need_room(ctx);
    need_types(fn, "a", a, {GGML_TYPE_F32});
    need_contiguous(fn, "a", a);
    if (a->ne[0] > INT32_MAX) violated(fn, cat("rows of ", a->ne[0], " values (at most ", INT32_MAX, ")"));
    return ggml_argsort(ctx, a, descending ? GGML_SORT_ORDER_DESC : GGML_SORT_ORDER_ASC);
}

ggml_tensor* custom_4d(ggml_context* ctx, ggml_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3,
                       ggml_tensor** args, int n_args, ggml_custom_op_t fun, int n_tasks, void* userdata) {
    need_room(ctx);
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    need_positive("ggml_custom_4d", ne);
    if (n_args < 0 || n_args >= GGML_MAX_SRC) violated("ggml_custom_4d", cat(n_args, " arguments (at most ", GGML_MAX_SRC - 1, ")"));
    const KernelGuards::Call call = KernelGuards::wrap(fun, userdata);
    return ggml_custom_4d(ctx, type, ne[0], ne[1], ne[2], ne[3], args, n_args, call.fun, n_tasks, call.userdata);
}

ggml_tensor* custom_inplace(ggml_context* ctx, ggml_tensor* a, ggml_tensor** args, int n_args, ggml_custom_op_t fun,
                            int n_tasks, void* userdata) {
    need_room(ctx);
    if (n_args < 0 || n_args >= GGML_MAX_SRC - 1)
        violated("ggml_custom_inplace", cat(n_args, " arguments (at most ", GGML_MAX_SRC - 2, ")"));
    const KernelGuards::Call call = KernelGuards::wrap(fun, userdata);
    return ggml_custom_inplace(ctx, a, args, n_args, call.fun, n_tasks, call.userdata);
}

}  // namespace dg::gg
