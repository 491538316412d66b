#include "binder.h"

#include "errors.h"
#include "exprs.h"
#include "ir_limits.h"

namespace dg {

Binder::Binder(const Program& prog) : prog_(prog) {
    for (const auto& s : prog.sources)
        if (s.offset >= 0 || s.kind >= SourceKind::Reshape) needs_partial_eval_ = true;
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

// `where()` names the tensor in a message (made only for one)
template <class Where>
static int64_t read_element(const HostTensor& t, int64_t index, const Where& where) {
    if (t.data == nullptr) fail<ShapeError>(where(), " is a shape tensor: its values are needed, pass a Tensor with data");
    if (index >= t.numel()) fail<ShapeError>(where(), ": element ", index, " is needed but it has ", t.numel(), " elements");
    if (t.dtype == DType::I32) return static_cast<const int32_t*>(t.data)[index];
    if (t.dtype == DType::I64) return static_cast<const int64_t*>(t.data)[index];
    fail<DTypeError>(where(), ": shape tensors are i32 or i64, got ", dtype_name(t.dtype));
}

namespace {

std::vector<int64_t> read_values(const HostTensor& t, const std::string& where) {
    std::vector<int64_t> v(size_t(t.numel()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = read_element(t, int64_t(i), [&] { return where; });
    return v;
}

std::string list(const std::vector<int64_t>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
}

// A reshape target (at most one -1; 0 copies src's dim when special_zero) resolved against src's shape.
std::vector<int64_t> resolve_reshape(const std::vector<int64_t>& target, const std::vector<int64_t>& src, bool special_zero,
                                     const std::string& where) {
    int64_t total = 1;
    for (int64_t d : src)
        if (d < 1 || __builtin_mul_overflow(total, d, &total))
            fail<ShapeError>(where, ": the reshaped tensor has shape ", list(src), ", which has no valid element count");
    std::vector<int64_t> out(target.size());
    int infer_at = -1;
    int64_t known = 1;
    for (size_t i = 0; i < target.size(); ++i) {
        int64_t v = target[i];
        if (v == -1) {
            if (infer_at >= 0) fail<ShapeError>(where, ": the reshape target ", list(target), " has more than one -1");
            infer_at = int(i);
            continue;
        }
        if (v == 0 && special_zero) {
            if (i >= src.size())
                fail<ShapeError>(where, ": the reshape target ", list(target), " copies dimension ", i, " of a rank-", src.size(), " tensor");
            v = src[i];
        } else if (v < 1) {
            fail<ShapeError>(where, ": the reshape target ", list(target), " has an invalid dimension ", v);
        }
        out[i] = v;
        if (v < 1 || v > limits::kMaxDim || __builtin_mul_overflow(known, v, &known))
            fail<ShapeError>(where, ": the reshape target ", list(target), " has too many elements");
    }
    if (infer_at >= 0) {
        if (total % known != 0)
            fail<ShapeError>(where, ": the reshape target ", list(target), " does not divide the ", total, " elements of ", list(src));
        out[size_t(infer_at)] = total / known;
    } else if (known != total) {
        fail<ShapeError>(where, ": the reshape target ", list(target), " has ", known, " elements, the input ", list(src), " has ", total);
    }
    return out;
}

// A transpose order (negative axes from the end; empty reverses) checked to be a permutation.
std::vector<int64_t> resolve_order(const std::vector<int64_t>& order, size_t rank, const std::string& where) {
    std::vector<int64_t> perm(rank);
    if (order.empty()) {
        for (size_t i = 0; i < rank; ++i) perm[i] = int64_t(rank - 1 - i);
        return perm;
    }
    if (order.size() != rank) fail<ShapeError>(where, ": the order ", list(order), " has ", order.size(), " axes for a rank-", rank, " tensor");
    std::vector<char> seen(rank, 0);
    for (size_t i = 0; i < rank; ++i) {
        int64_t a = order[i] < 0 ? order[i] + int64_t(rank) : order[i];
        if (a < 0 || a >= int64_t(rank)) fail<ShapeError>(where, ": axis ", order[i], " of the order ", list(order), " is out of range for rank ", rank);
        if (seen[size_t(a)]) fail<ShapeError>(where, ": the order ", list(order), " repeats axis ", a);
        seen[size_t(a)] = 1;
        perm[i] = a;
    }
    return perm;
}

}  // namespace

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
    if (needs_partial_eval_) known.assign(prog_.symbols.size(), 0);
    for (const SourceDef& s : prog_.sources) {
        const HostTensor& h = *inputs[s.input];
        // the messages' words, made only for a message: the hot path (a dimension read at every call)
        // built two strings per source
        auto where = [&] { return input_label(size_t(s.input)); };
        if (needs_partial_eval_ && (s.offset >= 0 || s.kind >= SourceKind::Reshape))
            evaluate_exprs(prog_, b.symbols.data(), b.values, &known, &node_known);
        int64_t v = 0;
        if (s.kind == SourceKind::Dim) {
            v = h.shape[s.index];
        } else if (s.kind == SourceKind::Value) {
            v = read_element(h, s.index, where);
        } else {
            const TensorDef& ref = prog_.tensors[size_t(s.ref)];
            std::vector<int64_t> ref_dims;
            for (int32_t e : ref.shape) {
                if (!node_known[size_t(e)])
                    fail<IRError>("symbol source for ", where(), " is ordered before the shape it resolves against");
                ref_dims.push_back(b.values[size_t(e)]);
            }
            const std::string at = where();
            std::vector<int64_t> vals = read_values(h, at);
            std::vector<int64_t> r = s.kind == SourceKind::Reshape ? resolve_reshape(vals, ref_dims, s.flag != 0, at)
                                                                   : resolve_order(vals, ref_dims.size(), at);
            if (size_t(s.index) >= r.size())
                fail<ShapeError>(at, ": ", r.size(), " values, the partition reads value ", s.index);
            v = s.kind == SourceKind::PermutedDim ? ref_dims[size_t(r[size_t(s.index)])] : r[size_t(s.index)];
        }
        int64_t off = s.offset >= 0 ? b.values[size_t(s.offset)] : 0;
        const SymbolDef& sym = prog_.symbols[size_t(s.symbol)];
        auto what = [&] {
            return s.kind == SourceKind::Dim ? cat(where(), " dimension ", s.index) : cat(where(), " element ", s.index);
        };
        int64_t num = 0;
        if (__builtin_sub_overflow(v, off, &num) || (s.coeff == -1 && num == INT64_MIN))
            fail<ShapeError>(what(), " is ", v, ": ", sym.name, " overflows 64 bits");
        if (num % s.coeff != 0)
            fail<ShapeError>(what(), " is ", v, ", which is not ", s.coeff, "*", sym.name,
                             off ? cat(" + ", off) : std::string(), " for any integer ", sym.name);
        int64_t val = num / s.coeff;
        if (val < sym.min || val > sym.max)
            fail<ShapeError>(what(), " is ", v, ": that makes ", sym.name, " = ", val, ", outside its range [", sym.min,
                             ", ", sym.max, "]");
        b.symbols[size_t(s.symbol)] = val;
        if (needs_partial_eval_) known[size_t(s.symbol)] = 1;
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
    std::vector<char> is_input(prog_.tensors.size(), 0);
    for (int32_t i : prog_.inputs) is_input[size_t(i)] = 1;  // checked by bind(); an empty order input is valid
    std::vector<int64_t> shape;
    for (size_t k = 0; k < prog_.tensors.size(); ++k) {
        if (is_input[k]) continue;
        const TensorDef& t = prog_.tensors[k];
        shape.clear();
        for (size_t d = 0; d < t.shape.size(); ++d) {
            int64_t v = b.values[size_t(t.shape[d])];
            if (v < 1 || v > limits::kMaxDim)
                fail<ShapeError>("tensor ", t.label(), " dimension ", d, " is ", prog_.expr_string(t.shape[d]), " = ", v,
                                 " (", symbol_values(b), "); dimensions must be positive (and at most ", limits::kMaxDim, ")");
            shape.push_back(v);
        }
        try {
            host_bytes(t, shape);
        } catch (const ShapeError& e) {
            fail<ShapeError>("tensor ", t.label(), " (", symbol_values(b), "): ", e.what());
        }
    }
}

}  // namespace dg
