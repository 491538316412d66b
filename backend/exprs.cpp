#include "exprs.h"

#include <algorithm>

#include "errors.h"

namespace dg {

int64_t apply_expr_op(ExprOp op, int64_t a, int64_t b) {
    int64_t r = 0;
    switch (op) {
        case ExprOp::Add:
            if (__builtin_add_overflow(a, b, &r)) fail<ShapeError>("dimension expression overflows: ", a, " + ", b);
            return r;
        case ExprOp::Sub:
            if (__builtin_sub_overflow(a, b, &r)) fail<ShapeError>("dimension expression overflows: ", a, " - ", b);
            return r;
        case ExprOp::Mul:
            if (__builtin_mul_overflow(a, b, &r)) fail<ShapeError>("dimension expression overflows: ", a, " * ", b);
            return r;
        case ExprOp::Min: return std::min(a, b);
        case ExprOp::Max: return std::max(a, b);
        case ExprOp::FloorDiv:
        case ExprOp::Mod: {
            if (b == 0) fail<ShapeError>("division by zero in a dimension expression (", a, op == ExprOp::Mod ? " % 0)" : " // 0)");
            if (a == INT64_MIN && b == -1) fail<ShapeError>("dimension expression overflows: ", a, " // -1");
            int64_t q = a / b, m = a % b;
            if (m != 0 && ((m < 0) != (b < 0))) {
                q -= 1;
                m += b;
            }
            return op == ExprOp::FloorDiv ? q : m;
        }
        case ExprOp::Const:
        case ExprOp::Symbol: break;
    }
    return 0;
}

void evaluate_exprs(const Program& prog, const int64_t* symbols, std::vector<int64_t>& out,
                    const std::vector<char>* known, std::vector<char>* node_known) {
    const size_t n = prog.exprs.size();
    out.resize(n);
    if (node_known) node_known->assign(n, 1);
    for (size_t i = 0; i < n; ++i) {
        const ExprNode& e = prog.exprs[i];
        if (e.op == ExprOp::Const) {
            out[i] = e.a;
        } else if (e.op == ExprOp::Symbol) {
            if (known && !(*known)[size_t(e.a)]) {
                (*node_known)[i] = 0;
                out[i] = 0;
            } else {
                out[i] = symbols[e.a];
            }
        } else if (node_known && (!(*node_known)[size_t(e.a)] || !(*node_known)[size_t(e.b)])) {
            (*node_known)[i] = 0;
            out[i] = 0;
        } else {
            out[i] = apply_expr_op(e.op, out[size_t(e.a)], out[size_t(e.b)]);
        }
    }
}

}  // namespace dg
