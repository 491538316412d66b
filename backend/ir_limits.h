// Bounds on what an IR (a file from anyone) may ask for. Each is far above
// what real programs use (SmolLM2-135M: ~100 expression nodes, depth < 10)
// and low enough that reading, checking and binding a program stays linear
// in its size and every size computation fits in 64 bits.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dg::limits {

constexpr size_t kMaxExprNodes = size_t(1) << 16;  // expression DAG nodes
constexpr int kMaxExprDepth = 256;                  // longest operand chain
constexpr int kMaxExprNesting = 32;                 // nested //, %, min, max (atoms of Python's expressions)
constexpr size_t kMaxSymbols = 1024;
constexpr size_t kMaxTensors = size_t(1) << 20;
constexpr size_t kMaxOps = size_t(1) << 20;
constexpr size_t kMaxOpInputs = size_t(1) << 22;    // all ops' inputs together (the Python reader's checks are per input)
constexpr size_t kMaxNameBytes = 4096;              // tensor, op, symbol names and messages
constexpr int64_t kMaxDim = int64_t(1) << 40;       // any dimension, static or evaluated
constexpr uint64_t kMaxTensorBytes = uint64_t(1) << 40;  // any one tensor (1 TiB)

}  // namespace dg::limits
