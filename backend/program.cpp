#include "program.h"

#include <algorithm>
#include <limits>

#include <cstring>
#include <type_traits>

#include "aligned_buffer.h"
#include "errors.h"
#include "exprs.h"
#include "generated/dyngraph_ir_generated.h"
#include "ir_limits.h"

namespace dg {

namespace fbs = dyngraph::fb;

std::string TensorDef::label() const {
    return name.empty() ? cat("id ", id) : cat("'", name, "' (id ", id, ")");
}

std::string OpDef::label() const { return cat("op '", name, "' (", ops::kOpFacts[kind].name, ")"); }

int64_t checked_numel(const std::vector<int64_t>& shape) {
    int64_t n = 1;
    for (int64_t d : shape) {
        if (d < 1 || d > limits::kMaxDim) fail<ShapeError>("dimension ", d, " is outside [1, ", limits::kMaxDim, "]");
        if (__builtin_mul_overflow(n, d, &n)) fail<ShapeError>("the element count of a shape overflows 64 bits");
    }
    return n;
}

size_t host_bytes(const TensorDef& t, const std::vector<int64_t>& shape) {
    if (t.storage != Storage::Default) return storage_bytes(ggml_type_of(t.storage, t.dtype), shape);
    uint64_t n = 0;
    if (__builtin_mul_overflow(uint64_t(checked_numel(shape)), uint64_t(dtype_size(t.dtype)), &n) ||
        n > limits::kMaxTensorBytes)
        fail<ShapeError>("a tensor of ", checked_numel(shape), " elements is above the limit of ", limits::kMaxTensorBytes,
                         " bytes");
    return size_t(n);
}

size_t storage_bytes(ggml_type t, const std::vector<int64_t>& shape) {
    const int64_t n = checked_numel(shape);  // every dim in [1, kMaxDim]
    const int64_t ne0 = shape.empty() ? 1 : shape.back();
    if (ne0 % ggml_blck_size(t) != 0)
        fail<ShapeError>("rows of ", ne0, " values cannot be stored as ", ggml_type_name(t));
    uint64_t bytes = 0;
    // (n / ne0) rows of ggml_row_size(t, ne0) <= ne0 * 8 bytes: no overflow before the check below
    if (__builtin_mul_overflow(uint64_t(ggml_row_size(t, ne0)), uint64_t(n / ne0), &bytes) ||
        bytes > limits::kMaxTensorBytes)
        fail<ShapeError>("a ", ggml_type_name(t), " tensor of ", n, " elements is above the limit of ",
                         limits::kMaxTensorBytes, " bytes");
    return size_t(bytes);
}

int64_t Program::const_value(int32_t node) const {
    if (node < 0 || size_t(node) >= exprs.size() || !is_const[size_t(node)])
        fail<IRError>("expression '", expr_string(node), "' is not a constant");
    return const_vals[size_t(node)];
}

std::vector<int64_t> Program::static_shape(const TensorDef& t) const {
    std::vector<int64_t> s;
    for (int32_t e : t.shape) s.push_back(const_value(e));
    return s;
}

namespace {

// Appends expression `node` to `out` while `out` is shorter than `budget`
// (a shared DAG printed as a tree could be exponentially long). Recursion
// depth is bounded by limits::kMaxExprDepth.
void append_expr(const Program& p, int32_t node, std::string& out, size_t budget) {
    if (out.size() >= budget) return;
    if (node < 0 || size_t(node) >= p.exprs.size()) {
        out += "?";
        return;
    }
    const ExprNode& n = p.exprs[size_t(node)];
    auto sub = [&](const char* before, int64_t a, const char* mid, int64_t b, const char* after) {
        out += before;
        append_expr(p, int32_t(a), out, budget);
        out += mid;
        append_expr(p, int32_t(b), out, budget);
        out += after;
    };
    switch (n.op) {
        case ExprOp::Const: out += std::to_string(n.a); return;
        case ExprOp::Symbol: out += p.symbols[size_t(n.a)].name; return;
        case ExprOp::Add: return sub("", n.a, " + ", n.b, "");
        case ExprOp::Sub: return sub("", n.a, " - (", n.b, ")");
        case ExprOp::Mul: return sub("(", n.a, ")*(", n.b, ")");
        case ExprOp::FloorDiv: return sub("(", n.a, ") // (", n.b, ")");
        case ExprOp::Mod: return sub("(", n.a, ") % (", n.b, ")");
        case ExprOp::Min: return sub("min(", n.a, ", ", n.b, ")");
        case ExprOp::Max: return sub("max(", n.a, ", ", n.b, ")");
    }
    out += "?";
}

}  // namespace

std::string Program::expr_string(int32_t node) const {
    constexpr size_t kBudget = 200;
    std::string s;
    append_expr(*this, node, s, kBudget);
    if (s.size() >= kBudget) s = s.substr(0, kBudget) + " ...";
    return s;
}

namespace {

template <class T>
size_t count(const flatbuffers::Vector<T>* v) {
    return v ? v->size() : 0;
}

// The bytes of every vector and string the parser copies out, against the buffer's size. FlatBuffers
// lets any number of tables refer to one vector or string: without this a file of a few megabytes could
// have each of a million ops refer to one vector of a million inputs, and the parser copy and check them
// all (hours and terabytes). A file whose vectors and strings are each referred to once (what every
// writer makes, dyngraph's included) holds them within its own size.
class CopyBudget {
public:
    explicit CopyBudget(size_t size) : size_(size), left_(size) {}
    void take(size_t n, size_t elem_size) {
        const size_t bytes = n * elem_size;  // (n < 2^32 elements of at most 24 bytes: no overflow)
        if (bytes > left_)
            fail<IRError>("the IR's vectors and strings add up to more bytes than its ", size_,
                          "-byte buffer: one is referred to more than once (a malformed file)");
        left_ -= bytes;
    }

private:
    size_t size_, left_;
};

std::vector<int32_t> ints32(const flatbuffers::Vector<int32_t>* v, CopyBudget& budget) {
    if (!v) return {};
    budget.take(v->size(), sizeof(int32_t));
    return std::vector<int32_t>(v->begin(), v->end());
}

std::string str_of(const flatbuffers::String* s, CopyBudget& budget) {
    if (!s) return "";
    budget.take(s->size(), 1);
    return s->str();
}

// The verifier checks a vector's alignment only to 4 bytes: the elements of a vector
// of 8-byte scalars or structs may sit misaligned in a hand-made file, so they are
// copied out bytewise (FlatBuffers is little-endian, as are the hosts we build for).
static_assert(FLATBUFFERS_LITTLEENDIAN, "dyngraph reads FlatBuffers vectors bytewise on little-endian hosts");

template <class T, class V>
std::vector<T> copy_out(const flatbuffers::Vector<V>* v, CopyBudget& budget) {
    static_assert(sizeof(T) == sizeof(std::remove_const_t<std::remove_pointer_t<V>>), "copy_out: element sizes differ");
    if (v) budget.take(v->size(), sizeof(T));
    std::vector<T> out(v ? v->size() : 0);
    if (!out.empty()) std::memcpy(out.data(), v->Data(), out.size() * sizeof(T));
    return out;
}

void check_count(size_t n, size_t limit, const char* what) {
    if (n > limit) fail<IRError>("the IR has ", n, " ", what, " (at most ", limit, ")");
}

std::string name_of(const flatbuffers::String* s, const char* what, CopyBudget& budget) {
    if (!s) return "";
    if (s->size() > limits::kMaxNameBytes)
        fail<IRError>("a ", what, " name has ", s->size(), " bytes (at most ", limits::kMaxNameBytes, ")");
    return str_of(s, budget);
}

void check_index(int64_t i, size_t n, const char* what, const std::string& where) {
    if (i < 0 || size_t(i) >= n) fail<IRError>(where, ": ", what, " index ", i, " is out of range [0, ", n, ")");
}

void check_arity(const ops::OpFacts& f, size_t n, int lo, int hi, const char* what, const std::string& where) {
    if (n >= size_t(lo) && (hi < 0 || n <= size_t(hi))) return;
    std::string want = lo == hi ? cat(lo) : hi < 0 ? cat("at least ", lo) : cat(lo, " to ", hi);
    fail<IRError>(where, ": takes ", want, " ", what, ", the IR gives ", n);
}

void check_dtype(const ops::OpFacts& f, bool input, size_t i, const TensorDef& t, const std::string& where) {
    const ops::DTypeClass* classes = input ? f.input_classes : f.output_classes;
    const size_t n = input ? f.n_input_classes : f.n_output_classes;
    ops::DTypeClass c = classes[std::min(i, n - 1)];
    if (ops::dtype_in(c, t.dtype)) return;
    std::string port = input && i < f.n_input_names ? cat("input ", i, " (", f.input_names[i], ")")
                                                      : cat(input ? "input " : "output ", i);
    fail<IRError>(where, ": ", port, " ", t.label(), " must be ", ops::dtype_class_words(c), " tensor, it is ",
                  dtype_name(t.dtype));
}

}  // namespace

const uint8_t* aligned_ir(const uint8_t* buf, size_t size, AlignedBuffer& copy) {
    if (reinterpret_cast<uintptr_t>(buf) % 8 == 0 || buf == nullptr) return buf;
    try {
        copy.reserve(size);
    } catch (const std::bad_alloc&) {
        fail<IRError>("cannot copy the ", size, "-byte IR into aligned memory");
    }
    std::memcpy(copy.data(), buf, size);
    return static_cast<const uint8_t*>(copy.data());
}

// Program::reader_begin, readers and is_output (counting sort by tensor, so each tensor's readers
// keep program order).
static void index_readers(Program& prog) {
    const size_t n = prog.tensors.size();
    prog.reader_begin.assign(n + 1, 0);
    for (const OpDef& op : prog.ops)
        for (int32_t t : op.inputs) ++prog.reader_begin[size_t(t) + 1];
    for (size_t t = 0; t < n; ++t) prog.reader_begin[t + 1] += prog.reader_begin[t];
    prog.readers.resize(size_t(prog.reader_begin[n]));
    std::vector<int32_t> next(prog.reader_begin.begin(), prog.reader_begin.end() - 1);
    for (size_t o = 0; o < prog.ops.size(); ++o)
        for (size_t i = 0; i < prog.ops[o].inputs.size(); ++i)
            prog.readers[size_t(next[size_t(prog.ops[o].inputs[i])]++)] = {int32_t(o), int32_t(i)};
    prog.is_output.assign(n, 0);
    for (int32_t o : prog.outputs) prog.is_output[size_t(o)] = 1;
}

Program Program::parse(const uint8_t* buf, size_t size, bool keep_attrs) {
    if (buf == nullptr || size < 8) fail<IRError>("the IR buffer is empty or truncated (", size, " bytes)");
    if (reinterpret_cast<uintptr_t>(buf) % 8 != 0) fail<IRError>("internal error: the IR buffer is not 8-byte aligned");
    if (!fbs::ProgramBufferHasIdentifier(buf))
        fail<IRError>("the buffer is not a dyngraph IR (its FlatBuffers file identifier is not 'DGIR')");
    flatbuffers::Verifier::Options opts;
    opts.max_tables = 100000000;
    opts.max_size = std::min<size_t>(size_t(FLATBUFFERS_MAX_BUFFER_SIZE), std::numeric_limits<size_t>::max());
    flatbuffers::Verifier verifier(buf, size, opts);
    if (!fbs::VerifyProgramBuffer(verifier))
        fail<IRError>("the IR buffer is malformed (FlatBuffers verification failed)");
    const fbs::Program* p = fbs::GetProgram(buf);
    if (p->version() != 1) fail<IRError>("IR version ", p->version(), " is not supported (this build reads version 1)");

    Program prog;
    CopyBudget budget(size);
    check_count(count(p->symbols()), limits::kMaxSymbols, "symbols");
    check_count(count(p->exprs()), limits::kMaxExprNodes, "expression nodes");
    check_count(count(p->tensors()), limits::kMaxTensors, "tensors");
    check_count(count(p->ops()), limits::kMaxOps, "ops");
    // symbols
    if (p->symbols())
        for (const auto* s : *p->symbols()) {
            SymbolDef d;
            d.name = name_of(s->name(), "symbol", budget);
            d.min = s->min();
            d.max = s->max();
            if (d.min < 0 || d.max < d.min)
                fail<IRError>("symbol '", d.name, "' has an invalid range [", d.min, ", ", d.max, "]");
            prog.symbols.push_back(std::move(d));
        }
    // expressions: operands refer to earlier nodes, so one pass in order evaluates
    // the constant ones and measures depth (no recursion over the DAG anywhere)
    if (p->exprs()) {
        const size_t n = p->exprs()->size();
        std::vector<uint16_t> depth(n, 0);
        std::vector<uint8_t> nesting(n, 0);
        prog.is_const.assign(n, 0);
        prog.const_vals.assign(n, 0);
        const std::vector<fbs::ExprNode> nodes = copy_out<fbs::ExprNode>(p->exprs(), budget);
        for (size_t i = 0; i < n; ++i) {
            const fbs::ExprNode* e = &nodes[i];
            auto op = uint8_t(e->op());
            if (op > uint8_t(ExprOp::Max)) fail<IRError>("expression node ", i, " has unknown op ", int(op));
            ExprNode node{ExprOp(op), e->a(), e->b()};
            std::string where = cat("expression node ", i);
            if (node.op == ExprOp::Const) {
                prog.is_const[i] = 1;
                prog.const_vals[i] = node.a;
            } else if (node.op == ExprOp::Symbol) {
                check_index(node.a, prog.symbols.size(), "symbol", where);
            } else {
                check_index(node.a, i, "operand", where);
                check_index(node.b, i, "operand", where);
                const size_t a = size_t(node.a), b = size_t(node.b);
                depth[i] = uint16_t(std::max(depth[a], depth[b]) + 1);
                const bool atom = node.op >= ExprOp::FloorDiv;
                nesting[i] = uint8_t(std::max(nesting[a], nesting[b]) + (atom ? 1 : 0));
                if (depth[i] > limits::kMaxExprDepth)
                    fail<IRError>(where, " is nested ", depth[i], " deep (at most ", limits::kMaxExprDepth, ")");
                if (nesting[i] > limits::kMaxExprNesting)
                    fail<IRError>(where, " nests ", int(nesting[i]), " divisions, modulos, minima or maxima (at most ",
                                  limits::kMaxExprNesting, ")");
                if (prog.is_const[a] && prog.is_const[b]) {
                    try {
                        prog.const_vals[i] = apply_expr_op(node.op, prog.const_vals[a], prog.const_vals[b]);
                    } catch (const ShapeError& err) {
                        fail<IRError>(where, ": ", err.what());
                    }
                    prog.is_const[i] = 1;
                }
            }
            prog.exprs.push_back(node);
        }
    }
    const size_t n_exprs = prog.exprs.size();
    // tensors
    if (p->tensors())
        for (size_t i = 0; i < p->tensors()->size(); ++i) {
            const auto* t = p->tensors()->Get(flatbuffers::uoffset_t(i));
            TensorDef d;
            d.id = t->id();
            d.name = name_of(t->name(), "tensor", budget);
            auto dt = uint8_t(t->dtype());
            if (dt >= kNumDTypes) fail<IRError>("tensor ", d.label(), " has unknown dtype ", int(dt));
            d.dtype = DType(dt);
            d.shape = ints32(t->shape(), budget);
            if (d.shape.size() > size_t(kMaxRank))
                fail<IRError>("tensor ", d.label(), " has rank ", d.shape.size(), " (at most ", kMaxRank, ")");
            for (int32_t s : d.shape) check_index(s, n_exprs, "expression", cat("tensor ", d.label()));
            auto pr = uint8_t(t->property());
            if (pr > 2) fail<IRError>("tensor ", d.label(), " has unknown property ", int(pr));
            d.property = Property(pr);
            auto st = uint8_t(t->storage());
            if (st >= kNumStorage) fail<IRError>("tensor ", d.label(), " has unknown storage type ", int(st));
            d.storage = Storage(st);
            if (d.storage != Storage::Default && d.property != Property::Constant)
                fail<IRError>("tensor ", d.label(), ": only constants have a storage type");
            prog.tensors.push_back(std::move(d));
        }
    const size_t n_tensors = prog.tensors.size();
    // ops, in an order where every input exists before it is used
    std::vector<char> available(n_tensors, 0);
    for (size_t i = 0; i < n_tensors; ++i)
        if (prog.tensors[i].property != Property::Variable) available[i] = 1;
    prog.inputs = ints32(p->inputs(), budget);
    for (int32_t i : prog.inputs) {
        check_index(i, n_tensors, "tensor", "program input");
        if (prog.tensors[size_t(i)].property != Property::Variable)
            fail<IRError>("program input ", prog.tensors[size_t(i)].label(), " is not a VARIABLE tensor");
        if (available[size_t(i)]) fail<IRError>("tensor ", prog.tensors[size_t(i)].label(), " is listed twice as input");
        available[size_t(i)] = 1;
    }
    if (p->ops()) {
        size_t n_inputs = 0;
        for (const auto* o : *p->ops()) n_inputs += count(o->inputs());
        check_count(n_inputs, limits::kMaxOpInputs, "op inputs");
    }
    if (p->ops())
        for (size_t k = 0; k < p->ops()->size(); ++k) {
            const auto* o = p->ops()->Get(flatbuffers::uoffset_t(k));
            OpDef d;
            d.id = o->id();
            d.kind = uint16_t(o->kind());
            d.name = name_of(o->name(), "op", budget);
            if (d.kind >= uint16_t(fbs::OpKind::End)) fail<IRError>("op '", d.name, "' has unknown kind ", d.kind);
            const ops::OpFacts& facts = d.facts();
            if (!facts.registered) fail<IRError>("op '", d.name, "': op kind ", facts.name, " has no shape rule in this build");
            d.inputs = ints32(o->inputs(), budget);
            d.outputs = ints32(o->outputs(), budget);
            std::string where = d.label();
            check_arity(facts, d.inputs.size(), facts.min_inputs, facts.max_inputs, "inputs", where);
            check_arity(facts, d.outputs.size(), facts.min_outputs, facts.max_outputs, "outputs", where);
            for (int32_t i : d.inputs) {
                check_index(i, n_tensors, "input tensor", where);
                if (!available[size_t(i)])
                    fail<IRError>(where, ": input ", prog.tensors[size_t(i)].label(), " is used before it is produced");
            }
            for (int32_t i : d.outputs) {
                check_index(i, n_tensors, "output tensor", where);
                TensorDef& t = prog.tensors[size_t(i)];
                if (available[size_t(i)]) fail<IRError>(where, ": output ", t.label(), " already has a value");
                available[size_t(i)] = 1;
                t.producer = int32_t(k);
            }
            std::vector<int> ranks;
            int same_as = -1;  // the first input of the op's same-dtype group
            for (size_t j = 0; j < d.inputs.size(); ++j) {
                const TensorDef& t = prog.tensors[size_t(d.inputs[j])];
                check_dtype(facts, true, j, t, where);
                ranks.push_back(int(t.shape.size()));
                // a constant held in a weight storage type (q4_0 blocks...) only where the op reads weights
                if (t.storage != Storage::Default && !(j < 32 && ((facts.weight_inputs >> j) & 1u)))
                    fail<IRError>(where, ": input ", j, " ", t.label(), " is stored as a weight type; ", facts.name,
                                  " reads no weights there");
                if (j < 32 && ((facts.same_dtype_inputs >> j) & 1u)) {
                    if (same_as < 0) same_as = int(j);
                    else if (t.dtype != prog.tensors[size_t(d.inputs[size_t(same_as)])].dtype)
                        fail<IRError>(where, ": input ", j, " ", t.label(), " is ", dtype_name(t.dtype), ", input ", same_as,
                                      " is ", dtype_name(prog.tensors[size_t(d.inputs[size_t(same_as)])].dtype),
                                      "; they must match");
                }
            }
            for (size_t j = 0; j < d.outputs.size(); ++j) {
                const TensorDef& t = prog.tensors[size_t(d.outputs[j])];
                check_dtype(facts, false, j, t, where);
                if (facts.out_dtype_of >= 0 && size_t(facts.out_dtype_of) < d.inputs.size() &&
                    t.dtype != prog.tensors[size_t(d.inputs[size_t(facts.out_dtype_of)])].dtype)
                    fail<IRError>(where, ": output ", j, " ", t.label(), " is ", dtype_name(t.dtype), ", the op's outputs have the dtype of input ",
                                  int(facts.out_dtype_of));
            }
            std::vector<AttrDef> attrs;
            if (o->attrs())
                for (const auto* a : *o->attrs()) {
                    AttrDef ad;
                    ad.name = str_of(a->name(), budget);
                    auto ty = uint8_t(a->type());
                    if (ty > uint8_t(AttrType::Exprs)) fail<IRError>(where, ": attribute '", ad.name, "' has unknown type");
                    ad.type = AttrType(ty);
                    ad.ints = copy_out<int64_t>(a->ints(), budget);
                    ad.floats = copy_out<double>(a->floats(), budget);
                    ad.str = str_of(a->str(), budget);
                    ad.exprs = ints32(a->exprs(), budget);
                    attrs.push_back(std::move(ad));
                }
            d.attrs = ops::read_attrs(d.kind, attrs, ranks, n_exprs, where);
            if (keep_attrs) d.raw_attrs = std::move(attrs);
            prog.ops.push_back(std::move(d));
        }
    prog.outputs = ints32(p->outputs(), budget);
    std::vector<char> listed(n_tensors, 0);
    for (int32_t i : prog.outputs) {
        check_index(i, n_tensors, "tensor", "program output");
        if (!available[size_t(i)]) fail<IRError>("program output ", prog.tensors[size_t(i)].label(), " is never produced");
        if (listed[size_t(i)]) fail<IRError>("tensor ", prog.tensors[size_t(i)].label(), " is listed twice as output");
        listed[size_t(i)] = 1;
    }
    index_readers(prog);
    // symbol sources and guards
    if (p->sources())
        for (const auto* s : *p->sources()) {
            SourceDef d{s->symbol(), SourceKind(uint8_t(s->kind())), s->input(), s->index(), s->coeff(), s->offset(),
                        s->ref(), s->flag()};
            check_index(d.symbol, prog.symbols.size(), "symbol", "symbol source");
            check_index(d.input, prog.inputs.size(), "input", "symbol source");
            if (uint8_t(d.kind) > uint8_t(SourceKind::PermutedDim)) fail<IRError>("symbol source has an unknown kind");
            if (d.kind >= SourceKind::Reshape) {
                check_index(d.ref, n_tensors, "tensor", "symbol source");
                if (d.index < 0 || d.index >= kMaxRank) fail<IRError>("symbol source has an invalid axis ", d.index);
            }
            if (d.coeff == 0 || d.coeff == INT64_MIN) fail<IRError>("symbol source has coefficient ", d.coeff);
            if (d.offset != -1) check_index(d.offset, n_exprs, "expression", "symbol source");
            const TensorDef& in = prog.tensors[size_t(prog.inputs[size_t(d.input)])];
            if (d.kind == SourceKind::Dim) check_index(d.index, in.shape.size(), "dimension", "symbol source");
            else if (d.index < 0) fail<IRError>("symbol source has a negative element index");
            if (d.kind >= SourceKind::Reshape && in.shape.size() != 1)
                fail<IRError>("symbol source: shape input ", in.label(), " is not 1-D");
            prog.sources.push_back(d);
        }
    if (p->guards())
        for (const auto* g : *p->guards()) {
            GuardDef d{g->lhs(), g->rhs(), name_of(g->message(), "guard message", budget)};
            check_index(d.lhs, n_exprs, "expression", "guard");
            check_index(d.rhs, n_exprs, "expression", "guard");
            prog.guards.push_back(std::move(d));
        }
    // a static dimension below 1 only in an input read as a shape tensor (an empty transpose order)
    std::vector<char> shape_only(n_tensors, 1);
    for (const OpDef& op : prog.ops)
        for (size_t j = 0; j < op.inputs.size(); ++j)
            if (!(j < 32 && ((op.facts().shape_inputs >> j) & 1u))) shape_only[size_t(op.inputs[j])] = 0;
    for (int32_t o : prog.outputs) shape_only[size_t(o)] = 0;
    for (size_t i = 0; i < n_tensors; ++i) {
        const TensorDef& t = prog.tensors[i];
        for (int32_t s : t.shape)
            if (prog.is_const[size_t(s)] && (prog.const_vals[size_t(s)] > limits::kMaxDim ||
                                              prog.const_vals[size_t(s)] < (shape_only[i] ? 0 : 1)))
                fail<IRError>("tensor ", t.label(), " has a dimension of ", prog.const_vals[size_t(s)],
                              shape_only[i] ? " (shape inputs: 0 to " : " (1 to ", limits::kMaxDim, ")");
    }
    // every symbol has exactly one source (binding is linear in the symbols)
    std::vector<char> bound(prog.symbols.size(), 0);
    for (const auto& s : prog.sources) {
        if (bound[size_t(s.symbol)]) fail<IRError>("symbol '", prog.symbols[size_t(s.symbol)].name, "' has two sources");
        bound[size_t(s.symbol)] = 1;
    }
    for (size_t i = 0; i < bound.size(); ++i)
        if (!bound[i]) fail<IRError>("symbol '", prog.symbols[i].name, "' has no source among the inputs");
    // constant and state shapes are static, each dimension and byte size within the limits
    for (auto& t : prog.tensors) {
        if (t.property == Property::Variable) continue;
        std::vector<int64_t> shape;
        for (int32_t s : t.shape) {
            if (!prog.is_const[size_t(s)])
                fail<IRError>("tensor ", t.label(), " is ", t.property == Property::State ? "state" : "a constant",
                              ": its shape must be static, a dimension is '", prog.expr_string(s), "'");
            shape.push_back(prog.const_vals[size_t(s)]);
        }
        try {
            host_bytes(t, shape);
            storage_bytes(ggml_type_of(t.storage, t.dtype), shape);
        } catch (const ShapeError& e) {
            fail<IRError>("tensor ", t.label(), ": ", e.what());
        }
    }
    std::vector<char> has_data(n_tensors, 0);
    if (p->data())
        for (const auto* d : *p->data()) {
            int32_t ti = d->tensor();
            check_index(ti, n_tensors, "tensor", "tensor data");
            const TensorDef& t = prog.tensors[size_t(ti)];
            if (t.property == Property::Variable) fail<IRError>("tensor data given for VARIABLE tensor ", t.label());
            size_t want = host_bytes(t, prog.static_shape(t));
            size_t got = d->data() ? d->data()->size() : 0;
            if (got != want) fail<IRError>("tensor ", t.label(), ": data has ", got, " bytes, its shape and type need ", want);
            if (has_data[size_t(ti)]) fail<IRError>("tensor ", t.label(), " has data twice");
            has_data[size_t(ti)] = 1;
            budget.take(got, 1);  // (not copied here, but uploaded once per tensor)
            prog.data.push_back({ti, d->data() ? d->data()->data() : nullptr, got});
        }
    return prog;
}

}  // namespace dg
