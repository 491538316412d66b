// Comparisons, logical ops and Select, with numpy broadcasting. Bool tensors
// are I32 (0/1) inside ggml; f16 / bf16 operands are compared and selected in f32.
#include "../errors.h"
#include "../generated/dyngraph_ir_generated.h"
#include "../kernels/index_kernels.h"
#include "../kernels/kernels.h"
#include "../gg.h"
#include "families.h"
#include "portable.h"

namespace dg {

using K = dyngraph::fb::OpKind;

namespace {

// The broadcasting kernels read each operand where out has n and it has n or 1:
// check that before handing them over (a wrong operand would read out of bounds).
void check_broadcast(const LowerCtx& c, const ggml_tensor* t, const std::array<int64_t, 4>& ne) {
    for (int d = 0; d < 4; ++d)
        if (t->ne[d] != ne[size_t(d)] && t->ne[d] != 1)
            c.unsupported(cat("operand ne [", t->ne[0], ", ", t->ne[1], ", ", t->ne[2], ", ", t->ne[3],
                              "] does not broadcast to the output"));
}

bool kernel_type(ggml_type t) { return t == GGML_TYPE_F32 || t == GGML_TYPE_I32; }

ggml_tensor* to_f32(LowerCtx& c, ggml_tensor* t) { return kernel_type(t->type) ? t : gg::cast(c.ctx, t, GGML_TYPE_F32); }

// t as dense F32 of shape ne (broadcast by repetition), for the portable forms below.
ggml_tensor* full_f32(LowerCtx& c, ggml_tensor* t, const std::array<int64_t, 4>& ne) {
    t = c.cast(c.cont(t), GGML_TYPE_F32);
    if (t->ne[0] != ne[0] || t->ne[1] != ne[1] || t->ne[2] != ne[2] || t->ne[3] != ne[3])
        t = gg::repeat_4d(c.ctx, t, ne[0], ne[1], ne[2], ne[3]);
    return t;
}

ggml_tensor* f32_one(LowerCtx& c) { return gg::fill(c.ctx, gg::arange(c.ctx, 0.0f, 1.0f, 1.0f), 1.0f); }

// 1 - x, for x of 0 / 1
ggml_tensor* one_minus(LowerCtx& c, ggml_tensor* x) { return gg::unary(c.ctx, gg::Unary::Neg, gg::sub(c.ctx, x, f32_one(c))); }

// Off the host CPU, with ggml's ops: in f32, step(a - b) is a > b. Integers compare exactly up to
// 2^24 in magnitude; a NaN operand counts as equal to anything (numpy: unordered).
ggml_tensor* portable_compare(LowerCtx& c, kernels::Compare op, ggml_tensor* a, ggml_tensor* b,
                              const std::array<int64_t, 4>& ne) {
    a = full_f32(c, a, ne);
    b = full_f32(c, b, ne);
    auto greater = [&](ggml_tensor* x, ggml_tensor* y) { return gg::unary(c.ctx, gg::Unary::Step, gg::sub(c.ctx, x, y)); };
    ggml_tensor* r = nullptr;
    switch (op) {
        case kernels::Compare::Gt: r = greater(a, b); break;
        case kernels::Compare::Lt: r = greater(b, a); break;
        case kernels::Compare::Ge: r = one_minus(c, greater(b, a)); break;
        case kernels::Compare::Le: r = one_minus(c, greater(a, b)); break;
        case kernels::Compare::Eq: r = gg::mul(c.ctx, one_minus(c, greater(a, b)), one_minus(c, greater(b, a))); break;
        case kernels::Compare::Ne: r = gg::add(c.ctx, greater(a, b), greater(b, a)); break;
    }
    return gg::cast(c.ctx, r, GGML_TYPE_I32);
}

// Off the host CPU: a bool (I32) as 1 where it is not 0, else 0, in F32 of shape ne: step(|x|).
ggml_tensor* truth_f32(LowerCtx& c, ggml_tensor* t, const std::array<int64_t, 4>& ne) {
    return gg::unary(c.ctx, gg::Unary::Step, gg::unary(c.ctx, gg::Unary::Abs, full_f32(c, t, ne)));
}

template <kernels::Compare OP>
void lower_compare(LowerCtx& c) {
    const auto ne = c.out_shape(0).ne();
    ggml_tensor* a = c.in[0];
    ggml_tensor* b = c.in[1];
    if (a->type != b->type) c.unsupported("operands of different types");
    check_broadcast(c, a, ne);
    check_broadcast(c, b, ne);
    if (!c.host()) {
        c.out = {portable_compare(c, OP, a, b, ne)};
        return;
    }
    c.out = {kernels::compare(c.ctx, OP, to_f32(c, a), to_f32(c, b), ne.data())};
}

void lower_select(LowerCtx& c) {
    const auto ne = c.out_shape(0).ne();
    ggml_tensor* cond = c.in[0];
    ggml_tensor* a = c.in[1];
    ggml_tensor* b = c.in[2];
    if (cond->type != GGML_TYPE_I32) c.unsupported("the condition must be bool");
    if (a->type != b->type) c.unsupported("then and else have different types");
    for (ggml_tensor* t : {cond, a, b}) check_broadcast(c, t, ne);
    const ggml_type type = a->type;
    if (!c.host()) {  // a row gather of single values from [a, b]: exact for every value, as on the host
        if (type == GGML_TYPE_I32) c.not_portable("a selection of integers (f32 holds them exactly only up to 2^24)");
        ggml_tensor* r = portable::select(c, truth_f32(c, cond, ne), full_f32(c, a, ne), full_f32(c, b, ne));
        c.out = {c.cast(r, type)};
        return;
    }
    ggml_tensor* r = kernels::select(c.ctx, cond, to_f32(c, a), to_f32(c, b), ne.data());
    c.out = {c.cast(r, type)};
}

template <index_kernels::Logical OP>
void lower_logical(LowerCtx& c) {
    const auto ne = c.out_shape(0).ne();
    for (ggml_tensor* t : {c.in[0], c.in[1]}) {
        if (t->type != GGML_TYPE_I32) c.unsupported("operands must be bool");
        check_broadcast(c, t, ne);
    }
    if (!c.host()) {  // with ggml's ops: and = a * b, or = step(a + b) (a, b of 0 / 1)
        ggml_tensor* a = truth_f32(c, c.in[0], ne);
        ggml_tensor* b = truth_f32(c, c.in[1], ne);
        ggml_tensor* r = nullptr;
        switch (OP) {
            case index_kernels::Logical::And: r = gg::mul(c.ctx, a, b); break;
            case index_kernels::Logical::Or: r = gg::unary(c.ctx, gg::Unary::Step, gg::add(c.ctx, a, b)); break;
        }
        c.out = {gg::cast(c.ctx, r, GGML_TYPE_I32)};
        return;
    }
    c.out = {index_kernels::logical(c.ctx, OP, c.in[0], c.in[1], ne.data())};
}

void lower_logical_not(LowerCtx& c) {
    if (c.in[0]->type != GGML_TYPE_I32) c.unsupported("the operand must be bool");
    if (!c.host()) {
        const auto ne = c.out_shape(0).ne();
        c.out = {gg::cast(c.ctx, one_minus(c, truth_f32(c, c.in[0], ne)), GGML_TYPE_I32)};
        return;
    }
    c.out = {index_kernels::logical_not(c.ctx, c.in[0])};
}

}  // namespace

void register_compare(LoweringTable& t) {
    t.add(uint16_t(K::Equal), lower_compare<kernels::Compare::Eq>);
    t.add(uint16_t(K::NotEqual), lower_compare<kernels::Compare::Ne>);
    t.add(uint16_t(K::Greater), lower_compare<kernels::Compare::Gt>);
    t.add(uint16_t(K::GreaterEqual), lower_compare<kernels::Compare::Ge>);
    t.add(uint16_t(K::Less), lower_compare<kernels::Compare::Lt>);
    t.add(uint16_t(K::LessEqual), lower_compare<kernels::Compare::Le>);
    t.add(uint16_t(K::Select), lower_select);
    t.add(uint16_t(K::LogicalAnd), lower_logical<index_kernels::Logical::And>);
    t.add(uint16_t(K::LogicalOr), lower_logical<index_kernels::Logical::Or>);
    t.add(uint16_t(K::LogicalNot), lower_logical_not);
}

}  // namespace dg
