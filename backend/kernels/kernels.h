// CPU kernels for the ops ggml does not have, run as ggml custom ops
// (multi-threaded by ggml: each call handles rows ith, ith+nth, ...).
#pragma once

#include "ggml.h"

namespace dg::kernels {

enum class Binary { Max, Min, Add, Sub, Mul, Pow, SquaredDiff, FloorDiv };
enum class Compare { Eq, Ne, Gt, Ge, Lt, Le };
enum class ReduceRows { Max, Min, Sum, Prod };
// Unary functions; the last ones take one or two parameters (p0, p1 of unary()).
enum class Unary {
    Relu, GeluTanh, GeluErf, Erf, Reciprocal, Rsqrt, HardSwish, Mish, Round, Ceil, Floor, Acos, Asin, Atan,
    Elu,          // p0 alpha: x >= 0 ? x : alpha (e^x - 1)
    LeakyRelu,    // p0 alpha: x >= 0 ? x : alpha x
    HardSigmoid,  // p0 alpha, p1 beta: max(0, min(1, alpha x + beta))
    SoftPlus,     // p0 beta: ln(1 + e^(beta x)) / beta
    Clamp,        // p0 min, p1 max: min(max(x, min), max), NaN stays NaN
    Pow,          // p0 exponent: x ** p0
};

// out = a (op) b with numpy broadcasting (each of a, b may have 1 where out
// has n). a, b: F32 or I32 (same type); out has their type. I32 arithmetic
// wraps around on overflow (two's complement, as numpy's int32). Pow is
// powf; SquaredDiff (a - b)^2; FloorDiv numpy's floor_divide (floats from
// fmod, so floor of the exact quotient; integers toward -inf, x // 0 = 0).
ggml_tensor* binary(ggml_context* ctx, Binary op, ggml_tensor* a, ggml_tensor* b, const int64_t ne[4]);

// out = f(a), F32 in and out, computed in f32 at full precision (libm's
// functions, each rounding once where it can): ReLU propagates NaN (ggml's
// gives 0), GELU-tanh is evaluated directly and vectorized (gelu_tanh.h;
// ggml's reads an f16 table, about 1e-3 relative error), GELU-erf is
// vectorized (gelu_erf.h; ggml's calls erff per element); ggml has no erf,
// round-half-even, ceil, floor, mish, elu, pow or inverse trigonometric functions (acos and asin are
// NaN outside [-1, 1], as numpy and torch). Round is ties-to-even (numpy, torch). The parameters travel in the
// custom op's userdata (two floats), so a graph keeps no side storage.
ggml_tensor* unary(ggml_context* ctx, Unary op, ggml_tensor* a, float p0 = 0.0f, float p1 = 0.0f);

// ReLU as unary() computes it: NaN stays NaN.
inline float relu(float x) { return !(x <= 0.0f) ? x : 0.0f; }

// out (I32, 0/1) = a (cmp) b with numpy broadcasting; a, b: F32 or I32 (same type).
ggml_tensor* compare(ggml_context* ctx, Compare op, ggml_tensor* a, ggml_tensor* b, const int64_t ne[4]);

// out = cond ? a : b with numpy broadcasting; cond I32; a, b same type (F32 or I32).
ggml_tensor* select(ggml_context* ctx, ggml_tensor* cond, ggml_tensor* a, ggml_tensor* b, const int64_t ne[4]);

// out[r] = reduce(a[r, :]) over ne0 (out ne0 = 1). a: F32 or I32, contiguous rows.
ggml_tensor* reduce_rows(ggml_context* ctx, ReduceRows op, ggml_tensor* a);

// out[r] (I32) = the index of the largest a[r, i] over ne0 (out ne0 = 1):
// the first on ties, the first NaN where there is one. a: F32 or I32.
ggml_tensor* argmax_rows(ggml_context* ctx, ggml_tensor* a);

// out (I32) = a != 0
ggml_tensor* nonzero(ggml_context* ctx, ggml_tensor* a);

// Where copy_strided reads: a logical shape (rank <= 6, outermost first) and
// the byte stride of each axis (0 repeats an element), from src's data + offset.
struct StridedCopy {
    int rank = 0;
    int64_t ne[6] = {1, 1, 1, 1, 1, 1};
    int64_t nb[6] = {0, 0, 0, 0, 0, 0};
    int64_t offset = 0;
};

// A dense copy (src's type, ggml shape ne) of the elements `p` describes in
// src: a transpose, a strided slice or a broadcast of any rank up to 6. `p`
// must live as long as the graph (the custom op holds the pointer).
ggml_tensor* copy_strided(ggml_context* ctx, ggml_tensor* src, const StridedCopy* p, const int64_t ne[4]);

}  // namespace dg::kernels
