// Checked ggml: every ggml call a lowering makes goes through one of these.
//
// ggml stops the process (GGML_ASSERT / GGML_ABORT) when a call's
// preconditions do not hold, at graph construction or later in the CPU
// kernels; an IR from a file must never get that far. Each function here
// checks, before calling ggml, every precondition of the call it wraps: the
// asserts of its constructor in ggml.c, the types its CPU kernel computes, and
// that its metadata context has room for the tensors it creates. A violated
// precondition is a CompileError naming the ggml function and what was wrong
// (the builder prefixes the op being lowered); a full context is `OutOfRoom`,
// which the builder answers by building again with a larger one.
//
// The preconditions of each function are listed next to it below; tests/cpp
// has a test per precondition. Lowerings call ggml_* directly only for
// queries that cannot fail (ggml_nbytes, ggml_type_size, ...): a test checks
// that no other ggml call appears in backend/lower/ or backend/kernels/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "errors.h"
#include "ggml.h"

namespace dg::gg {

// The graph's metadata context is full (the builder retries with more room).
struct OutOfRoom {};

// A precondition of a ggml call does not hold (the builder names the op being lowered).
struct Violation : CompileError {
    using CompileError::CompileError;
};

// "F32 [4, 3, 1, 1]" (ggml ne order)
std::string describe(const ggml_tensor* t);

// Room for `n` more tensor objects in ctx, or OutOfRoom.
void need_room(ggml_context* ctx, int n = 1);

// A new leaf tensor; every ne >= 1 (>= 0 with allow_empty: a shape input no
// op computes on) and the byte size representable.
ggml_tensor* new_tensor(ggml_context* ctx, ggml_type type, const int64_t ne[4], bool allow_empty = false);

// a (op) b, b repeated to a's shape: ggml_can_repeat(b, a); a dense in ne0;
// types (a, b): (F32, F32), (F16, F16), (BF16, BF16), (F16|BF16, F32).
ggml_tensor* add(ggml_context* ctx, ggml_tensor* a, ggml_tensor* b);
ggml_tensor* sub(ggml_context* ctx, ggml_tensor* a, ggml_tensor* b);
ggml_tensor* mul(ggml_context* ctx, ggml_tensor* a, ggml_tensor* b);
ggml_tensor* div(ggml_context* ctx, ggml_tensor* a, ggml_tensor* b);

// b (rows of K) times a^T: a->ne[0] == b->ne[0]; b->ne[2] % a->ne[2] == 0 and
// b->ne[3] % a->ne[3] == 0; a not transposed; a of a type with a dot product
// (not I32); b F32.
ggml_tensor* mul_mat(ggml_context* ctx, ggml_tensor* a, ggml_tensor* b);

// Indirect product (mixture of experts): result [N, U, T] with column (u, t) =
// as[:, :, ids[u, t]]^T times b[:, u % b->ne[1], t]. as: experts of [K, N]
// rows (as->ne[3] == 1), dense rows, not transposed, of a type with a dot
// product (F32, F16, BF16 or quantized); b F32 [K, U' , T] with dense rows,
// b->ne[3] == 1, as->ne[0] == b->ne[0]; ids I32 [U, T] (ne[2] == ne[3] == 1),
// ids->ne[1] == b->ne[2], ids->ne[0] % b->ne[1] == 0. The id values must lie
// in [0, as->ne[2]): the caller's to keep there (LowerCtx::safe_indices),
// ggml writes out of bounds otherwise.
ggml_tensor* mul_mat_id(ggml_context* ctx, ggml_tensor* as, ggml_tensor* b, ggml_tensor* ids);

// Type conversion: same type, or F32 <-> F16 | BF16 | I32, or F32 -> a
// quantized type with rows of whole blocks.
ggml_tensor* cast(ggml_context* ctx, ggml_tensor* a, ggml_type type);
// A dense copy (not of a quantized tensor).
ggml_tensor* cont(ggml_context* ctx, ggml_tensor* a);
ggml_tensor* dup(ggml_context* ctx, ggml_tensor* a);
// a into b: equal element counts; the type pair one `cast` converts.
ggml_tensor* cpy(ggml_context* ctx, ggml_tensor* a, ggml_tensor* b);

// a repeated to ne: each ne[i] a multiple of a->ne[i]; F32, F16, BF16 or I32.
ggml_tensor* repeat_4d(ggml_context* ctx, ggml_tensor* a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);

// a viewed with a new shape: a contiguous; the element count kept.
ggml_tensor* reshape_1d(ggml_context* ctx, ggml_tensor* a, int64_t ne0);
ggml_tensor* reshape_2d(ggml_context* ctx, ggml_tensor* a, int64_t ne0, int64_t ne1);
ggml_tensor* reshape_3d(ggml_context* ctx, ggml_tensor* a, int64_t ne0, int64_t ne1, int64_t ne2);
ggml_tensor* reshape_4d(ggml_context* ctx, ggml_tensor* a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);

// A strided view into a: every ne >= 1; the bytes it reaches (offset + the
// extent of its strides) and ggml's own measure (offset + dense size) lie
// within a's root tensor.
ggml_tensor* view_4d(ggml_context* ctx, ggml_tensor* a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3, size_t nb1,
                     size_t nb2, size_t nb3, size_t offset);

// Axes: a permutation of 0..3.
ggml_tensor* permute(ggml_context* ctx, ggml_tensor* a, int ax0, int ax1, int ax2, int ax3);
ggml_tensor* transpose(ggml_context* ctx, ggml_tensor* a);

// a and b joined along dim: dim in [0, 4); one type (F32, F16, BF16 or I32);
// every other ne equal; both with contiguous rows.
ggml_tensor* concat(ggml_context* ctx, ggml_tensor* a, ggml_tensor* b, int dim);

// Softmax along ne0: a F32 and contiguous; a mask F16 or F32, contiguous,
// mask->ne[0] == a->ne[0], mask->ne[1] >= a->ne[1], a->ne[2] % mask->ne[2] == 0,
// a->ne[3] % mask->ne[3] == 0; max_bias == 0.
ggml_tensor* soft_max(ggml_context* ctx, ggml_tensor* a);
ggml_tensor* soft_max_ext(ggml_context* ctx, ggml_tensor* a, ggml_tensor* mask, float scale, float max_bias);

// Normalization along ne0: a F32 and dense in ne0; eps >= 0 and finite.
ggml_tensor* norm(ggml_context* ctx, ggml_tensor* a, float eps);
ggml_tensor* rms_norm(ggml_context* ctx, ggml_tensor* a, float eps);

// Group normalization over ne0 * ne1 * (ne2 / n_groups) values of each
// group of ne2 and each ne3 (no affine): a F32 and dense along ne0;
// n_groups in [1, ne2] and dividing ne2 (ggml would make the last group
// smaller); eps >= 0 and finite.
ggml_tensor* group_norm(ggml_context* ctx, ggml_tensor* a, int n_groups, float eps);

// Resize to ne0..ne3 (ggml_interpolate): a F32; every ne >= 1; mode
// GGML_SCALE_MODE_BILINEAR / BICUBIC (with or without GGML_SCALE_FLAG_ALIGN_CORNERS)
// or NEAREST (without flags); ne2 and ne3 kept (ggml resizes
// them by nearest neighbour, which no caller means).
ggml_tensor* interpolate(ggml_context* ctx, ggml_tensor* a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3,
                         uint32_t mode);

// Rows of a at indices b: b I32 with b->ne[3] == 1, a->ne[2] == b->ne[1],
// a->ne[3] == b->ne[2]; a of a type get_rows reads (not I32 with quantized).
// Index values are the caller's to keep in range (LowerCtx::safe_indices).
ggml_tensor* get_rows(ggml_context* ctx, ggml_tensor* a, ggml_tensor* b);
// Rows of b written into a at indices c: a, b F32 or F16; c I32 or I64;
// a->ne[0] == b->ne[0], a->ne[2] == b->ne[2], a->ne[3] == b->ne[3],
// b->ne[1] == c->ne[0], b->ne[2] % c->ne[1] == 0, b->ne[3] % c->ne[2] == 0,
// c->ne[3] == 1; a and b with contiguous rows.
ggml_tensor* set_rows(ggml_context* ctx, ggml_tensor* a, ggml_tensor* b, ggml_tensor* c);

// Rotary embedding: a F32 or F16, dense rows of an even length; b an I32 vector of a->ne[2]
// positions; n_dims even, in (0, a->ne[0]]; mode without bit 0; freq_factors
// null or a contiguous F32 vector of at least a->ne[0]/2 (ggml's CPU rope
// reads one per pair of the row, rotated or not); freq_base positive,
// freq_scale and attn_factor finite. YaRN off.
ggml_tensor* rope_ext(ggml_context* ctx, ggml_tensor* a, ggml_tensor* b, ggml_tensor* freq_factors, int n_dims, int mode,
                      float freq_base, float freq_scale, float attn_factor);

// Flash attention: q, k, v F32 with dense rows; k->ne[0] == q->ne[0];
// q->ne[2] % k->ne[2] == 0; k and v have one head count and length;
// q->ne[3] == k->ne[3] == v->ne[3]; a mask F16, contiguous, mask->ne[0] ==
// k->ne[1], mask->ne[1] >= q->ne[1], q->ne[2] % mask->ne[2] == 0,
// q->ne[3] % mask->ne[3] == 0.
ggml_tensor* flash_attn_ext(ggml_context* ctx, ggml_tensor* q, ggml_tensor* k, ggml_tensor* v, ggml_tensor* mask,
                            float scale);

// The causal-mask pieces: arange (stop > start), fill (a F32 or F16,
// contiguous), diag_mask_inf_inplace (a F32).
ggml_tensor* arange(ggml_context* ctx, float start, float stop, float step);
ggml_tensor* fill(ggml_context* ctx, ggml_tensor* a, float value);
ggml_tensor* diag_mask_inf_inplace(ggml_context* ctx, ggml_tensor* a, int n_past);

// Reductions along ne0: a F32.
ggml_tensor* sum_rows(ggml_context* ctx, ggml_tensor* a);
ggml_tensor* mean(ggml_context* ctx, ggml_tensor* a);

// a clamped to [lo, hi], and a * s + b: a F32 with contiguous rows; lo <= hi, s and b finite.
ggml_tensor* clamp(ggml_context* ctx, ggml_tensor* a, float lo, float hi);
ggml_tensor* scale_bias(ggml_context* ctx, ggml_tensor* a, float s, float b);

// Unary ops: a F32 or F16 with contiguous rows.
enum class Unary { Silu, Sigmoid, Tanh, Exp, Log, Sqrt, Sqr, Abs, Neg, Sin, Cos, Relu, Step, GeluErf };
ggml_tensor* unary(ggml_context* ctx, Unary op, ggml_tensor* a);
// Whether `t` is the result of unary(op) (a metadata query).
bool is_unary(const ggml_tensor* t, Unary op);
// silu(a) * b in one op (ggml_swiglu_split): a and b contiguous, F32 or F16, of one type and shape.
ggml_tensor* swiglu(ggml_context* ctx, ggml_tensor* a, ggml_tensor* b);

// The columns of 2-D convolution windows (ggml_im2col, F32 result [C * KH * KW, OW, OH, N]):
// kernel a [KW, KH, C, O] (its shape only) F32 or F16; b F32 [W, H, C, N], contiguous;
// strides and dilations >= 1, paddings >= 0; every window inside the padded input
// (W + 2 p0 >= d0 (KW - 1) + 1, and so for H).
ggml_tensor* im2col(ggml_context* ctx, ggml_tensor* a, ggml_tensor* b, int s0, int s1, int p0, int p1, int d0, int d1);

// 2-D max or average pooling of the planes of a (ne0 = W, ne1 = H), F32 result: a F32 and
// contiguous; kernels and strides >= 1, paddings in [0, kernel) (ggml skips the padding; the
// average divides by k0 * k1); the kernel fits the padded input (ne0 + 2 p0 >= k0, and so for ne1).
ggml_tensor* pool_2d(ggml_context* ctx, ggml_tensor* a, ggml_op_pool op, int k0, int k1, int s0, int s1, int p0, int p1);

// The indices (I32, a's shape) that sort each row of a (ne0) ascending or descending; not stable
// (std::sort on the CPU), and no NaN in a (undefined there): a F32 and contiguous, ne0 <= INT32_MAX.
ggml_tensor* argsort(ggml_context* ctx, ggml_tensor* a, bool descending);

// Our own kernels as custom ops: n_args < GGML_MAX_SRC (in place: one less);
// every ne >= 1. While a graph is built, its kernels run behind its
// KernelGuards (kernel_guard.h): an exception in one is recorded, not fatal.
ggml_tensor* custom_4d(ggml_context* ctx, ggml_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3,
                       ggml_tensor** args, int n_args, ggml_custom_op_t fun, int n_tasks, void* userdata);
ggml_tensor* custom_inplace(ggml_context* ctx, ggml_tensor* a, ggml_tensor** args, int n_args, ggml_custom_op_t fun,
                            int n_tasks, void* userdata);

}  // namespace dg::gg
