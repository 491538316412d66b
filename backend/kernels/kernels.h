// CPU kernels for the ops ggml does not have, run as ggml custom ops
// (multi-threaded by ggml: each call handles rows ith, ith+nth, ...).
#pragma once

#include "ggml.h"

namespace dg::kernels {

enum class Binary { Max, Min, Add, Sub, Mul };
enum class Compare { Eq, Ne, Gt, Ge, Lt, Le };
enum class ReduceRows { Max, Min, Sum };
enum class Unary { Relu, GeluTanh, GeluErf };

// out = a (op) b with numpy broadcasting (each of a, b may have 1 where out
// has n). a, b: F32 or I32 (same type); out has their type. I32 arithmetic
// wraps around on overflow (two's complement, as numpy's int32).
ggml_tensor* binary(ggml_context* ctx, Binary op, ggml_tensor* a, ggml_tensor* b, const int64_t ne[4]);

// out = f(a), F32 in and out, computed in f32 at full precision where ggml's
// own kernel is not: ReLU propagates NaN (ggml's gives 0), GELU-tanh is
// evaluated directly (ggml's reads an f16 table, about 1e-3 relative error),
// GELU-erf is vectorized (gelu_erf.h; ggml's calls erff per element).
ggml_tensor* unary(ggml_context* ctx, Unary op, ggml_tensor* a);

// out (I32, 0/1) = a (cmp) b with numpy broadcasting; a, b: F32 or I32 (same type).
ggml_tensor* compare(ggml_context* ctx, Compare op, ggml_tensor* a, ggml_tensor* b, const int64_t ne[4]);

// out = cond ? a : b with numpy broadcasting; cond I32; a, b same type (F32 or I32).
ggml_tensor* select(ggml_context* ctx, ggml_tensor* cond, ggml_tensor* a, ggml_tensor* b, const int64_t ne[4]);

// out[r] = reduce(a[r, :]) over ne0 (out ne0 = 1). a: F32 or I32, contiguous rows.
ggml_tensor* reduce_rows(ggml_context* ctx, ReduceRows op, ggml_tensor* a);

// out (I32) = a != 0
ggml_tensor* nonzero(ggml_context* ctx, ggml_tensor* a);

}  // namespace dg::kernels
