// A small open-addressing hash map keyed by pointers, for the graph builder's
// per-build bookkeeping (std::unordered_map allocates a node per entry, which
// dominated the cost of a rebuild).
#pragma once

#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <vector>

namespace dg {

template <class V>
class PtrMap {
public:
    explicit PtrMap(size_t expected = 16) { rehash(expected * 2 + 8); }

    V* find(const void* key) {
        size_t i = slot(key);
        return keys_[i] == key ? &vals_[i] : nullptr;
    }
    const V* find(const void* key) const { return const_cast<PtrMap*>(this)->find(key); }
    bool contains(const void* key) const { return find(key) != nullptr; }

    V& operator[](const void* key) {
        size_t i = slot(key);
        if (keys_[i] != key) {
            if ((size_ + 1) * 2 > keys_.size()) {
                rehash(keys_.size() * 2);
                i = slot(key);
            }
            keys_[i] = key;
            vals_[i] = V{};
            ++size_;
        }
        return vals_[i];
    }

    size_t size() const { return size_; }
    // Empty, keeping the table (no allocation when it is refilled with as many entries).
    void clear() {
        std::fill(keys_.begin(), keys_.end(), nullptr);
        size_ = 0;
    }

private:
    size_t slot(const void* key) const {
        uintptr_t h = reinterpret_cast<uintptr_t>(key);
        h ^= h >> 17;
        h *= 0x9E3779B97F4A7C15ull;
        size_t i = size_t(h >> 20) & mask_;
        while (keys_[i] != nullptr && keys_[i] != key) i = (i + 1) & mask_;
        return i;
    }

    void rehash(size_t want) {
        size_t n = 16;
        while (n < want) n *= 2;
        std::vector<const void*> old_keys(n, nullptr);
        std::vector<V> old_vals(n);
        old_keys.swap(keys_);
        old_vals.swap(vals_);
        mask_ = n - 1;
        size_ = 0;
        for (size_t i = 0; i < old_keys.size(); ++i)
            if (old_keys[i]) (*this)[old_keys[i]] = old_vals[i];
    }

    std::vector<const void*> keys_;
    std::vector<V> vals_;
    size_t mask_ = 0;
    size_t size_ = 0;
};

}  // namespace dg
