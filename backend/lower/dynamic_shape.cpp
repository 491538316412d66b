// DynamicReshape and DynamicTranspose: their shape / order values were read on
// the host when the symbols were bound, so here they are plain numbers.
#include "../errors.h"
#include "../generated/dyngraph_ir_generated.h"
#include "families.h"

namespace dg {

using K = dyngraph::fb::OpKind;

namespace {

void lower_dynamic_reshape(LowerCtx& c) { c.out = {c.reshape(c.in[0], c.out_shape(0))}; }

void lower_dynamic_transpose(LowerCtx& c) {
    Dims s = c.in_shape(0);
    const auto& axes = c.attrs<ops::DynamicTransposeAttrs>().perm;  // one per axis (checked at parse)
    int perm[kMaxRank] = {0, 1, 2, 3, 4, 5};
    bool seen[kMaxRank] = {false, false, false, false, false, false};
    for (int i = 0; i < s.rank; ++i) {
        int64_t a = c.eval(axes[size_t(i)]);
        if (a < 0 || a >= s.rank || seen[a]) fail<ShapeError>("op '", c.op.name, "': the order is not a permutation");
        seen[a] = true;
        perm[i] = int(a);
    }
    c.out = {c.transposed(c.in[0], s, perm)};
}

}  // namespace

void register_dynamic_shape(LoweringTable& t) {
    t.add(uint16_t(K::DynamicReshape), lower_dynamic_reshape);
    t.add(uint16_t(K::DynamicTranspose), lower_dynamic_transpose);
}

}  // namespace dg
