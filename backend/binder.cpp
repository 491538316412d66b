#include "binder.h"

#include "errors.h"
#include "exprs.h"

namespace dg {

Binder::Binder(const Program& prog) : prog_(prog) {
    for (const auto& s : prog.sources)
        if (s.offset >= 0) any_offset_ = true;
}

std::string Binder::input_label(size_t i) const {
    return cat("input ", i, " ", prog_.tensors[size_t(prog_.inputs[i])].label());
}

std::string Binder::symbol_values(const Binding& b) const {
    std::string s;
    for (size_t i = 0; i < prog_.symbols.size(); ++i) {
        if (i) s += ", ";
        s += cat(prog_.symbols[i].name, "=", b.symbols[i]);
    }
    return s;
}

static int64_t read_element(const HostTensor& t, int64_t index, const std::string& where) {
    if (t.data == nullptr) fail<ShapeError>(where, " is a shape tensor: its values are needed, pass a Tensor with data");
    if (index >= t.numel()) fail<ShapeError>(where, ": element ", index, " is needed but it has ", t.numel(), " elements");
    if (t.dtype == DType::I32) return static_cast<const int32_t*>(t.data)[index];
    if (t.dtype == DType::I64) return static_cast<const int64_t*>(t.data)[index];
    fail<DTypeError>(where, ": shape tensors are i32 or i64, got ", dtype_name(t.dtype));
}

void Binder::bind(const HostTensor* const* inputs, size_t n, Binding& b, bool check_dtype) const {
    const size_t want = prog_.inputs.size();
    if (n != want) fail<ShapeError>("expected ", want, " runtime inputs, got ", n);
    for (size_t i = 0; i < n; ++i) {
        const TensorDef& t = prog_.tensors[size_t(prog_.inputs[i])];
        const HostTensor& h = *inputs[i];
        if (h.id != t.id) fail<ShapeError>("input ", i, " should be tensor ", t.label(), ", got tensor id ", h.id);
        if (check_dtype && h.dtype != t.dtype)
            fail<DTypeError>(input_label(i), ": expected dtype ", dtype_name(t.dtype), ", got ", dtype_name(h.dtype));
        if (size_t(h.ndim) != t.shape.size())
            fail<ShapeError>(input_label(i), ": expected rank ", t.shape.size(), ", got rank ", h.ndim);
    }
    b.symbols.assign(prog_.symbols.size(), 0);
    std::vector<char> known;
    std::vector<char> node_known;
    if (any_offset_) known.assign(prog_.symbols.size(), 0);
    for (const SourceDef& s : prog_.sources) {
        const HostTensor& h = *inputs[s.input];
        std::string where = input_label(size_t(s.input));
        int64_t v = s.kind == SourceKind::Dim ? h.shape[s.index] : read_element(h, s.index, where);
        int64_t off = 0;
        if (s.offset >= 0) {
            evaluate_exprs(prog_, b.symbols.data(), b.values, &known, &node_known);
            off = b.values[size_t(s.offset)];
        }
        const SymbolDef& sym = prog_.symbols[size_t(s.symbol)];
        std::string what = s.kind == SourceKind::Dim ? cat(where, " dimension ", s.index) : cat(where, " element ", s.index);
        int64_t num = v - off;
        if (num % s.coeff != 0)
            fail<ShapeError>(what, " is ", v, ", which is not ", s.coeff, "*", sym.name,
                             off ? cat(" + ", off) : std::string(), " for any integer ", sym.name);
        int64_t val = num / s.coeff;
        if (val < sym.min || val > sym.max)
            fail<ShapeError>(what, " is ", v, ": that makes ", sym.name, " = ", val, ", outside its range [", sym.min,
                             ", ", sym.max, "]");
        b.symbols[size_t(s.symbol)] = val;
        if (any_offset_) known[size_t(s.symbol)] = 1;
    }
    evaluate_exprs(prog_, b.symbols.data(), b.values);
    for (size_t i = 0; i < n; ++i) {
        const TensorDef& t = prog_.tensors[size_t(prog_.inputs[i])];
        const HostTensor& h = *inputs[i];
        for (size_t d = 0; d < t.shape.size(); ++d) {
            int64_t want_d = b.values[size_t(t.shape[d])];
            if (h.shape[d] == want_d) continue;
            const ExprNode& e = prog_.exprs[size_t(t.shape[d])];
            if (e.op == ExprOp::Const)
                fail<ShapeError>(input_label(i), ": dimension ", d, " is static, expected ", want_d, ", got ", h.shape[d]);
            fail<ShapeError>(input_label(i), ": dimension ", d, " is ", prog_.expr_string(t.shape[d]), " = ", want_d,
                             " (", symbol_values(b), "), got ", h.shape[d]);
        }
    }
    for (const GuardDef& g : prog_.guards) {
        int64_t l = b.values[size_t(g.lhs)], r = b.values[size_t(g.rhs)];
        if (l != r)
            fail<ShapeError>(g.message, ": ", prog_.expr_string(g.lhs), " = ", l, " but ", prog_.expr_string(g.rhs),
                             " = ", r, " (", symbol_values(b), ")");
    }
}

void Binder::check_all_dims(const Binding& b) const {
    for (const TensorDef& t : prog_.tensors)
        for (size_t d = 0; d < t.shape.size(); ++d) {
            int64_t v = b.values[size_t(t.shape[d])];
            if (v < 1)
                fail<ShapeError>("tensor ", t.label(), " dimension ", d, " is ", prog_.expr_string(t.shape[d]), " = ", v,
                                 " (", symbol_values(b), "); dimensions must be positive");
        }
}

}  // namespace dg
