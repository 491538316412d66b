#include "fused_activation.h"

#include "../generated/dyngraph_ir_generated.h"

namespace dg {

kernels::Activation fused_activation(const LowerCtx& c, int32_t tensor, const OpDef** reader) {
    size_t at = 0;
    *reader = c.host() && c.shape_of(tensor).rank <= kGgmlRank && c.prog.tensors[size_t(tensor)].dtype == DType::F32
                  ? c.only_reader(tensor, &at)
                  : nullptr;
    const OpDef* r = *reader;
    if (!r || at != 0 || r->inputs.size() != 1 || r->outputs.size() != 1 || c.prog.tensors[size_t(r->outputs[0])].dtype != DType::F32)
        return kernels::Activation::None;
    using K = dyngraph::fb::OpKind;
    if (r->kind == uint16_t(K::ReLU)) return kernels::Activation::Relu;
    const auto* gelu = std::get_if<ops::GELUAttrs>(&r->attrs);
    if (r->kind == uint16_t(K::GELU) && gelu && gelu->mode == ops::GELUAttrs::Mode::erf)
        return kernels::Activation::GeluErf;
    return kernels::Activation::None;
}

}  // namespace dg
