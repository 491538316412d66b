// Elementwise ops: binary with numpy broadcasting, unary activations, Expand,
// Reorder, BiasAdd. ggml's float kernels where they are exact enough; our own
// (kernels/kernels.h) where ggml has none or a less accurate one.
#include "../generated/dyngraph_ir_generated.h"
#include "../kernels/kernels.h"
#include "../gg.h"
#include "families.h"
#include "portable.h"

namespace dg {

using K = dyngraph::fb::OpKind;
using GgBinary = ggml_tensor* (*)(ggml_context*, ggml_tensor*, ggml_tensor*);

namespace {

bool same_ne(const ggml_tensor* t, const std::array<int64_t, 4>& ne) {
    return t->ne[0] == ne[0] && t->ne[1] == ne[1] && t->ne[2] == ne[2] && t->ne[3] == ne[3];
}

// ggml's float binary ops broadcast their second operand only: repeat the first when it is the smaller.
template <GgBinary OP, kernels::Binary INT_OP>
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
    if (!same_ne(a, ne)) {
        // a sum or a product (exact either way round) takes the smaller operand second, which ggml
        // broadcasts as it reads it, instead of a repeated copy (an RMSNorm's weight times its rows)
        constexpr bool commutes = INT_OP == kernels::Binary::Add || INT_OP == kernels::Binary::Mul;
        if (commutes && a->type == b->type && same_ne(b, ne)) std::swap(a, b);
        else a = gg::repeat_4d(c.ctx, a, ne[0], ne[1], ne[2], ne[3]);
    }
    c.out = {OP(c.ctx, a, b)};
}

// silu(g) * u as one ggml op (ggml_swiglu_split) when the SiLU's output is read by this Multiply
// alone and neither side broadcasts: one pass instead of two, and a GPU backend computes it together
// with the products that make g and u (ggml-cuda fuses mul_mat, mul_mat, glu at one row, a decoder's
// MLP). The SiLU's node is left unused. nullptr where this is not that pattern.
ggml_tensor* swiglu_of(LowerCtx& c) {
    if (c.out_dtype(0) != DType::F32) return nullptr;
    const auto ne = c.out_shape(0).ne();
    for (size_t s = 0; s < 2; ++s) {
        const OpDef* made_by = c.producer_read_only_here(s);
        const ggml_tensor* silu = c.in[s];
        ggml_tensor* u = c.in[1 - s];
        if (!made_by || made_by->kind != uint16_t(K::SiLU) || !gg::is_unary(silu, gg::Unary::Silu)) continue;
        ggml_tensor* g = silu->src[0];
        if (g->type == GGML_TYPE_F32 && u->type == GGML_TYPE_F32 && same_ne(g, ne) && same_ne(u, ne) &&
            ggml_is_contiguous(g) && ggml_is_contiguous(u))
            return gg::swiglu(c.ctx, g, u);
    }
    return nullptr;
}

void lower_multiply(LowerCtx& c) {
    if (ggml_tensor* r = swiglu_of(c)) {
        c.out = {r};
        return;
    }
    lower_arith<gg::mul, kernels::Binary::Mul>(c);
}

// Binary ops of our kernel (F32 or I32): f16 and bf16 are computed in f32.
template <kernels::Binary OP>
void lower_binary_kernel(LowerCtx& c) {
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

// Maximum / Minimum off the host CPU: the kernel's choice (x where x > y (x < y) or x is NaN, else y)
// computed with ggml's comparisons in f32 and made by an exact selection. Integers stay on the host
// (their f32 comparison is exact only up to 2^24).
template <bool MAX>
void lower_extremum(LowerCtx& c) {
    if (c.host()) return lower_binary_kernel<MAX ? kernels::Binary::Max : kernels::Binary::Min>(c);
    const ggml_type t = c.in[0]->type;
    if (t == GGML_TYPE_I32) c.not_portable("an integer Maximum / Minimum");
    auto ne = c.out_shape(0).ne();
    auto full = [&](ggml_tensor* x) {
        x = portable::dense_f32(c, x);
        return same_ne(x, ne) ? x : gg::repeat_4d(c.ctx, x, ne[0], ne[1], ne[2], ne[3]);
    };
    ggml_tensor* a = full(c.in[0]);
    ggml_tensor* b = full(c.in[1]);
    ggml_tensor* beats = gg::unary(c.ctx, gg::Unary::Step, MAX ? gg::sub(c.ctx, a, b) : gg::sub(c.ctx, b, a));
    ggml_tensor* pick_a = gg::add(c.ctx, beats, portable::is_nan(c, a));  // (a NaN: beats is 0)
    c.out = {c.cast(portable::select(c, pick_a, a, b), t)};
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

// Unary ops that ggml lacks, or computes less accurately, run as our own kernel (on f32).
void unary_kernel(LowerCtx& c, kernels::Unary op, double p0 = 0.0, double p1 = 0.0) {
    ggml_tensor* x = c.in[0];
    ggml_type t = x->type;
    if (t != GGML_TYPE_F32) x = gg::cast(c.ctx, c.cont(x), GGML_TYPE_F32);
    c.out = {c.cast(kernels::unary(c.ctx, op, x, float(p0), float(p1)), t)};
}

template <kernels::Unary OP>
void lower_unary_kernel(LowerCtx& c) {
    unary_kernel(c, OP);
}

void lower_pow(LowerCtx& c) {
    if (c.n_in() == 2) return lower_binary_kernel<kernels::Binary::Pow>(c);
    unary_kernel(c, kernels::Unary::Pow, c.attrs<ops::PowAttrs>().beta);
}

void lower_clamp(LowerCtx& c) {
    const auto& a = c.attrs<ops::ClampAttrs>();
    unary_kernel(c, kernels::Unary::Clamp, a.min, a.max);
}

void lower_elu(LowerCtx& c) { unary_kernel(c, kernels::Unary::Elu, c.attrs<ops::EluAttrs>().alpha); }

void lower_leaky_relu(LowerCtx& c) { unary_kernel(c, kernels::Unary::LeakyRelu, c.attrs<ops::LeakyReLUAttrs>().alpha); }

void lower_hard_sigmoid(LowerCtx& c) {
    const auto& a = c.attrs<ops::HardSigmoidAttrs>();
    unary_kernel(c, kernels::Unary::HardSigmoid, a.alpha, a.beta);
}

void lower_soft_plus(LowerCtx& c) { unary_kernel(c, kernels::Unary::SoftPlus, c.attrs<ops::SoftPlusAttrs>().beta); }

// numpy broadcast_to: the input, aligned right with leading 1s, repeated to the output's shape.
void lower_expand(LowerCtx& c) {
    Dims in = c.in_shape(0), out = c.out_shape(0);
    Dims aligned;
    aligned.rank = out.rank;
    for (int i = 0; i < out.rank; ++i) aligned.d[i] = i < out.rank - in.rank ? 1 : in.d[i - (out.rank - in.rank)];
    ggml_tensor* x = c.reshape(c.in[0], aligned);
    auto ne = out.ne();
    c.out = {same_ne(x, ne) ? x : gg::repeat_4d(c.ctx, x, ne[0], ne[1], ne[2], ne[3])};
}

// A copy (never the input itself: the output is a tensor of its own).
void lower_reorder(LowerCtx& c) { c.out = {gg::dup(c.ctx, c.in[0])}; }

// GELU off the host CPU: ggml's gelu_erf (0.5 x (1 + erff(x / sqrt 2)) per element), and the tanh form
// as our kernel computes it, x sigmoid(2 sqrt(2 / pi) x (1 + 0.044715 x^2)), with ggml's ops.
void lower_gelu_portable(LowerCtx& c) {
    const ggml_type t = c.in[0]->type;
    ggml_tensor* x = portable::dense_f32(c, c.in[0]);
    ggml_tensor* y = nullptr;
    if (c.attrs<ops::GELUAttrs>().mode == ops::GELUAttrs::Mode::tanh) {
        ggml_tensor* inner = gg::scale_bias(c.ctx, gg::unary(c.ctx, gg::Unary::Sqr, x), 0.044715f, 1.0f);
        ggml_tensor* u = gg::scale_bias(c.ctx, gg::mul(c.ctx, x, inner), 2.0f * 0.7978845608028654f, 0.0f);
        y = gg::mul(c.ctx, x, gg::unary(c.ctx, gg::Unary::Sigmoid, u));
    } else {
        y = gg::unary(c.ctx, gg::Unary::GeluErf, x);
    }
    c.out = {c.cast(y, t)};
}

void lower_gelu(LowerCtx& c) {
    if (!c.host()) return lower_gelu_portable(c);
    // ggml_gelu reads a table indexed by the input rounded to f16 (about 1e-3 relative error)
    if (c.attrs<ops::GELUAttrs>().mode == ops::GELUAttrs::Mode::tanh) lower_unary_kernel<kernels::Unary::GeluTanh>(c);
    else lower_unary_kernel<kernels::Unary::GeluErf>(c);
}

void lower_bias_add(LowerCtx& c) {
    // the shape rule admits floating-point inputs only (ggml_add aborts on integers)
    if (c.in[0]->type == GGML_TYPE_I32) c.unsupported("BiasAdd on integer tensors");
    ggml_tensor* x = c.cont(c.in[0]);
    ggml_tensor* bias = c.cont(c.in[1]);
    const Dims xs = c.in_shape(0);
    if (c.attrs<ops::BiasAddAttrs>().data_format == ops::BiasAddAttrs::DataFormat::NCX && xs.rank > 1) {
        // x viewed as [N, C, the rest] (any rank up to 6), the bias along C
        Dims m;
        m.rank = 3;
        m.d[0] = xs.d[0];
        m.d[1] = xs.d[1];
        for (int a = 2; a < xs.rank; ++a) m.d[2] *= xs.d[a];
        bias = gg::reshape_4d(c.ctx, bias, 1, bias->ne[0], 1, 1);
        c.out = {c.reshape(gg::add(c.ctx, c.reshape(x, m), bias), xs)};
        return;
    }
    c.out = {gg::add(c.ctx, x, bias)};  // NXC: the bias along ne[0], the innermost axis at every rank
}

}  // namespace

void register_elementwise(LoweringTable& t) {
    t.add(uint16_t(K::Add), lower_arith<gg::add, kernels::Binary::Add>);
    t.add(uint16_t(K::Subtract), lower_arith<gg::sub, kernels::Binary::Sub>);
    t.add(uint16_t(K::Multiply), lower_multiply);
    t.add(uint16_t(K::Divide), lower_divide);
    t.add(uint16_t(K::Maximum), lower_extremum<true>);
    t.add(uint16_t(K::Minimum), lower_extremum<false>);
    t.add(uint16_t(K::SquaredDifference), lower_binary_kernel<kernels::Binary::SquaredDiff>);
    t.add(uint16_t(K::FloorDivide), lower_binary_kernel<kernels::Binary::FloorDiv>);
    t.add(uint16_t(K::Pow), lower_pow);
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
    t.add(uint16_t(K::Erf), lower_unary_kernel<kernels::Unary::Erf>);
    t.add(uint16_t(K::Reciprocal), lower_unary_kernel<kernels::Unary::Reciprocal>);
    t.add(uint16_t(K::Rsqrt), lower_unary_kernel<kernels::Unary::Rsqrt>);
    t.add(uint16_t(K::HardSwish), lower_unary_kernel<kernels::Unary::HardSwish>);
    t.add(uint16_t(K::Mish), lower_unary_kernel<kernels::Unary::Mish>);
    t.add(uint16_t(K::Round), lower_unary_kernel<kernels::Unary::Round>);
    t.add(uint16_t(K::Ceil), lower_unary_kernel<kernels::Unary::Ceil>);
    t.add(uint16_t(K::Floor), lower_unary_kernel<kernels::Unary::Floor>);
    t.add(uint16_t(K::Acos), lower_unary_kernel<kernels::Unary::Acos>);
    t.add(uint16_t(K::Asin), lower_unary_kernel<kernels::Unary::Asin>);
    t.add(uint16_t(K::Atan), lower_unary_kernel<kernels::Unary::Atan>);
    t.add(uint16_t(K::Clamp), lower_clamp);
    t.add(uint16_t(K::Elu), lower_elu);
    t.add(uint16_t(K::LeakyReLU), lower_leaky_relu);
    t.add(uint16_t(K::HardSigmoid), lower_hard_sigmoid);
    t.add(uint16_t(K::SoftPlus), lower_soft_plus);
    t.add(uint16_t(K::Expand), lower_expand);
    t.add(uint16_t(K::Reorder), lower_reorder);
}

}  // namespace dg
