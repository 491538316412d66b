// Evaluation of the IR's expression DAG for one binding of the symbols.
#pragma once

#include <cstdint>
#include <vector>

#include "program.h"

namespace dg {

// a (op) b with floor semantics for // and %, checked for overflow and
// division by zero (ShapeError).
int64_t apply_expr_op(ExprOp op, int64_t a, int64_t b);

// Evaluate every node in order. `known` (optional) marks the symbols that have
// values: nodes depending on an unknown symbol are marked unknown in `node_known`.
void evaluate_exprs(const Program& prog, const int64_t* symbols, std::vector<int64_t>& out,
                    const std::vector<char>* known = nullptr, std::vector<char>* node_known = nullptr);

}  // namespace dg
