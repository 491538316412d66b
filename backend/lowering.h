// Lowering: one small function per op kind turns an IR op into ggml tensors.
//
// Logical shapes are numpy order (outermost first); ggml's ne[] is the
// reverse (ne[0] is the innermost). Axis `a` of a rank-r tensor is ggml
// dimension r-1-a. Helpers below do the conversions.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "derived_constants.h"
#include "dtype.h"
#include "errors.h"
#include "ggml-backend.h"
#include "ggml.h"
#include "program.h"
#include "ptr_map.h"

namespace dg {

struct Dims {
    int rank = 0;
    int64_t d[kMaxRank] = {1, 1, 1, 1, 1, 1};

    int64_t operator[](int i) const { return d[i]; }
    int64_t numel() const {
        int64_t n = 1;
        for (int i = 0; i < rank; ++i) n *= d[i];
        return n;
    }
    // ggml ne[] (reversed, padded with 1s; above rank 4 the outer axes folded into ne[3])
    std::array<int64_t, 4> ne() const { return folded_ne(d, rank); }
    std::string str() const;
};

// ggml dimension of logical axis `axis` in a tensor of rank `rank` (<= 4).
inline int ggml_dim(int axis, int rank) { return rank - 1 - axis; }

// A logical tensor as sizes and byte strides per axis (numpy order, rank <= 6),
// over the data of a ggml tensor. Strides of 0 broadcast.
struct Strided {
    int rank = 0;
    int64_t ne[kMaxRank] = {1, 1, 1, 1, 1, 1};
    int64_t nb[kMaxRank] = {0, 0, 0, 0, 0, 0};
};

// Index values a graph reads (Gather, ScatterRows) must lie in [0, limit):
// ggml would abort on one that does not. Indices that come straight from a
// runtime input are checked on the host before computing (nothing is written
// when they are bad); computed ones are clamped by a kernel that records the
// first bad value, reported after the compute.
struct HostIndexCheck {
    int port;        // runtime input
    int64_t limit;
    std::string what;
};

// On a device (no kernel of ours there), computed indices are clamped by ggml ops and counted: `count`
// (one f32, computed with the graph) holds how many were outside [0, limit), read after the compute.
struct DeviceIndexCheck {
    ggml_tensor* count = nullptr;
    int64_t limit = 0;
    std::string what;
};

struct KernelIndexCheck {
    int64_t limit = 0;
    std::string what;
    std::atomic<bool> bad{false};
    std::atomic<int64_t> value{0};
};

namespace kernels {
class Journal;
}

// What the lowerings of one graph share.
struct BuildEnv {
    PtrMap<int> input_port;  // runtime input leaves -> input position
    PtrMap<char> state;      // the partition's state tensors
    std::vector<ggml_tensor*> side_effects;                  // computed even when nothing reads them
    std::vector<HostIndexCheck> host_checks;
    std::vector<std::unique_ptr<KernelIndexCheck>> kernel_checks;
    std::vector<DeviceIndexCheck> device_checks;
    std::vector<std::shared_ptr<const void>> kept;  // parameters our kernels point to (live as long as the graph)
    int state_writes = 0;              // in-place writes into state
    kernels::Journal* journal = nullptr;  // when set, state writes save what they overwrite (see kernels/journal.h)
    // Where the op being lowered runs: the host CPU (dyngraph's kernels as ggml custom ops may be used,
    // tensors' data is host memory) or another device (portable ggml ops only; its name for messages).
    bool host = true;
    bool placed = false;  // the partition runs on devices (a placement): no output is left a view for its readers
    // Unplaced partitions: every tensor's ggml value so far, by tensor index (what a lowering may read
    // back to: lower/view_chain.h); nullptr in device mode.
    const std::vector<ggml_tensor*>* vals = nullptr;
    // Unplaced partitions: tensors computed once from its constants (derived_constants.h); else nullptr.
    DerivedConstants* derived = nullptr;
    std::string device;
    ggml_backend_t backend = nullptr;  // device mode: the op's device (lowerings may ask what it supports)
    // Ops whose work the kernel that made one of their inputs did too (LowerCtx::absorb): the builder
    // passes that input on as their output instead of lowering them.
    struct Absorbed {
        const OpDef* op;
        size_t input;  // the builder passes this input of the op on as its output
    };
    std::vector<Absorbed> absorbed;
    // RoPE: per-batch positions [S, B] flattened into one vector, made once per positions tensor (on a
    // device each view of an input in host memory is an input of its own to the scheduler's split)
    PtrMap<ggml_tensor*> flat_positions;
    // Attention on a device: the additive mask (and its f16 copy for flash attention) a mask input (or
    // the causal cut alone: src nullptr) becomes at these sizes, made once and read by every attention
    // that reads that mask (a decoder's layers) instead of a cast and a log per layer
    struct DeviceMask {
        const ggml_tensor* src;
        int64_t skv, sq;
        bool causal;
        ggml_tensor* f32;
        ggml_tensor* f16;
    };
    std::vector<DeviceMask> device_masks;
};

// Thrown by a lowering (or the builder's check of what it made) when the op
// cannot run on the device it was placed on: the builder then places it on the
// host CPU, unless the partition was compiled with strict placement.
struct NotOnDevice : CompileError {
    using CompileError::CompileError;
};

// Dense row-major strides (what cont() makes; ggml_is_contiguous also accepts size-1 dims permuted).
bool is_dense(const ggml_tensor* t);

struct LowerCtx {
    ggml_context* ctx;
    const Program& prog;
    const OpDef& op;
    const std::vector<int64_t>& values;  // every expression node, evaluated
    std::vector<ggml_tensor*>& in;       // the op's inputs
    std::vector<ggml_tensor*>& out;      // set by the lowering, one per op output
    BuildEnv& env;
    // Shapes the lowering sees instead of the IR's (an elementwise op of rank > 4 with its axes merged).
    const Dims* in_dims = nullptr;
    const Dims* out_dims = nullptr;

