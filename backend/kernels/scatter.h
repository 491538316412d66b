// ScatterND (ops/scatter.py) as a ggml custom op: a copy of data with the
// update slices written (or combined) at the index tuples, in the tuples'
// order. Threads split the slice width, each applying every update to its
// columns in order: the result is the sequential one, duplicates included.
// An index outside [-d, d) is skipped and reported through its component's
// KernelIndexCheck (the execution is then refused).
#pragma once

#include <cstdint>

#include "ggml.h"

namespace dg {
struct KernelIndexCheck;
}

namespace dg::kernels {

enum class ScatterReduce : uint8_t { None, Add, Mul, Max, Min };

struct ScatterParams {
    int q = 1;                                  // index components per tuple
    int64_t dims[4] = {1, 1, 1, 1};             // the data's first q dimensions
    int64_t stride[4] = {0, 0, 0, 0};           // slices per step of each
    ScatterReduce reduce = ScatterReduce::None;
    KernelIndexCheck* check[4] = {nullptr, nullptr, nullptr, nullptr};
};

// data [S, outer] (F32 or I32, dense), idx I32 [q, T] (dense), upd [S, T] of
// data's type (dense); outer = the product of p->dims. Returns the result [S, outer].
ggml_tensor* scatter_nd(ggml_context* ctx, ggml_tensor* data, ggml_tensor* idx, ggml_tensor* upd, const ScatterParams* p);

}  // namespace dg::kernels
