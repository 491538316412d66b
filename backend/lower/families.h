// One registration function per op family (lower/<family>.cpp).
#pragma once

#include "../lowering.h"

namespace dg {

void register_elementwise(LoweringTable& t);
void register_matmul(LoweringTable& t);
void register_norm(LoweringTable& t);
void register_reduce(LoweringTable& t);
void register_layout(LoweringTable& t);
void register_indexing(LoweringTable& t);
void register_dynamic_shape(LoweringTable& t);
void register_generate(LoweringTable& t);
void register_compare(LoweringTable& t);
void register_attention(LoweringTable& t);
void register_rope(LoweringTable& t);
// vision / audio: convolution, pooling, channel norms, interpolation
void register_conv(LoweringTable& t);
void register_pool(LoweringTable& t);
void register_channel_norm(LoweringTable& t);
void register_interpolate(LoweringTable& t);
// quantization and mixture of experts (opsquant)
void register_quantize(LoweringTable& t);
void register_sort(LoweringTable& t);
void register_scatter(LoweringTable& t);
void register_moe(LoweringTable& t);

}  // namespace dg
