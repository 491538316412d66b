// Reading one op's attributes from the IR into its typed struct (used by the
// generated readers in generated/op_schema.cpp). Every read checks that the
// attribute is present once and stored with the right type; the checks
// check the constraints the op registry declares. Failures are IRErrors
// naming the op and the attribute.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "dtype.h"
#include "errors.h"
#include "program.h"

namespace dg {
namespace ops {

class AttrReader {
public:
    AttrReader(const std::vector<AttrDef>& attrs, const std::vector<int>& input_ranks, size_t n_exprs,
               const std::string& where);

    int64_t read_int(const char* name);
    bool read_bool(const char* name);
    double read_float(const char* name);
    std::string read_str(const char* name);
    int read_choice(const char* name, const char* const* choices, int n);
    std::vector<int64_t> read_ints(const char* name);
    std::vector<double> read_floats(const char* name);
    int32_t read_expr(const char* name);
    std::vector<int32_t> read_exprs(const char* name);
    DType read_dtype(const char* name);

    void check_finite(const char* name, double v) const;
    void check_finite(const char* name, const std::vector<double>& v) const;
    template <class V, class B>
    void check_min(const char* name, const V& v, B bound) const {
        for_each(v, [&](auto x) {
            if (!(x >= bound)) bad(name, cat("must be >= ", bound, ", got ", x));
        });
    }
    template <class V, class B>
    void check_max(const char* name, const V& v, B bound) const {
        for_each(v, [&](auto x) {
            if (!(x <= bound)) bad(name, cat("must be <= ", bound, ", got ", x));
        });
    }
    void check_axis(const char* name, int64_t v, int input) const;
    void check_axes(const char* name, const std::vector<int64_t>& v, int input) const;
    void check_perm(const char* name, const std::vector<int64_t>& v, int input) const;
    void check_rank_length(const char* name, size_t n, int input) const;
    void check_length(const char* name, size_t n, size_t want) const;

    // Every attribute of the op was read: none unknown, none given twice.
    void finish() const;

private:
    const AttrDef& take(const char* name, AttrType type, const char* what);
    int rank_of(const char* name, int input) const;
    [[noreturn]] void bad(const char* name, const std::string& why) const;
    template <class V, class F>
    static void for_each(const V& v, F f) {
        if constexpr (std::is_arithmetic_v<V>) f(v);
        else
            for (auto x : v) f(x);
    }

    const std::vector<AttrDef>& attrs_;
    const std::vector<int>& ranks_;
    size_t n_exprs_;
    const std::string& where_;
    std::vector<char> used_;
};

}  // namespace ops
}  // namespace dg
