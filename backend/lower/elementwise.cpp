// Elementwise ops: binary with numpy broadcasting, unary activations, BiasAdd.
#include "../generated/dyngraph_ir_generated.h"
#include "../kernels/kernels.h"
#include "../gg.h"
#include "families.h"

namespace dg {

using K = dyngraph::fb::OpKind;
using GgmlBinary = ggml_tensor* (*)(ggml_context*, ggml_tensor*, ggml_tensor*);

namespace {

bool same_ne(const ggml_tensor* t, const std::array<int64_t, 4>& ne) {
    return t->ne[0] == ne[0] && t->ne[1] == ne[1] && t->ne[2] == ne[2] && t->ne[3] == ne[3];
}

// ggml's float binary ops broadcast their second operand only: repeat the first when it is the smaller.
template <GgmlBinary OP, kernels::Binary INT_OP>
void lower_arith(LowerCtx& c) {
    auto ne = c.out_shape(0).ne();
    ggml_tensor* a = c.in[0];
    ggml_tensor* b = c.in[1];
    if (a->type == GGML_TYPE_I32 && !c.host()) {
        // off the host CPU: in f32 with ggml's ops (exact for integers up to 2^24 in magnitude)
        if (c.out_dtype(0) == DType::Bool) c.not_portable("a bool sum (logical or)");
        a = c.cast(c.cont(a), GGML_TYPE_F32);
        b = c.cast(c.cont(b), GGML_TYPE_F32);
        if (!same_ne(a, ne)) a = gg::repeat_4d(c.ctx, a, ne[0], ne[1], ne[2], ne[3]);
        c.out = {gg::cast(c.ctx, OP(c.ctx, a, b), GGML_TYPE_I32)};
        return;
    }
    if (a->type == GGML_TYPE_I32) {
        // bool is held as i32 0/1: bool + bool is logical or, which must stay 0/1
        kernels::Binary op = INT_OP == kernels::Binary::Add && c.out_dtype(0) == DType::Bool ? kernels::Binary::Max : INT_OP;
        c.out = {kernels::binary(c.ctx, op, a, b, ne.data())};
        return;
    }
    a = c.cont(a);
    b = c.cont(b);
    if (!same_ne(a, ne)) a = gg::repeat_4d(c.ctx, a, ne[0], ne[1], ne[2], ne[3]);
    c.out = {OP(c.ctx, a, b)};
}

template <kernels::Binary OP>
void lower_minmax(LowerCtx& c) {
    auto ne = c.out_shape(0).ne();
    ggml_tensor* a = c.in[0];
    ggml_tensor* b = c.in[1];
    ggml_type t = a->type;
    if (t != GGML_TYPE_F32 && t != GGML_TYPE_I32) {  // f16 / bf16: compute in f32
        a = gg::cast(c.ctx, a, GGML_TYPE_F32);
        b = gg::cast(c.ctx, b, GGML_TYPE_F32);
    }
    ggml_tensor* r = kernels::binary(c.ctx, OP, a, b, ne.data());
    c.out = {c.cast(r, t)};
}

void lower_divide(LowerCtx& c) {
    // the shape rule admits floating-point inputs only
    if (c.in[0]->type == GGML_TYPE_I32) c.unsupported("Divide on integer tensors");
    auto ne = c.out_shape(0).ne();
    ggml_tensor* a = c.cont(c.in[0]);
    if (!same_ne(a, ne)) a = gg::repeat_4d(c.ctx, a, ne[0], ne[1], ne[2], ne[3]);
    c.out = {gg::div(c.ctx, a, c.cont(c.in[1]))};
}

// ggml's unary kernels run on f32 (and f16); bf16 goes through f32.
template <gg::Unary OP>
void lower_unary_f32(LowerCtx& c) {
    ggml_tensor* x = c.cont(c.in[0]);
    ggml_type t = x->type;
    if (t != GGML_TYPE_F32) x = gg::cast(c.ctx, x, GGML_TYPE_F32);
    c.out = {c.cast(gg::unary(c.ctx, OP, x), t)};
}

// Unary ops whose ggml kernel is not accurate enough in f32 run as our own kernel (on f32).
template <kernels::Unary OP>
void lower_unary_kernel(LowerCtx& c) {
    ggml_tensor* x = c.in[0];
    ggml_type t = x->type;
    if (t != GGML_TYPE_F32) x = gg::cast(c.ctx, x, GGML_TYPE_F32);
    c.out = {c.cast(kernels::unary(c.ctx, OP, x), t)};
}

void lower_gelu(LowerCtx& c) {
    // ggml_gelu reads a table indexed by the input rounded to f16 (about 1e-3 relative error)
    if (c.attrs<ops::GELUAttrs>().mode == ops::GELUAttrs::Mode::tanh) lower_unary_kernel<kernels::Unary::GeluTanh>(c);
    else lower_unary_kernel<kernels::Unary::GeluErf>(c);
}

void lower_bias_add(LowerCtx& c) {
    // the shape rule admits floating-point inputs only (ggml_add aborts on integers)
    if (c.in[0]->type == GGML_TYPE_I32) c.unsupported("BiasAdd on integer tensors");
    ggml_tensor* x = c.cont(c.in[0]);
    ggml_tensor* bias = c.cont(c.in[1]);
    Dims xs = c.in_shape(0);
    if (c.attrs<ops::BiasAddAttrs>().data_format == ops::BiasAddAttrs::DataFormat::NCX && xs.rank > 1) {
        int64_t ne[4] = {1, 1, 1, 1};
        ne[ggml_dim(1, xs.rank)] = bias->ne[0];
        bias = gg::reshape_4d(c.ctx, bias, ne[0], ne[1], ne[2], ne[3]);
    }
    c.out = {gg::add(c.ctx, x, bias)};
}

}  // namespace

void register_elementwise(LoweringTable& t) {
    t.add(uint16_t(K::Add), lower_arith<ggml_add, kernels::Binary::Add>);
    t.add(uint16_t(K::Subtract), lower_arith<ggml_sub, kernels::Binary::Sub>);
    t.add(uint16_t(K::Multiply), lower_arith<ggml_mul, kernels::Binary::Mul>);
    t.add(uint16_t(K::Divide), lower_divide);
    t.add(uint16_t(K::Maximum), lower_minmax<kernels::Binary::Max>);
    t.add(uint16_t(K::Minimum), lower_minmax<kernels::Binary::Min>);
    t.add(uint16_t(K::BiasAdd), lower_bias_add);
    t.add(uint16_t(K::ReLU), lower_unary_kernel<kernels::Unary::Relu>);  // ggml_relu maps NaN to 0
    t.add(uint16_t(K::GELU), lower_gelu);
    t.add(uint16_t(K::SiLU), lower_unary_f32<gg::Unary::Silu>);
    t.add(uint16_t(K::Sigmoid), lower_unary_f32<gg::Unary::Sigmoid>);
    t.add(uint16_t(K::Tanh), lower_unary_f32<gg::Unary::Tanh>);
    t.add(uint16_t(K::Exp), lower_unary_f32<gg::Unary::Exp>);
    t.add(uint16_t(K::Log), lower_unary_f32<gg::Unary::Log>);
    t.add(uint16_t(K::Sqrt), lower_unary_f32<gg::Unary::Sqrt>);
    t.add(uint16_t(K::Square), lower_unary_f32<gg::Unary::Sqr>);
    t.add(uint16_t(K::Abs), lower_unary_f32<gg::Unary::Abs>);
    t.add(uint16_t(K::Neg), lower_unary_f32<gg::Unary::Neg>);
    t.add(uint16_t(K::Sin), lower_unary_f32<gg::Unary::Sin>);
    t.add(uint16_t(K::Cos), lower_unary_f32<gg::Unary::Cos>);
}

}  // namespace dg
