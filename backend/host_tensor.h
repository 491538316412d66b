// A host buffer handed to execute() / infer_outputs(): its logical id, dtype,
// shape and (for execute) its data. Contiguous, row-major.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "dtype.h"
#include "program.h"

namespace dg {

struct HostTensor {
    int64_t id = -1;
    DType dtype = DType::F32;
    int ndim = 0;
    int64_t shape[kMaxRank] = {1, 1, 1, 1, 1, 1};
    void* data = nullptr;  // null for a shape-only query
    size_t nbytes = 0;
    bool writable = false;
    const void* engine = nullptr;  // the engine the tensor was made for (execute requires the partition's)

    // (fill_host checks every dimension and the product against limits, so this cannot overflow)
    int64_t numel() const {
        int64_t n = 1;
        for (int i = 0; i < ndim; ++i) n *= shape[i];
        return n;
    }
};

// Fill `h` (id, dtype, shape) from a caller's description, checked: a known dtype code (DTypeError), rank
// <= kMaxRank, every dimension in [0, limits::kMaxDim] and the byte size <= limits::kMaxTensorBytes (ShapeError).
void fill_host(HostTensor& h, int64_t id, int dtype, const int64_t* shape, size_t ndim);

// "[2, 3]"
std::string shape_str(const int64_t* shape, size_t ndim);

}  // namespace dg
