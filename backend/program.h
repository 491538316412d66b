// The IR of one compiled partition, read once from its FlatBuffer and checked.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dtype.h"
#include "generated/op_schema.h"

namespace dg {

// Logical tensors have rank <= 6; ggml has 4 dimensions. A tensor of rank r > 4
// is held folded: ggml's ne[0..2] are its three innermost axes and ne[3] the
// product of the others (which ggml then steps through with one stride).
constexpr int kMaxRank = 6;
constexpr int kGgmlRank = 4;

// ggml ne[] of a logical shape (numpy order): reversed, padded with 1s, folded above rank 4.
inline std::array<int64_t, 4> folded_ne(const int64_t* d, int rank) {
    std::array<int64_t, 4> n{1, 1, 1, 1};
    const int inner = rank < kGgmlRank ? rank : kGgmlRank - 1;
    for (int i = 0; i < inner; ++i) n[size_t(i)] = d[rank - 1 - i];
    if (rank >= kGgmlRank)
        for (int i = 0; i <= rank - kGgmlRank; ++i) n[3] *= d[i];
    return n;
}

// Same codes as dyngraph.fb.ExprOp.
enum class ExprOp : uint8_t { Const = 0, Symbol, Add, Sub, Mul, FloorDiv, Mod, Min, Max };
enum class Property : uint8_t { Variable = 0, Constant = 1, State = 2 };
enum class AttrType : uint8_t { Int = 0, Ints, Float, Floats, String, Exprs };

struct SymbolDef {
    std::string name;
    int64_t min = 1;
    int64_t max = INT64_MAX;
};

struct ExprNode {
    ExprOp op;
    int64_t a;
    int64_t b;
};

struct TensorDef {
    int64_t id = 0;
    std::string name;
    DType dtype = DType::F32;
    std::vector<int32_t> shape;  // expression node per logical dimension
    Property property = Property::Variable;
    Storage storage = Storage::Default;
    int32_t producer = -1;       // op index, or -1
    std::string label() const;   // "'name' (id 3)"
};

struct AttrDef {
    std::string name;
    AttrType type = AttrType::Int;
    std::vector<int64_t> ints;
    std::vector<double> floats;
    std::string str;
    std::vector<int32_t> exprs;
};

struct OpDef {
    int64_t id = 0;
    uint16_t kind = 0;
    std::string name;
    std::vector<int32_t> inputs;
    std::vector<int32_t> outputs;
    ops::OpAttrs attrs;  // the kind's attribute struct, read and checked once (generated/op_schema.h)
    std::vector<AttrDef> raw_attrs;  // the file's attribute list, kept only when parse() is asked to (read_ir)

    const ops::OpFacts& facts() const { return ops::kOpFacts[kind]; }
    std::string label() const;  // "op 'name' (Kind)"
};

// Same codes as dyngraph.fb.SourceKind.
enum class SourceKind : uint8_t { Dim = 0, Value = 1, Reshape = 2, Permute = 3, PermutedDim = 4 };

struct SourceDef {
    int32_t symbol;
    SourceKind kind;
    int32_t input;   // position in Program::inputs
    int32_t index;   // dimension, or flat element
    int64_t coeff;
    int32_t offset;  // expression node or -1
    int32_t ref;     // Reshape / Permute / PermutedDim: tensor index
    int64_t flag;    // Reshape: special_zero
};

struct GuardDef {
    int32_t lhs;
    int32_t rhs;
    std::string message;
};

struct DataRef {
    int32_t tensor;
    const uint8_t* data;
    size_t size;
};

struct Program {
    std::vector<SymbolDef> symbols;
    std::vector<ExprNode> exprs;
    std::vector<TensorDef> tensors;
    std::vector<OpDef> ops;
    std::vector<int32_t> inputs;
    std::vector<int32_t> outputs;
    std::vector<SourceDef> sources;
    std::vector<GuardDef> guards;
    std::vector<DataRef> data;  // points into the buffer given to parse()

    // Verify the FlatBuffer and check that every index is in range, ops come
    // in a valid order, and constant data has the right size. Throws IRError.
    // `buf` must be 8-byte aligned (see aligned_ir).
    // `keep_attrs` keeps each op's attributes as the file lists them (OpDef::raw_attrs).
    static Program parse(const uint8_t* buf, size_t size, bool keep_attrs = false);

    // Who reads each tensor, built at parse: the (op index, input index) pairs reading tensor t are
    // readers[reader_begin[t] .. reader_begin[t + 1]), in program order; is_output[t] when t is a
    // program output. The lowering asks "is this op the only reader?" per op: a scan of every op
    // each time made a rebuild quadratic in the ops.
    struct Reader {
        int32_t op;
        int32_t input;
    };
    std::vector<int32_t> reader_begin;
    std::vector<Reader> readers;
    std::vector<char> is_output;

    // Nodes whose value depends on no symbol, evaluated once at parse.
    std::vector<char> is_const;
    std::vector<int64_t> const_vals;

    // The value of a constant expression node (IRError if it is not one).
    int64_t const_value(int32_t node) const;
    // The shape of a CONSTANT or STATE tensor (static, checked at parse).
    std::vector<int64_t> static_shape(const TensorDef& t) const;

    // Human-readable expression, for error messages ("seq + 1"); long ones are cut.
    std::string expr_string(int32_t node) const;
};

// `buf`, or a copy of it in `copy` when `buf` is not 8-byte aligned (FlatBuffers
// reads its 8-byte scalars in place: the verifier checks their alignment
// relative to the buffer's start).
const uint8_t* aligned_ir(const uint8_t* buf, size_t size, class AlignedBuffer& copy);

// Bytes a tensor of this shape takes in ggml type `t` (rows of ne0 elements).
// Throws ShapeError when it is not representable or above limits::kMaxTensorBytes.
size_t storage_bytes(ggml_type t, const std::vector<int64_t>& shape);

// Bytes of a constant's data as the IR and the host hold it: its storage type,
// or for Default storage its dtype (i64 as 8 bytes, bool as 1).
size_t host_bytes(const TensorDef& t, const std::vector<int64_t>& shape);

// Checked element count of a shape (ShapeError on a non-positive dimension or overflow).
int64_t checked_numel(const std::vector<int64_t>& shape);

}  // namespace dg
