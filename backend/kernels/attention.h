// Scaled dot-product attention of f32 tensors on the host CPU, as a ggml
// custom op: flash attention in blocks whose products are OpenBLAS's sgemm
// (or, for fewer than 8 query rows, small_gemm.h and a register-tiled loop).
// For each (batch, head, block of query rows), key blocks of up to 512 keys:
// scores S = Q K^T by sgemm, scaled, the mask added and the causal cut made
// row by row, an online softmax (running max and sum, the output rows
// rescaled when the max grows), O += P V; at the end O /= sum. A causal
// block stops at its last row's key, so causal prefill does half the work.
// Decoding (one query row), the query heads that share a kv head are one
// task's rows, so the kv head is read once. ggml's CPU flash attention
// computes every score as a separate dot product and takes its mask in f16;
// this is exact for any f32 mask and 1.2-3.6x faster (numbers in
// docs/design/kernels.md, "Attention").
#pragma once

#include "ggml.h"

namespace dg::kernels {

struct AttentionParams {
    float scale = 1.0f;
    bool causal = false;  // key j is masked out of query row i when j > i (rows and keys both counted from 0)
    // the result written as [Dv, Hq, Sq, B] (a transpose of the heads and the rows: the layout a model
    // merges its heads from), returned as a permuted view of it with the usual [Dv, Sq, Hq, B] shape
    bool heads_inner = false;
    // the result written as [Dv, Hq, B, Sq] (rows outermost: the order of a sequence-first model,
    // PyTorch's nn.MultiheadAttention), returned as a permuted view of it; with heads_inner unset
    bool rows_outer = false;
};

// Whether f32_attention reads `t` where it lies: f32, elements contiguous in each row, strides whole floats.
bool attention_rows_ok(const ggml_tensor* t);
// The same for a mask, which may also be a bool mask held as I32 (0: masked out).
bool attention_mask_ok(const ggml_tensor* t);

// softmax(q k^T * scale + mask [+ the causal cut]) v, with
// q [D, Sq, Hq, B], k [D, Skv, Hkv, B], v [Dv, Skv, Hkv, B] (Hq a multiple of
// Hkv: query head h reads kv head h / (Hq / Hkv)), mask nullptr, an additive
// f32 mask or a bool one as I32 (0: the key is masked out), of [Skv, Sq or 1,
// Hm, Bm] (head h reads h % Hm, batch b reads b % Bm), q, k and v passing
// attention_rows_ok, the mask attention_mask_ok. Returns [Dv, Sq, Hq, B], contiguous
// (with params->heads_inner: a permuted view of a contiguous [Dv, Hq, Sq, B]; with rows_outer, of a
// contiguous [Dv, Hq, B, Sq]).
// A query row whose keys are all masked out (-inf) is 0, as in ggml's flash
// attention and PyTorch. The caller checks the shapes fit together.
ggml_tensor* f32_attention(ggml_context* ctx, ggml_tensor* q, ggml_tensor* k, ggml_tensor* v, ggml_tensor* mask,
                           const AttentionParams* params);

}  // namespace dg::kernels
