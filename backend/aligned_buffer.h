// A growable, 64-byte aligned host buffer.
#pragma once

#include <cstdlib>
#include <cstring>
#include <new>

namespace dg {

class AlignedBuffer {
public:
    AlignedBuffer() = default;
    ~AlignedBuffer() { std::free(p_); }
    AlignedBuffer(const AlignedBuffer&) = delete;
    AlignedBuffer& operator=(const AlignedBuffer&) = delete;
    AlignedBuffer(AlignedBuffer&& o) noexcept : p_(o.p_), size_(o.size_) {
        o.p_ = nullptr;
        o.size_ = 0;
    }
    AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
        if (this != &o) {
            std::free(p_);
            p_ = o.p_;
            size_ = o.size_;
            o.p_ = nullptr;
            o.size_ = 0;
        }
        return *this;
    }

    // Grow to at least n bytes (contents are not kept). Returns true if the base moved.
    bool reserve(size_t n) {
        if (n <= size_) return false;
        void* q = nullptr;
        if (posix_memalign(&q, 64, n) != 0) throw std::bad_alloc();
        std::free(p_);
        p_ = q;
        size_ = n;
        return true;
    }
    void* data() const { return p_; }
    size_t size() const { return size_; }

private:
    void* p_ = nullptr;
    size_t size_ = 0;
};

}  // namespace dg
