#include "planner.h"

#include <algorithm>
#include <unordered_map>

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

MemoryPlan plan_memory(ggml_cgraph* graph, const std::unordered_set<const ggml_tensor*>& external, size_t align) {
    MemoryPlan plan;
    FreeList fl(align);
    const int n_nodes = ggml_graph_n_nodes(graph);
    auto needs_memory = [&](const ggml_tensor* t) {
        return t->view_src == nullptr && t->data == nullptr && external.count(t) == 0;
    };
    std::unordered_map<const ggml_tensor*, int> last_use;
    std::unordered_map<const ggml_tensor*, size_t> offset_of;
    for (int i = 0; i < n_nodes; ++i) {
        ggml_tensor* t = ggml_graph_node(graph, i);
        last_use[view_root(t)] = i;
        for (int s = 0; s < GGML_MAX_SRC; ++s)
            if (t->src[s]) last_use[view_root(t->src[s])] = i;
    }
    for (int i = 0; i < n_nodes; ++i) {
        ggml_tensor* t = ggml_graph_node(graph, i);
        for (int s = 0; s < GGML_MAX_SRC; ++s) {
            ggml_tensor* src = t->src[s];
            if (src && src->op == GGML_OP_NONE && needs_memory(src) && !offset_of.count(src)) {
                size_t off = fl.alloc(ggml_nbytes(src));  // a leaf without data: lives for the whole graph
                offset_of[src] = off;
                plan.placed.emplace_back(src, off);
                last_use[src] = n_nodes;
            }
        }
        if (t->view_src != nullptr) {
            plan.views.push_back(t);
        } else if (needs_memory(t)) {
            size_t off = fl.alloc(ggml_nbytes(t));
            offset_of[t] = off;
            plan.placed.emplace_back(t, off);
        }
        // release what this node was the last to read (after allocating its output: no aliasing)
        for (int s = 0; s <= GGML_MAX_SRC; ++s) {
            ggml_tensor* src = s < GGML_MAX_SRC ? t->src[s] : t;
            if (!src) continue;
            ggml_tensor* r = view_root(src);
            auto it = offset_of.find(r);
            if (it != offset_of.end() && last_use[r] == i) {
                fl.release(it->second, ggml_nbytes(r));
                offset_of.erase(it);
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
