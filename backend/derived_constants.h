// Host tensors computed once from a partition's constants and held for its
// life, shared by every graph it builds (one per shape): a kernel's own
// layout of its weights that would otherwise be recomputed on every call
// (Winograd's transformed 3x3 kernels, kernels/winograd.h). Host CPU path of
// an unplaced partition only; the builds that ask are serialized by the
// partition's lock.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "aligned_buffer.h"
#include "ggml-backend.h"
#include "ggml.h"

namespace dg {

class DerivedConstants {
public:
    DerivedConstants() = default;
    ~DerivedConstants() = default;
    DerivedConstants(const DerivedConstants&) = delete;
    DerivedConstants& operator=(const DerivedConstants&) = delete;

    // The F32 tensor (ggml ne `ne`, dense) that `make` fills from constant `source`, computed the first
    // time this (source, kind, params) is asked for; `kind` names the computation and `params` what
    // else its result depends on. Throws ExecutionError when its memory cannot be had.
    ggml_tensor* get(const ggml_tensor* source, int kind, const std::vector<int64_t>& params, const int64_t ne[4],
                     const std::function<void(float* dst)>& make);
    size_t bytes() const { return bytes_; }

private:
    struct Entry {
        AlignedBuffer mem{true};
        ggml_context* ctx = nullptr;
        ggml_backend_buffer_t buf = nullptr;
        ggml_tensor* t = nullptr;
        Entry() = default;
        Entry(const Entry&) = delete;
        Entry& operator=(const Entry&) = delete;
        ~Entry();
    };
    using Key = std::tuple<const ggml_tensor*, int, std::vector<int64_t>>;
    std::map<Key, std::unique_ptr<Entry>> entries_;
    size_t bytes_ = 0;
};

// What DerivedConstants::get's `kind` names.
enum DerivedKind : int { kWinogradWeights = 1 };

}  // namespace dg
