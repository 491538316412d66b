#include "kernel_guard.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>

namespace dg {

namespace {

thread_local KernelGuards* t_current = nullptr;

// Fault injection for the tests: DYNGRAPH_TEST_KERNEL_FAULT=n makes the n-th
// guarded kernel call of the process (counted across threads, from 1) throw
// std::bad_alloc, as a scratch allocation that finds no memory would.
int64_t injected_fault() {
    static const int64_t n = [] {
        const char* v = std::getenv("DYNGRAPH_TEST_KERNEL_FAULT");
        return v ? std::strtoll(v, nullptr, 10) : 0;
    }();
    return n;
}

std::atomic<int64_t> g_calls{0};

}  // namespace

KernelGuards::Call KernelGuards::wrap(ggml_custom_op_t fun, void* userdata) {
    KernelGuards* g = t_current;
    if (!g) return {fun, userdata};
    g->guards_.push_back(Guard{fun, userdata, g, g->op_});
    return {&KernelGuards::trampoline, &g->guards_.back()};
}

void KernelGuards::reset() {
    claimed_.store(false, std::memory_order_relaxed);
    failed_.store(false, std::memory_order_relaxed);
    failed_op_ = -1;
    what_[0] = '\0';
}

void KernelGuards::record(const Guard& g, const char* why) noexcept {
    if (!claimed_.exchange(true, std::memory_order_acq_rel)) {  // the first failure names the op
        failed_op_ = g.op;
        std::snprintf(what_, sizeof what_, "%s", why);
    }
    failed_.store(true, std::memory_order_release);
}

void KernelGuards::trampoline(ggml_tensor* dst, int ith, int nth, void* userdata) {
    const Guard& g = *static_cast<const Guard*>(userdata);
    try {
        if (const int64_t n = injected_fault(); n > 0 && g_calls.fetch_add(1, std::memory_order_relaxed) + 1 == n)
            throw std::bad_alloc();
        g.fun(dst, ith, nth, g.userdata);
    } catch (const std::bad_alloc&) {
        g.owner->record(g, "out of memory for its scratch buffers (std::bad_alloc)");
    } catch (const std::exception& e) {
        g.owner->record(g, e.what());
    } catch (...) {
        g.owner->record(g, "an unknown exception");
    }
}

GuardScope::GuardScope(KernelGuards* g) : prev_(t_current) { t_current = g; }

GuardScope::~GuardScope() { t_current = prev_; }

}  // namespace dg
