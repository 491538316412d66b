// Whether the one op that reads a product or a convolution is an activation its kernel can apply
// itself (kernels/activation.h): the lowering then passes it to the kernel and absorbs the reader.
#pragma once

#include "../kernels/activation.h"
#include "../lowering.h"

namespace dg {

// The activation of `tensor`'s one reader, when it reads nothing else (LowerCtx::only_reader: GELU in
// its erf form or ReLU, f32 in and out, on the host), with that reader in *reader; Activation::None (and
// *reader null or not an activation) otherwise. The caller absorbs *reader (LowerCtx::absorb) only if
// its kernel applies it.
kernels::Activation fused_activation(const LowerCtx& c, int32_t tensor, const OpDef** reader);

}  // namespace dg