    int64_t eval(int32_t expr) const { return values[size_t(expr)]; }
    Dims shape_of(int32_t tensor) const;
    Dims in_shape(size_t k) const { return in_dims ? in_dims[k] : shape_of(op.inputs[k]); }
    Dims out_shape(size_t k) const { return out_dims ? out_dims[k] : shape_of(op.outputs[k]); }
    DType in_dtype(size_t k) const { return prog.tensors[size_t(op.inputs[k])].dtype; }
    DType out_dtype(size_t k) const { return prog.tensors[size_t(op.outputs[k])].dtype; }
    size_t n_in() const { return op.inputs.size(); }
    // Whether the op runs on the host CPU: our kernels (custom ops) only there, portable ggml ops elsewhere.
    bool host() const { return env.host; }
    // CompileError naming the op and the device: this lowering has no portable form for `what`.
    [[noreturn]] void not_portable(const std::string& what) const;
    // CompileError naming the op and the device: the device's ggml backend has no `what` (a GPU backend
    // implements a subset of ggml's ops and types; ggml_backend_supports_op says which).
    [[noreturn]] void not_on_device(const std::string& what) const;
    // Device mode: whether the op's device computes `t` (ggml_backend_supports_op; always on the host).
    bool device_supports(const ggml_tensor* t) const;

    // The op's attributes (its kind's struct in generated/op_schema.h, read and checked at parse).
    template <class T>
    const T& attrs() const {
        if (const T* a = std::get_if<T>(&op.attrs)) return *a;
        internal_error("its attributes were read for another op kind");
    }

    // Lowering failures are bugs or unsupported attribute combinations: CompileError.
    [[noreturn]] void unsupported(const std::string& why) const;
    [[noreturn]] void internal_error(const std::string& why) const;

