// A barrier between our kernels and ggml's threads. Our kernels run as ggml
// custom ops, called by ggml's C code on its worker threads: an exception
// thrown there (a std::bad_alloc of a kernel's scratch buffer when memory runs
// out) cannot cross that code and would end the process.
//
// While a graph is built, the KernelGuards it owns is current on the building
// thread (GuardScope); every custom op created then (gg::custom_4d,
// gg::custom_inplace) runs its kernel through a trampoline that catches, and
// records the first failure and the op being lowered when the op was created.
// The executor resets the record before each compute and reads it after: a
// failure there is an ExecutionError, never a crash. Custom ops created with
// no scope current (hand-built graphs in the benchmarks) are not wrapped.
#pragma once

#include <atomic>
#include <cstddef>
#include <deque>

#include "ggml.h"

namespace dg {

class KernelGuards {
public:
    // What a custom op is created with: the trampoline and its guard, or `fun`
    // and `userdata` as they are when no scope is current on this thread.
    struct Call {
        ggml_custom_op_t fun;
        void* userdata;
    };
    static Call wrap(ggml_custom_op_t fun, void* userdata);

    // The op (its index in the program) whose lowering creates the custom ops that follow.
    void set_op(int op) { op_ = op; }

    // Read after a compute (ggml's threads have joined).
    bool failed() const { return failed_.load(std::memory_order_acquire); }
    int failed_op() const { return failed_op_; }  // -1 when none
    const char* what() const { return what_; }
    void reset();

private:
    friend class GuardScope;
    struct Guard {
        ggml_custom_op_t fun;
        void* userdata;
        KernelGuards* owner;
        int op;
    };
    static void trampoline(ggml_tensor* dst, int ith, int nth, void* userdata);
    void record(const Guard& g, const char* why) noexcept;

    std::deque<Guard> guards_;  // stable addresses: the graph's nodes point at them
    int op_ = -1;
    std::atomic<bool> claimed_{false};
    std::atomic<bool> failed_{false};
    int failed_op_ = -1;
    char what_[200] = {};
};

// Makes `g` current on this thread for the lifetime of the scope.
class GuardScope {
public:
    explicit GuardScope(KernelGuards* g);
    ~GuardScope();
    GuardScope(const GuardScope&) = delete;
    GuardScope& operator=(const GuardScope&) = delete;

private:
    KernelGuards* prev_;
};

}  // namespace dg
