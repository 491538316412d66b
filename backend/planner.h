// Memory planning for one built graph: every intermediate tensor gets an
// offset in the compiled partition's shared compute arena. Tensors whose
// lifetimes do not overlap share memory. Offsets are kept with the graph, so
// reusing a cached graph never plans again; if the arena grows, the offsets
// are simply re-applied to the new base.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "ggml.h"
#include "ptr_map.h"

namespace dg {

struct MemoryPlan {
    std::vector<std::pair<ggml_tensor*, size_t>> placed;  // tensor, offset in the arena
    std::vector<ggml_tensor*> views;                      // views to re-point, in graph order
    size_t size = 0;                                      // arena bytes needed
};

// `external`: tensors whose memory is the caller's (inputs, outputs) and is set per execution.
MemoryPlan plan_memory(ggml_cgraph* graph, const PtrMap<int>& external, size_t align);

// Point every planned tensor into `base` and every view at its source.
void apply_plan(const MemoryPlan& plan, void* base);

// The tensor a view chain ends at, and the byte offset of `t` inside it.
ggml_tensor* view_root(ggml_tensor* t, size_t* offset = nullptr);

}  // namespace dg