    // Reshape `t` (contiguous) to a logical shape.
    ggml_tensor* reshape(ggml_tensor* t, const Dims& shape) const;
    // Make `t` contiguous (a copy when it is a permuted/strided view).
    ggml_tensor* cont(ggml_tensor* t) const;
    // Cast to a ggml type (no-op when equal).
    ggml_tensor* cast(ggml_tensor* t, ggml_type type) const;
    // Logical transpose (a view): out axis i = in axis perm[i], for a rank-`rank` tensor (<= 4).
    ggml_tensor* permute(ggml_tensor* t, int rank, const int* perm) const;
    // Logical transpose of a tensor of rank <= 6 (shape `shape`), made dense in the
    // output's folded layout: ggml's permute where merging the axes that stay
    // together leaves 4 or fewer, else our strided copy.
    ggml_tensor* transposed(ggml_tensor* t, const Dims& shape, const int* perm) const;
    // The sizes and byte strides of each logical axis of `t`, which holds a tensor of shape `shape`.
    Strided strides_of(const ggml_tensor* t, const Dims& shape) const;
    // A dense tensor (folded layout of s's shape) with the elements s describes, read from src's data.
    ggml_tensor* gather_strided(ggml_tensor* src, const Strided& s, int64_t offset_bytes = 0) const;
    // `t` (of shape `shape`) broadcast numpy-style to `target` (rank >= shape's), as a dense copy.
    ggml_tensor* broadcast(ggml_tensor* t, const Dims& shape, const Dims& target) const;
    // Keep `v` alive as long as the graph (kernel parameters); returns its address.
    template <class T>
    const T* keep(T v) const {
        auto p = std::make_shared<const T>(std::move(v));
        env.kept.push_back(p);
        return p.get();
    }
    // Merge logical axes [first, rank) into one innermost axis: (outer..., prod) as ggml ne.
    ggml_tensor* flatten_tail(ggml_tensor* t, const Dims& shape, int first) const;
    // Indices (I32) safe to hand to ggml_get_rows / ggml_set_rows for a dimension of `limit`.
    ggml_tensor* safe_indices(ggml_tensor* idx, int64_t limit, const std::string& what) const;
    // Whether `t` is (a view of) one of the partition's state tensors.
    bool is_state(const ggml_tensor* t) const;
    // In-place writes into state (dst is state or a view of it): rows of src at
    // indices idx (ggml_set_rows), src into a view. Journaled when the graph
    // needs them undoable.
    ggml_tensor* write_state_rows(ggml_tensor* dst, ggml_tensor* src, ggml_tensor* idx) const;
    ggml_tensor* write_state_view(ggml_tensor* src, ggml_tensor* view) const;
    // Whether the op's output `k` may stay a view (not made dense) for its readers: the host CPU path
    // of an unplaced partition, not a partition output, and every op that reads it passes
    // `reads(op, input index)`.
    bool output_read_only_by(size_t k, bool (*reads)(const OpDef& op, size_t input)) const;
    // The same question in any placement, for readers that only view the output (a transpose): where
    // they run, what they hand on is a view of it (ggml's scheduler copies a view's span to another device).
    bool output_viewed_only_by(size_t k, bool (*views)(const OpDef& op, size_t input)) const;
    // The op that made input `k`, when this op reads that tensor once and nothing else does (not a
    // partition output), in any placement: a lowering may then compute the two as one ggml op, reading
    // the producer's own inputs (its ggml node is left unused); else nullptr.
    const OpDef* producer_read_only_here(size_t k) const;
    // Whether the op's input `k` is read by this op alone (no other op, not a partition output), on
    // the host CPU path of an unplaced partition: what made it may be folded into this op.
    bool input_read_only_here(size_t k) const;
    // The one op that reads `tensor` (once, at its input *at), on the host CPU path of an unplaced
    // partition, when the tensor is not a partition output; else nullptr.
    const OpDef* only_reader(int32_t tensor, size_t* at) const;
    // The kernel this lowering makes computes `reader` too, whose input `input` is a tensor of the
    // reader's output shape and type that this kernel computes: the builder passes that input on as the
    // reader's output (an activation's one input; the Add of a residual, at the input that is dst).
    void absorb(const OpDef& reader, size_t input = 0) const { env.absorbed.push_back({&reader, input}); }
};

using LowerFn = void (*)(LowerCtx&);

struct Lowering {
    LowerFn fn = nullptr;
};

class LoweringTable {
public:
    void add(uint16_t kind, LowerFn fn);
    const Lowering* find(uint16_t kind) const;
    std::vector<int> kinds() const;

private:
    std::vector<Lowering> table_;
};

// The table every lowering module registers into (lower/*.cpp).
const LoweringTable& lowerings();

// Run `fn`, the lowering of an op of rank <= 4, on an op whose tensors have a rank
// up to 6, by the op kind's trait (OpFacts::high_rank): an elementwise op (its
// inputs broadcast to its one output, numpy style) sees its axes merged where
// every input is broadcast on both or on neither - an input that still leaves
// more than 4 groups is first broadcast by a copy - and its output is folded
// back; a kind whose lowering handles rank 6 itself runs as it is; any other
// is a CompileError naming the op.
void lower_any_rank(LowerCtx& c, LowerFn fn);

}  // namespace dg
