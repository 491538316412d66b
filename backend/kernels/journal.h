// Undoable writes into state, for graphs whose indices are computed inside
// the graph (checked by a kernel during the compute, so a bad one is found
// only after earlier ops may have written the state). Each journaled write
// saves the bytes it is about to overwrite; when the execution is refused,
// the journal is rolled back, newest entry first, and the state is as it
// was before the call (the README's "a refused execution writes nothing").
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ggml.h"

namespace dg::kernels {

class Journal {
public:
    // Save n bytes at p before they are overwritten (called from one compute thread).
    void save(void* p, size_t n);
    // Put every saved range back, newest first, then forget them.
    void roll_back();
    // Forget the saved ranges (the execution succeeded).
    void clear() {
        ranges_.clear();
        bytes_.clear();
    }
    bool empty() const { return ranges_.empty(); }

private:
    struct Range {
        void* dst;
        size_t offset, size;
    };
    std::vector<Range> ranges_;
    std::vector<uint8_t> bytes_;
};

// dst[..., idx[i], :] = src[..., i, :] (ggml_set_rows semantics for 1-D idx),
// each overwritten row saved in `journal` first. dst: F32, F16 or BF16 with
// contiguous rows; src: F32 rows of dst's width; idx: I32 in range (clamped).
// Returns dst (an in-place op).
ggml_tensor* journaled_set_rows(ggml_context* ctx, ggml_tensor* dst, ggml_tensor* src, ggml_tensor* idx, Journal* journal);

// view = src (same type and shape; src contiguous), view's bytes saved in
// `journal` first. Returns view (an in-place op).
ggml_tensor* journaled_copy(ggml_context* ctx, ggml_tensor* src, ggml_tensor* view, Journal* journal);

}  // namespace dg::kernels
