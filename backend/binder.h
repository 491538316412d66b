// Binding: the symbols' values for one execution, read from the runtime
// inputs' shapes (and shape-tensor values), with every check the compiled
// partition promises: ranks, dtypes, static dimensions, symbol ranges,
// derived dimensions and guards.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "host_tensor.h"
#include "program.h"

namespace dg {

struct Binding {
    std::vector<int64_t> symbols;  // the graph cache key
    std::vector<int64_t> values;   // every expression node
};

class Binder {
public:
    explicit Binder(const Program& prog);

    // Throws ShapeError / DTypeError naming the input, the dimension, what was
    // expected and what was given. `check_dtype` is off for shape-only queries
    // made from logical tensors whose dtype was already checked.
    void bind(const HostTensor* const* inputs, size_t n, Binding& out, bool check_dtype = true) const;

    // Every tensor's evaluated dimensions are positive (checked once per new binding).
    void check_all_dims(const Binding& b) const;

    std::string input_label(size_t i) const;
    std::string symbol_values(const Binding& b) const;  // "seq=7, past=3"

private:
    const Program& prog_;
    bool needs_partial_eval_ = false;  // some source needs expressions of earlier symbols
};

}  // namespace dg
