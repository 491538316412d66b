// Scaled dot-product attention of f32 tensors on the host CPU, as a ggml
// custom op: flash attention with an online softmax (running max and sum, the
// output rescaled when the max grows), by tasks of (batch, head, 64 query
// rows). A task of 8 rows or more runs 16 rows at a time in vector lanes
// (attention_lanes.h: no packing, every step per lane); decoding (1-7 rows)
// runs key blocks of 512 through the small products (small_gemm.h) and a
// register-tiled loop, the query heads that share a kv head as one task's
// rows, so the kv head is read once; over more than 512 keys, a task per key
// block, the blocks joined by a second node. A causal group stops at its last row's
// key, so causal prefill does half the work. ggml's CPU flash attention
// computes every score as a separate dot product and takes its mask in f16;
// this is exact for any f32 mask and faster (numbers in
// docs/design/kernels.md, "Attention", and docs/performance.md).
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
// attention and PyTorch. Keys after the last one that some row of a task
// sees (masked out by the mask or the causal cut for every row) are not read,
// as ggml's flash attention skips masked keys: a static KV cache's empty
// slots cost nothing (a NaN there is not seen). The caller checks the shapes fit together.
ggml_tensor* f32_attention(ggml_context* ctx, ggml_tensor* q, ggml_tensor* k, ggml_tensor* v, ggml_tensor* mask,
                           const AttentionParams* params);

}  // namespace dg::kernels
