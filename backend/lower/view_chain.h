// Chains of reshapes, transposes and slices made in one copy.
//
// A transpose is lowered as a dense copy (every op after it reads dense rows).
// A model that takes a tensor through several of them -- PyTorch's
// multi-head attention: the packed q/k/v projection [S, B, 3, E] transposed to
// [3, S, B, E], sliced, reshaped to [S, B*H, D] and transposed to [B*H, S, D]
// -- then copies it once per transpose, though the last tensor is a strided view
// of the first. composed_copy gives that last tensor as one copy (or none) from
// the chain's start; the copies the chain made on the way are left unread, and
// ggml does not compute what nothing reads.
#pragma once

#include "../lowering.h"

namespace dg {

// For a StaticTranspose or StaticReshape of rank <= 4 (the op `c` lowers): when its input comes through
// a chain of StaticReshape / StaticTranspose / Slice ops (rank <= 4) that holds another transpose, from
// a tensor X the graph already has, on the host CPU path of an unplaced partition: its output, dense,
// copied from X in one pass (a view of X where that is already dense). nullptr where the chain is
// shorter, X is (a view of) state, or the composed view needs more than 4 strided dimensions.
ggml_tensor* composed_copy(const LowerCtx& c);

}  // namespace dg
