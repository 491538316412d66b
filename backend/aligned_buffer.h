// A growable, 64-byte aligned host buffer; optionally backed by 2 MiB pages.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace dg {

constexpr size_t kHugePage = size_t(2) << 20;

// Ask the kernel to back the whole 2 MiB pages of [p, p + n) with huge pages
// (Linux transparent huge pages, "madvise" mode), before they are first
// touched. Weights streamed once per call then cost a TLB entry per 2 MiB
// instead of per 4 KiB: a 4-layer stack's 12.6 MB of weights read from DRAM
// ~0.2 ms faster at 7 rows. A hint: without THP it does nothing.
inline void advise_huge_pages(void* p, size_t n) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const uintptr_t b = (reinterpret_cast<uintptr_t>(p) + kHugePage - 1) & ~uintptr_t(kHugePage - 1);
    const uintptr_t e = (reinterpret_cast<uintptr_t>(p) + n) & ~uintptr_t(kHugePage - 1);
    if (e > b) madvise(reinterpret_cast<void*>(b), e - b, MADV_HUGEPAGE);
#else
    (void)p;
    (void)n;
#endif
}

// Physical memory of this machine (0 when unknown). An allocation above it
// would succeed under overcommit and kill the process when it is touched.
inline uint64_t physical_memory() {
#if defined(__linux__)
    static const uint64_t ram = uint64_t(sysconf(_SC_PHYS_PAGES)) * uint64_t(sysconf(_SC_PAGESIZE));
    return ram;
#else
    return 0;
#endif
}

class AlignedBuffer {
public:
    AlignedBuffer() = default;
    // huge_pages: buffers of 2 MiB and more are 2 MiB aligned, a whole number
    // of 2 MiB pages, and advised to be backed by huge pages
    explicit AlignedBuffer(bool huge_pages) : huge_(huge_pages) {}
    ~AlignedBuffer() { release(); }
    AlignedBuffer(const AlignedBuffer&) = delete;
    AlignedBuffer& operator=(const AlignedBuffer&) = delete;
    AlignedBuffer(AlignedBuffer&& o) noexcept : p_(o.p_), size_(o.size_), huge_(o.huge_), mapped_(o.mapped_) {
        o.p_ = nullptr;
        o.size_ = o.mapped_ = 0;
    }
    AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
        if (this != &o) {
            release();
            p_ = o.p_;
            size_ = o.size_;
            huge_ = o.huge_;
            mapped_ = o.mapped_;
            o.p_ = nullptr;
            o.size_ = o.mapped_ = 0;
        }
        return *this;
    }

    // Exactly n bytes (n > 0) of zeros, replacing the contents. On Linux fresh anonymous pages,
    // which the kernel zeroes on first touch: memory is committed as it is written, so a state
    // sized for a long context (a KV cache) costs what is used of it, and no time to clear.
    // Elsewhere an allocation cleared now. Throws std::bad_alloc as reserve does.
    void reserve_zeroed(size_t n) {
#if defined(__linux__)
        if (n == 0 || n > (SIZE_MAX >> 2)) throw std::bad_alloc();
        const size_t page = size_t(sysconf(_SC_PAGESIZE));
        const size_t align = huge_ && n >= kHugePage ? kHugePage : page;
        const size_t len = (n + align - 1) / align * align, over = align > page ? align : 0;
        void* base = mmap(nullptr, len + over, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (base == MAP_FAILED) throw std::bad_alloc();
        const uintptr_t b = reinterpret_cast<uintptr_t>(base), q = (b + align - 1) & ~uintptr_t(align - 1);
        if (q > b) munmap(base, q - b);  // (the unaligned head and tail of a huge-page-aligned range)
        if (b + len + over > q + len) munmap(reinterpret_cast<void*>(q + len), b + len + over - (q + len));
        release();
        p_ = reinterpret_cast<void*>(q);
        size_ = mapped_ = len;
        if (align == kHugePage) advise_huge_pages(p_, len);
#else
        reserve(n);
        std::memset(p_, 0, n);
#endif
    }

    // Grow to at least n bytes (contents are not kept). Returns true if the base moved.
    // Throws std::bad_alloc when n is not allocatable (sizes near SIZE_MAX included).
    bool reserve(size_t n) {
        if (n <= size_) return false;
        if (n > (SIZE_MAX >> 2)) throw std::bad_alloc();  // also keeps the rounding below from wrapping
        const bool huge = huge_ && n >= kHugePage;
        if (huge) n = (n + kHugePage - 1) / kHugePage * kHugePage;
        void* q = nullptr;
        if (posix_memalign(&q, huge ? kHugePage : 64, n) != 0) throw std::bad_alloc();
        if (huge) advise_huge_pages(q, n);
        release();
        p_ = q;
        size_ = n;
        return true;
    }
    void* data() const { return p_; }
    size_t size() const { return size_; }

private:
    void release() {
#if defined(__linux__)
        if (mapped_) {
            munmap(p_, mapped_);
            p_ = nullptr;
            size_ = mapped_ = 0;
            return;
        }
#endif
        std::free(p_);
        p_ = nullptr;
        size_ = 0;
    }

    void* p_ = nullptr;
    size_t size_ = 0;
    bool huge_ = false;
    size_t mapped_ = 0;  // reserve_zeroed's mapping (munmap, not free)
};

}  // namespace dg
