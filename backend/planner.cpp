#include "planner.h"

#include <algorithm>

namespace dg {

ggml_tensor* view_root(ggml_tensor* t, size_t* offset) {
    size_t off = 0;
    while (t->view_src != nullptr) {
        off += t->view_offs;
        t = t->view_src;
    }
    if (offset) *offset = off;
    return t;
}

namespace {

// Best-fit allocator over [0, inf) with coalescing of freed blocks.
class FreeList {
public:
    explicit FreeList(size_t align) : align_(align) {}

    size_t alloc(size_t size) {
        size = (size + align_ - 1) / align_ * align_;
        size_t best = blocks_.size();
        for (size_t i = 0; i < blocks_.size(); ++i)
            if (blocks_[i].second >= size && (best == blocks_.size() || blocks_[i].second < blocks_[best].second)) best = i;
        if (best < blocks_.size()) {
            size_t off = blocks_[best].first;
            blocks_[best].first += size;
            blocks_[best].second -= size;
            if (blocks_[best].second == 0) blocks_.erase(blocks_.begin() + long(best));
            return off;
        }
        // grow at the top, reusing a free block that ends there
        size_t off = top_;
        if (!blocks_.empty() && blocks_.back().first + blocks_.back().second == top_) {
            off = blocks_.back().first;
            blocks_.pop_back();
        }
        top_ = off + size;
        return off;
    }

    void release(size_t off, size_t size) {
        size = (size + align_ - 1) / align_ * align_;
        auto it = std::lower_bound(blocks_.begin(), blocks_.end(), std::make_pair(off, size_t(0)));
        it = blocks_.insert(it, {off, size});
        size_t i = size_t(it - blocks_.begin());
        if (i + 1 < blocks_.size() && blocks_[i].first + blocks_[i].second == blocks_[i + 1].first) {
            blocks_[i].second += blocks_[i + 1].second;
            blocks_.erase(blocks_.begin() + long(i) + 1);
        }
        if (i > 0 && blocks_[i - 1].first + blocks_[i - 1].second == blocks_[i].first) {
            blocks_[i - 1].second += blocks_[i].second;
            blocks_.erase(blocks_.begin() + long(i));
        }
    }

    size_t top() const { return top_; }

private:
    size_t align_;
    size_t top_ = 0;
    std::vector<std::pair<size_t, size_t>> blocks_;  // (offset, size), sorted by offset
};

}  // namespace

MemoryPlan plan_memory(ggml_cgraph* graph, const PtrMap<int>& external, size_t align) {
    MemoryPlan plan;
    FreeList fl(align);
    const int n_nodes = ggml_graph_n_nodes(graph);
    auto needs_memory = [&](const ggml_tensor* t) {
        return t->view_src == nullptr && t->data == nullptr && !external.contains(t);
    };
    struct Slot {
        int last_use = -1;
        size_t offset = 0;
        bool live = false;
    };
    PtrMap<Slot> slots(size_t(n_nodes) * 2);
    for (int i = 0; i < n_nodes; ++i) {
        ggml_tensor* t = ggml_graph_node(graph, i);
        slots[view_root(t)].last_use = i;
        for (int s = 0; s < GGML_MAX_SRC; ++s)
            if (t->src[s]) slots[view_root(t->src[s])].last_use = i;
    }
    plan.placed.reserve(size_t(n_nodes));
    for (int i = 0; i < n_nodes; ++i) {
        ggml_tensor* t = ggml_graph_node(graph, i);
        for (int s = 0; s < GGML_MAX_SRC; ++s) {
            ggml_tensor* src = t->src[s];
            if (src && src->op == GGML_OP_NONE && needs_memory(src)) {
                Slot& sl = slots[src];
                if (!sl.live && sl.last_use != n_nodes) {
                    sl.offset = fl.alloc(ggml_nbytes(src));  // a leaf without data: lives for the whole graph
                    sl.live = true;
                    sl.last_use = n_nodes;
                    plan.placed.emplace_back(src, sl.offset);
                }
            }
        }
        if (t->view_src != nullptr) {
            plan.views.push_back(t);
        } else if (needs_memory(t)) {
            Slot& sl = slots[t];
            sl.offset = fl.alloc(ggml_nbytes(t));
            sl.live = true;
            plan.placed.emplace_back(t, sl.offset);
        }
        // release what this node was the last to read (after allocating its output: no aliasing)
        for (int s = 0; s <= GGML_MAX_SRC; ++s) {
            ggml_tensor* src = s < GGML_MAX_SRC ? t->src[s] : t;
            if (!src) continue;
            ggml_tensor* r = view_root(src);
            Slot* sl = slots.find(r);
            if (sl && sl->live && sl->last_use == i) {
                fl.release(sl->offset, ggml_nbytes(r));
                sl->live = false;
            }
        }
    }
    plan.size = fl.top();
    return plan;
}

void apply_plan(const MemoryPlan& plan, void* base) {
    for (const auto& [t, off] : plan.placed) t->data = static_cast<char*>(base) + off;
    for (ggml_tensor* v : plan.views)
        if (v->view_src->data != nullptr) v->data = static_cast<char*>(v->view_src->data) + v->view_offs;
}

}  // namespace dg
