// This thread's share of a kernel's work: the one split that every kernel of
// ours running in ggml's worker threads (custom ops: thread ith of nth) uses
// for its independent tasks (rows, planes, columns, tiles).
#pragma once

#include <cstdint>
#include <tuple>  // callers take the share with std::tie or a structured binding
#include <utility>

namespace dg::kernels {

// [begin, end) of n tasks for thread ith of nth (0 <= ith < nth): consecutive
// shares that cover 0..n once, their sizes differing by one at most (a thread
// may get none when n < nth). n * nth stays far from overflow: n counts
// elements or fewer (at most 2^40, backend/ir_limits.h) and nth ggml's threads.
inline std::pair<int64_t, int64_t> thread_share(int64_t n, int ith, int nth) {
    return {n * ith / nth, n * (ith + 1) / nth};
}

}  // namespace dg::kernels
