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
    // One slot per view root the arena may hold: a tensor without data (weights and state have theirs)
    // and not in the caller's buffers; `last_use` is the last node reading it (n_nodes: a leaf, held
    // for the whole graph). Weights, the most common source, never reach the map.
    struct Slot {
        int last_use = -1;
        size_t offset = 0;
        size_t bytes = 0;
        bool live = false;
        bool arena = false;  // not external
        bool known = false;
    };
    PtrMap<Slot> slots(size_t(n_nodes) * 2);
    auto note = [&](ggml_tensor* root, int i) {
        Slot& sl = slots[root];
        if (!sl.known) {
            sl.known = true;
            sl.arena = !external.contains(root);
        }
        sl.last_use = i;
    };
    for (int i = 0; i < n_nodes; ++i) {
        ggml_tensor* t = ggml_graph_node(graph, i);
        if (ggml_tensor* r = view_root(t); r->data == nullptr) note(r, i);
        for (ggml_tensor* src : t->src)
            if (src)
                if (ggml_tensor* r = view_root(src); r->data == nullptr) note(r, i);
    }
    // (no insertion from here on: the slots' addresses are stable)
    plan.placed.reserve(size_t(n_nodes));
    Slot* read[GGML_MAX_SRC + 1];
    for (int i = 0; i < n_nodes; ++i) {
        ggml_tensor* t = ggml_graph_node(graph, i);
        int n_read = 0;
        for (ggml_tensor* src : t->src) {
            if (!src) continue;
            ggml_tensor* r = view_root(src);
            if (r->data != nullptr) continue;
            Slot* sl = slots.find(r);
            read[n_read++] = sl;
            if (r == src && src->op == GGML_OP_NONE && sl->arena && !sl->live && sl->last_use != n_nodes) {
                sl->bytes = ggml_nbytes(src);
                sl->offset = fl.alloc(sl->bytes);  // a leaf without data: lives for the whole graph
                sl->live = true;
                sl->last_use = n_nodes;
                plan.placed.emplace_back(src, sl->offset);
            }
        }
        ggml_tensor* r = view_root(t);
        Slot* own = r->data == nullptr ? slots.find(r) : nullptr;
        if (t->view_src != nullptr) {
            plan.views.push_back(t);
        } else if (own && own->arena) {
            own->bytes = ggml_nbytes(t);
            own->offset = fl.alloc(own->bytes);
            own->live = true;
            plan.placed.emplace_back(t, own->offset);
        }
        if (own) read[n_read++] = own;
        // release what this node was the last to read (after allocating its output: no aliasing)
        for (int k = 0; k < n_read; ++k)
            if (read[k]->live && read[k]->last_use == i) {
                fl.release(read[k]->offset, read[k]->bytes);
                read[k]->live = false;
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
