#include "host_tensor.h"

#include "errors.h"
#include "ir_limits.h"

namespace dg {

std::string shape_str(const int64_t* s, size_t n) {
    std::string r = "[";
    for (size_t i = 0; i < n; ++i) r += cat(i ? ", " : "", s[i]);
    return r + "]";
}

void fill_host(HostTensor& h, int64_t id, int dtype, const int64_t* shape, size_t ndim) {
    if (dtype < 0 || dtype >= kNumDTypes) fail<DTypeError>("unknown dtype code ", dtype);
    if (ndim > size_t(kMaxRank))
        fail<ShapeError>("tensor ", id, ": rank ", ndim, " is above the supported maximum of ", kMaxRank);
    h.id = id;
    h.dtype = DType(dtype);
    h.ndim = int(ndim);
    uint64_t bytes = dtype_size(h.dtype);
    for (size_t i = 0; i < ndim; ++i) {
        // (0 is the length of an empty transpose order; every other tensor is checked against its compiled shape)
        if (shape[i] < 0 || shape[i] > limits::kMaxDim)
            fail<ShapeError>("tensor ", id, ": dimension ", i, " is ", shape[i], "; dimensions must lie in [0, ", limits::kMaxDim,
                             "]");
        if (__builtin_mul_overflow(bytes, uint64_t(shape[i]), &bytes) || bytes > limits::kMaxTensorBytes)
            fail<ShapeError>("tensor ", id, ": shape ", shape_str(shape, ndim), " is above the limit of ", limits::kMaxTensorBytes,
                             " bytes");
        h.shape[i] = shape[i];
    }
}

}  // namespace dg
