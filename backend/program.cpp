#include "program.h"

#include <algorithm>
#include <limits>

#include "errors.h"
#include "exprs.h"
#include "generated/dyngraph_ir_generated.h"

namespace dg {

namespace fbs = dyngraph::fb;

std::string TensorDef::label() const {
    return name.empty() ? cat("id ", id) : cat("'", name, "' (id ", id, ")");
}

const AttrDef* OpDef::find(std::string_view n) const {
    for (const auto& a : attrs)
        if (a.name == n) return &a;
    return nullptr;
}

int64_t OpDef::get_int(std::string_view n, int64_t dflt) const {
    const AttrDef* a = find(n);
    if (!a || a->ints.empty()) return dflt;
    return a->ints[0];
}

double OpDef::get_float(std::string_view n, double dflt) const {
    const AttrDef* a = find(n);
    if (!a) return dflt;
    if (!a->floats.empty()) return a->floats[0];
    if (!a->ints.empty()) return double(a->ints[0]);
    return dflt;
}

std::string OpDef::get_str(std::string_view n, const std::string& dflt) const {
    const AttrDef* a = find(n);
    return a && a->type == AttrType::String ? a->str : dflt;
}

std::vector<int64_t> OpDef::get_ints(std::string_view n) const {
    const AttrDef* a = find(n);
    return a ? a->ints : std::vector<int64_t>{};
}

const std::vector<int32_t>& OpDef::get_exprs(std::string_view n) const {
    const AttrDef* a = find(n);
    if (!a || a->type != AttrType::Exprs) fail<IRError>("op '", name, "': attribute '", n, "' (expressions) is missing");
    return a->exprs;
}

size_t host_bytes(const TensorDef& t, const std::vector<int64_t>& shape) {
    if (t.storage != Storage::Default) return storage_bytes(ggml_type_of(t.storage, t.dtype), shape);
    size_t n = dtype_size(t.dtype);
    for (int64_t d : shape) n *= size_t(d);
    return n;
}

size_t storage_bytes(ggml_type t, const std::vector<int64_t>& shape) {
    int64_t ne0 = shape.empty() ? 1 : shape.back();
    int64_t rows = 1;
    for (size_t i = 0; i + 1 < shape.size(); ++i) rows *= shape[i];
    return ggml_row_size(t, ne0) * size_t(rows);
}

int64_t Program::const_value(int32_t node) const {
    const ExprNode& n = exprs[size_t(node)];
    if (n.op == ExprOp::Const) return n.a;
    if (n.op == ExprOp::Symbol) fail<IRError>("expression '", expr_string(node), "' is not a constant");
    try {
        return apply_expr_op(n.op, const_value(int32_t(n.a)), const_value(int32_t(n.b)));
    } catch (const ShapeError& e) {
        fail<IRError>("constant expression '", expr_string(node), "': ", e.what());
    }
}

std::string Program::expr_string(int32_t node) const {
    const ExprNode& n = exprs[size_t(node)];
    auto s = [&](int64_t i) { return expr_string(int32_t(i)); };
    switch (n.op) {
        case ExprOp::Const: return std::to_string(n.a);
        case ExprOp::Symbol: return symbols[size_t(n.a)].name;
        case ExprOp::Add: return cat(s(n.a), " + ", s(n.b));
        case ExprOp::Sub: return cat(s(n.a), " - (", s(n.b), ")");
        case ExprOp::Mul: return cat("(", s(n.a), ")*(", s(n.b), ")");
        case ExprOp::FloorDiv: return cat("(", s(n.a), ") // (", s(n.b), ")");
        case ExprOp::Mod: return cat("(", s(n.a), ") % (", s(n.b), ")");
        case ExprOp::Min: return cat("min(", s(n.a), ", ", s(n.b), ")");
        case ExprOp::Max: return cat("max(", s(n.a), ", ", s(n.b), ")");
    }
    return "?";
}

namespace {

template <class T>
size_t count(const flatbuffers::Vector<T>* v) {
    return v ? v->size() : 0;
}

std::vector<int32_t> ints32(const flatbuffers::Vector<int32_t>* v) {
    return v ? std::vector<int32_t>(v->begin(), v->end()) : std::vector<int32_t>{};
}

void check_index(int64_t i, size_t n, const char* what, const std::string& where) {
    if (i < 0 || size_t(i) >= n) fail<IRError>(where, ": ", what, " index ", i, " is out of range [0, ", n, ")");
}

}  // namespace

Program Program::parse(const uint8_t* buf, size_t size) {
    if (buf == nullptr || size < 8) fail<IRError>("the IR buffer is empty or truncated (", size, " bytes)");
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
    // symbols
    if (p->symbols())
        for (const auto* s : *p->symbols()) {
            SymbolDef d;
            d.name = s->name() ? s->name()->str() : "";
            d.min = s->min();
            d.max = s->max();
            if (d.min < 0 || d.max < d.min)
                fail<IRError>("symbol '", d.name, "' has an invalid range [", d.min, ", ", d.max, "]");
            prog.symbols.push_back(std::move(d));
        }
    // expressions: operands refer to earlier nodes
    if (p->exprs())
        for (size_t i = 0; i < p->exprs()->size(); ++i) {
            const auto* e = p->exprs()->Get(flatbuffers::uoffset_t(i));
            auto op = uint8_t(e->op());
            if (op > uint8_t(ExprOp::Max)) fail<IRError>("expression node ", i, " has unknown op ", int(op));
            ExprNode n{ExprOp(op), e->a(), e->b()};
            std::string where = cat("expression node ", i);
            if (n.op == ExprOp::Symbol) check_index(n.a, prog.symbols.size(), "symbol", where);
            if (n.op != ExprOp::Const && n.op != ExprOp::Symbol) {
                check_index(n.a, i, "operand", where);
                check_index(n.b, i, "operand", where);
            }
            prog.exprs.push_back(n);
        }
    const size_t n_exprs = prog.exprs.size();
    // tensors
    if (p->tensors())
        for (size_t i = 0; i < p->tensors()->size(); ++i) {
            const auto* t = p->tensors()->Get(flatbuffers::uoffset_t(i));
            TensorDef d;
            d.id = t->id();
            d.name = t->name() ? t->name()->str() : "";
            auto dt = uint8_t(t->dtype());
            if (dt >= kNumDTypes) fail<IRError>("tensor ", d.label(), " has unknown dtype ", int(dt));
            d.dtype = DType(dt);
            d.shape = ints32(t->shape());
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
    prog.inputs = ints32(p->inputs());
    for (int32_t i : prog.inputs) {
        check_index(i, n_tensors, "tensor", "program input");
        if (prog.tensors[size_t(i)].property != Property::Variable)
            fail<IRError>("program input ", prog.tensors[size_t(i)].label(), " is not a VARIABLE tensor");
        if (available[size_t(i)]) fail<IRError>("tensor ", prog.tensors[size_t(i)].label(), " is listed twice as input");
        available[size_t(i)] = 1;
    }
    if (p->ops())
        for (size_t k = 0; k < p->ops()->size(); ++k) {
            const auto* o = p->ops()->Get(flatbuffers::uoffset_t(k));
            OpDef d;
            d.id = o->id();
            d.kind = uint16_t(o->kind());
            d.name = o->name() ? o->name()->str() : "";
            if (d.kind >= uint16_t(fbs::OpKind::End)) fail<IRError>("op '", d.name, "' has unknown kind ", d.kind);
            d.inputs = ints32(o->inputs());
            d.outputs = ints32(o->outputs());
            std::string where = cat("op '", d.name, "'");
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
            if (o->attrs())
                for (const auto* a : *o->attrs()) {
                    AttrDef ad;
                    ad.name = a->name() ? a->name()->str() : "";
                    auto ty = uint8_t(a->type());
                    if (ty > uint8_t(AttrType::Exprs)) fail<IRError>(where, ": attribute '", ad.name, "' has unknown type");
                    ad.type = AttrType(ty);
                    if (a->ints()) ad.ints.assign(a->ints()->begin(), a->ints()->end());
                    if (a->floats()) ad.floats.assign(a->floats()->begin(), a->floats()->end());
                    if (a->str()) ad.str = a->str()->str();
                    ad.exprs = ints32(a->exprs());
                    for (int32_t e : ad.exprs) check_index(e, n_exprs, "expression", where);
                    d.attrs.push_back(std::move(ad));
                }
            prog.ops.push_back(std::move(d));
        }
    prog.outputs = ints32(p->outputs());
    for (size_t j = 0; j < prog.outputs.size(); ++j) {
        int32_t i = prog.outputs[j];
        check_index(i, n_tensors, "tensor", "program output");
        if (!available[size_t(i)]) fail<IRError>("program output ", prog.tensors[size_t(i)].label(), " is never produced");
        for (size_t k = 0; k < j; ++k)
            if (prog.outputs[k] == i) fail<IRError>("tensor ", prog.tensors[size_t(i)].label(), " is listed twice as output");
    }
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
            if (d.coeff == 0) fail<IRError>("symbol source has coefficient 0");
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
            GuardDef d{g->lhs(), g->rhs(), g->message() ? g->message()->str() : ""};
            check_index(d.lhs, n_exprs, "expression", "guard");
            check_index(d.rhs, n_exprs, "expression", "guard");
            prog.guards.push_back(std::move(d));
        }
    // every symbol must have a source
    std::vector<char> bound(prog.symbols.size(), 0);
    for (const auto& s : prog.sources) bound[size_t(s.symbol)] = 1;
    for (size_t i = 0; i < bound.size(); ++i)
        if (!bound[i]) fail<IRError>("symbol '", prog.symbols[i].name, "' has no source among the inputs");
    // constant and state shapes are static; data sizes match
    for (auto& t : prog.tensors) {
        if (t.property == Property::Variable) continue;
        for (int32_t s : t.shape) {
            int64_t v = prog.const_value(s);
            if (v < 1) fail<IRError>("tensor ", t.label(), " has a non-positive dimension ", v);
        }
    }
    if (p->data())
        for (const auto* d : *p->data()) {
            int32_t ti = d->tensor();
            check_index(ti, n_tensors, "tensor", "tensor data");
            const TensorDef& t = prog.tensors[size_t(ti)];
            if (t.property == Property::Variable) fail<IRError>("tensor data given for VARIABLE tensor ", t.label());
            std::vector<int64_t> shape;
            for (int32_t s : t.shape) shape.push_back(prog.const_value(s));
            size_t want = host_bytes(t, shape);
            size_t got = d->data() ? d->data()->size() : 0;
            if (got != want) fail<IRError>("tensor ", t.label(), ": data has ", got, " bytes, its shape and type need ", want);
            for (const auto& other : prog.data)
                if (other.tensor == ti) fail<IRError>("tensor ", t.label(), " has data twice");
            prog.data.push_back({ti, d->data() ? d->data()->data() : nullptr, got});
        }
    return prog;
}

}  // namespace dg
