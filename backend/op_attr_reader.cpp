#include "op_attr_reader.h"

#include <algorithm>

namespace dg {
namespace ops {

namespace {

const char* type_name(AttrType t) {
    switch (t) {
        case AttrType::Int: return "INT";
        case AttrType::Ints: return "INTS";
        case AttrType::Float: return "FLOAT";
        case AttrType::Floats: return "FLOATS";
        case AttrType::String: return "STRING";
        case AttrType::Exprs: return "EXPRS";
    }
    return "?";
}

}  // namespace

AttrReader::AttrReader(const std::vector<AttrDef>& attrs, const std::vector<int>& input_ranks, size_t n_exprs,
                       const std::string& where)
    : attrs_(attrs), ranks_(input_ranks), n_exprs_(n_exprs), where_(where), used_(attrs.size(), 0) {}

void AttrReader::bad(const char* name, const std::string& why) const {
    fail<IRError>(where_, ": attribute '", name, "' ", why);
}

const AttrDef& AttrReader::take(const char* name, AttrType type, const char* what) {
    const AttrDef* found = nullptr;
    for (size_t i = 0; i < attrs_.size(); ++i) {
        if (attrs_[i].name != name) continue;
        if (found) bad(name, "is given twice");
        found = &attrs_[i];
        used_[i] = 1;
    }
    if (!found) bad(name, "is missing");
    if (found->type != type) bad(name, cat("must be ", what, " (", type_name(type), "), the IR has ", type_name(found->type)));
    return *found;
}

int64_t AttrReader::read_int(const char* name) {
    const AttrDef& a = take(name, AttrType::Int, "an int");
    if (a.ints.size() != 1) bad(name, cat("must hold one int, it holds ", a.ints.size()));
    return a.ints[0];
}

bool AttrReader::read_bool(const char* name) {
    const AttrDef& a = take(name, AttrType::Int, "a bool");
    if (a.ints.size() != 1 || (a.ints[0] != 0 && a.ints[0] != 1)) bad(name, "must hold one value, 0 or 1");
    return a.ints[0] != 0;
}

double AttrReader::read_float(const char* name) {
    const AttrDef& a = take(name, AttrType::Float, "a float");
    if (a.floats.size() != 1) bad(name, cat("must hold one float, it holds ", a.floats.size()));
    return a.floats[0];
}

std::string AttrReader::read_str(const char* name) { return take(name, AttrType::String, "a string").str; }

int AttrReader::read_choice(const char* name, const char* const* choices, int n) {
    const std::string& s = take(name, AttrType::String, "a string").str;
    for (int i = 0; i < n; ++i)
        if (s == choices[i]) return i;
    std::string list;
    for (int i = 0; i < n; ++i) list += cat(i ? ", " : "", "'", choices[i], "'");
    bad(name, cat("must be one of ", list, ", got '", s.substr(0, 64), "'"));
}

std::vector<int64_t> AttrReader::read_ints(const char* name) { return take(name, AttrType::Ints, "a list of ints").ints; }

std::vector<double> AttrReader::read_floats(const char* name) {
    return take(name, AttrType::Floats, "a list of floats").floats;
}

std::vector<int32_t> AttrReader::read_exprs(const char* name) {
    const AttrDef& a = take(name, AttrType::Exprs, "a list of dimension expressions");
    for (int32_t e : a.exprs)
        if (e < 0 || size_t(e) >= n_exprs_) bad(name, cat("refers to expression ", e, ", outside [0, ", n_exprs_, ")"));
    return a.exprs;
}

int32_t AttrReader::read_expr(const char* name) {
    std::vector<int32_t> e = read_exprs(name);
    if (e.size() != 1) bad(name, cat("must hold one dimension expression, it holds ", e.size()));
    return e[0];
}

DType AttrReader::read_dtype(const char* name) {
    int64_t v = read_int(name);
    if (v < 0 || v >= kNumDTypes) bad(name, cat("is not a dtype code: ", v));
    return DType(v);
}

void AttrReader::check_finite(const char* name, double v) const {
    if (!std::isfinite(v)) bad(name, cat("must be finite, got ", v));
}

void AttrReader::check_finite(const char* name, const std::vector<double>& v) const {
    for (double x : v) check_finite(name, x);
}

int AttrReader::rank_of(const char* name, int input) const {
    if (input < 0 || size_t(input) >= ranks_.size())
        bad(name, cat("refers to input ", input, ", the op has ", ranks_.size(), " inputs"));
    return ranks_[size_t(input)];
}

void AttrReader::check_axis(const char* name, int64_t v, int input) const {
    int r = rank_of(name, input);
    if (v < -r || v >= r) bad(name, cat("is axis ", v, ", out of range for rank ", r));
}

void AttrReader::check_axes(const char* name, const std::vector<int64_t>& v, int input) const {
    int r = rank_of(name, input);
    std::vector<char> seen(size_t(r), 0);
    for (int64_t a : v) {
        if (a < -r || a >= r) bad(name, cat("has axis ", a, ", out of range for rank ", r));
        int64_t n = a < 0 ? a + r : a;
        if (seen[size_t(n)]) bad(name, cat("repeats axis ", a));
        seen[size_t(n)] = 1;
    }
}

void AttrReader::check_perm(const char* name, const std::vector<int64_t>& v, int input) const {
    if (v.empty()) return;  // reverses the axes
    int r = rank_of(name, input);
    if (v.size() != size_t(r)) bad(name, cat("has ", v.size(), " axes, the input has rank ", r));
    check_axes(name, v, input);
}

void AttrReader::check_rank_length(const char* name, size_t n, int input) const {
    int r = rank_of(name, input);
    if (n != size_t(r)) bad(name, cat("must have one entry per axis of input ", input, " (", r, "), it has ", n));
}

void AttrReader::check_length(const char* name, size_t n, size_t want) const {
    if (n != want) bad(name, cat("must have ", want, " entries, it has ", n));
}

void AttrReader::finish() const {
    for (size_t i = 0; i < attrs_.size(); ++i)
        if (!used_[i]) {
            const AttrDef& a = attrs_[i];
            bool twice = false;
            for (size_t j = 0; j < i; ++j) twice = twice || attrs_[j].name == a.name;
            fail<IRError>(where_, ": attribute '", a.name.substr(0, 64), twice ? "' is given twice" : "' is not an attribute of this op");
        }
}

}  // namespace ops
}  // namespace dg
