#include "lowering.h"

#include <algorithm>

#include "errors.h"
#include "gg.h"
#include "kernels/index_check.h"
#include "kernels/kernels.h"
#include "kernels/journal.h"
#include "lower/families.h"
#include "planner.h"
#include "remote.h"

namespace dg {

std::string Dims::str() const {
    std::string s = "[";
    for (int i = 0; i < rank; ++i) s += (i ? ", " : "") + std::to_string(d[i]);
    return s + "]";
}

Dims LowerCtx::shape_of(int32_t tensor) const {
    const TensorDef& t = prog.tensors[size_t(tensor)];
    Dims r;
    r.rank = int(t.shape.size());
    for (int i = 0; i < r.rank; ++i) r.d[i] = values[size_t(t.shape[size_t(i)])];
    return r;
}

void LowerCtx::unsupported(const std::string& why) const {
    fail<CompileError>("op '", op.name, "' cannot be lowered to ggml: ", why);
}

void LowerCtx::not_portable(const std::string& what) const {
    fail<NotOnDevice>(op.label(), " cannot run on device ", env.device, ": ", what,
                      " needs one of dyngraph's CPU kernels, which run on the host CPU only");
}

void LowerCtx::not_on_device(const std::string& what) const {
    fail<NotOnDevice>(op.label(), " cannot run on device ", env.device, ": its ggml backend has no ", what);
}

bool LowerCtx::device_supports(const ggml_tensor* t) const {
    return env.host || !env.backend || remote::backend_supports(env.backend, {t})[0];
}

void LowerCtx::internal_error(const std::string& why) const {
    fail<CompileError>("internal error in the lowering of ", op.label(), ": ", why);
}

ggml_tensor* LowerCtx::reshape(ggml_tensor* t, const Dims& shape) const {
    auto ne = shape.ne();
    if (t->ne[0] == ne[0] && t->ne[1] == ne[1] && t->ne[2] == ne[2] && t->ne[3] == ne[3]) return t;
    t = cont(t);
    return gg::reshape_4d(ctx, t, ne[0], ne[1], ne[2], ne[3]);
}

// Dense row-major strides. (ggml_is_contiguous accepts a permuted view when the
// permuted dimensions have size 1, but kernels such as mul_mat still reject it.)
bool is_dense(const ggml_tensor* t) {
    size_t nb = ggml_type_size(t->type);
    if (t->nb[0] != nb) return false;
    nb = t->nb[0] * size_t(t->ne[0] / ggml_blck_size(t->type));
    for (int i = 1; i < GGML_MAX_DIMS; ++i) {
        if (t->ne[i] > 1 && t->nb[i] != nb) return false;
        nb *= size_t(t->ne[i]);
    }
    return true;
}

ggml_tensor* LowerCtx::cont(ggml_tensor* t) const { return is_dense(t) ? t : gg::cont(ctx, t); }

// Whether tensor `t` is not a partition output and every (op, input index) reading it passes `ok`;
// how many readers it has goes to `readers`. Unless `any_placement`, only on the host CPU path of an
// unplaced partition.
template <class Ok>
static bool readers_all(const LowerCtx& c, int32_t t, Ok ok, int* readers, bool any_placement = false) {
    *readers = 0;
    if ((!any_placement && (!c.env.host || c.env.placed)) || c.prog.is_output[size_t(t)]) return false;
    for (int32_t r = c.prog.reader_begin[size_t(t)]; r < c.prog.reader_begin[size_t(t) + 1]; ++r) {
        const Program::Reader& at = c.prog.readers[size_t(r)];
        if (!ok(c.prog.ops[size_t(at.op)], size_t(at.input))) return false;
        ++*readers;
    }
    return true;
}

bool LowerCtx::output_read_only_by(size_t k, bool (*reads)(const OpDef& op, size_t input)) const {
    int readers = 0;
    return k < op.outputs.size() && readers_all(*this, op.outputs[k], reads, &readers) && readers > 0;
}

bool LowerCtx::output_viewed_only_by(size_t k, bool (*views)(const OpDef& op, size_t input)) const {
    int readers = 0;
    return k < op.outputs.size() && readers_all(*this, op.outputs[k], views, &readers, true) && readers > 0;
}

const OpDef* LowerCtx::producer_read_only_here(size_t k) const {
    if (k >= op.inputs.size()) return nullptr;
    const int32_t t = op.inputs[k];
    const int32_t made_by = prog.tensors[size_t(t)].producer;
    int readers = 0;
    auto here = [&](const OpDef& other, size_t i) { return &other == &op && i == k; };
    return made_by >= 0 && readers_all(*this, t, here, &readers, true) && readers == 1 ? &prog.ops[size_t(made_by)]
                                                                                      : nullptr;
}

bool LowerCtx::input_read_only_here(size_t k) const {
    int readers = 0;
    auto here = [&](const OpDef& other, size_t i) { return &other == &op && i == k; };
    return k < op.inputs.size() && readers_all(*this, op.inputs[k], here, &readers);
}

const OpDef* LowerCtx::only_reader(int32_t tensor, size_t* at) const {
    const OpDef* reader = nullptr;
    int readers = 0;
    auto note = [&](const OpDef& other, size_t i) {
        reader = &other;
        *at = i;
        return true;
    };
    return readers_all(*this, tensor, note, &readers) && readers == 1 ? reader : nullptr;
}

ggml_tensor* LowerCtx::cast(ggml_tensor* t, ggml_type type) const {
    return t->type == type ? t : gg::cast(ctx, t, type);
}

ggml_tensor* LowerCtx::permute(ggml_tensor* t, int rank, const int* perm) const {
    int dest[4] = {0, 1, 2, 3};
    bool identity = true;
    for (int i = 0; i < rank; ++i) {
        dest[ggml_dim(perm[i], rank)] = ggml_dim(i, rank);
        identity = identity && perm[i] == i;
    }
    return identity ? t : gg::permute(ctx, t, dest[0], dest[1], dest[2], dest[3]);
}

ggml_tensor* LowerCtx::transposed(ggml_tensor* t, const Dims& shape, const int* perm) const {
    if (shape.rank <= kGgmlRank) return cont(permute(t, shape.rank, perm));
    if (ggml_is_quantized(t->type)) unsupported(cat("a transpose of a ", ggml_type_name(t->type), " tensor of rank ", shape.rank));
    const Strided in = strides_of(t, shape);
    Strided out;
    out.rank = shape.rank;
    for (int i = 0; i < shape.rank; ++i) {
        out.ne[i] = in.ne[perm[i]];
        out.nb[i] = in.nb[perm[i]];
    }
    return gather_strided(t, out);
}

Strided LowerCtx::strides_of(const ggml_tensor* t, const Dims& shape) const {
    Strided s;
    s.rank = shape.rank;
    const int r = shape.rank;
    for (int a = 0; a < r; ++a) s.ne[a] = shape.d[a];
    if (r <= kGgmlRank) {
        for (int a = 0; a < r; ++a) s.nb[a] = int64_t(t->nb[ggml_dim(a, r)]);
        return s;
    }
    for (int a = r - 3; a < r; ++a) s.nb[a] = int64_t(t->nb[r - 1 - a]);
    // the outer axes are folded into ne[3]: the innermost of them steps by nb[3]
    s.nb[r - 4] = int64_t(t->nb[3]);
    for (int a = r - 5; a >= 0; --a) s.nb[a] = s.nb[a + 1] * shape.d[a + 1];
    return s;
}

ggml_tensor* LowerCtx::gather_strided(ggml_tensor* src, const Strided& s, int64_t offset_bytes) const {
    kernels::StridedCopy p;
    p.rank = s.rank;
    // every element read lies within src's bytes (the shapes and offsets come from the IR)
    int64_t last = offset_bytes, step = 0;
    bool ok = offset_bytes >= 0;
    for (int a = 0; a < s.rank; ++a) {
        p.ne[a] = s.ne[a];
        p.nb[a] = s.ne[a] == 1 ? 0 : s.nb[a];
        ok = ok && s.ne[a] >= 1 && p.nb[a] >= 0 && !__builtin_mul_overflow(s.ne[a] - 1, p.nb[a], &step) &&
             !__builtin_add_overflow(last, step, &last);
    }
    if (!ok || last + int64_t(ggml_type_size(src->type)) > int64_t(ggml_nbytes(src)))
        unsupported(cat("a strided read of ", s.rank, " axes at byte ", offset_bytes, " goes outside its source of ",
                        ggml_nbytes(src), " bytes"));
    p.offset = offset_bytes;
    const std::array<int64_t, 4> ne = folded_ne(s.ne, s.rank);
    return kernels::copy_strided(ctx, src, keep(p), ne.data());
}

ggml_tensor* LowerCtx::broadcast(ggml_tensor* t, const Dims& shape, const Dims& target) const {
    const Strided s = strides_of(t, shape);
    Strided b;
    b.rank = target.rank;
    const int lead = target.rank - s.rank;
    for (int a = 0; a < target.rank; ++a) {
        if (a >= lead && s.ne[a - lead] != 1 && s.ne[a - lead] != target.d[a])
            unsupported(cat(shape.str(), " does not broadcast to ", target.str()));
        b.ne[a] = target.d[a];
        b.nb[a] = a < lead || s.ne[a - lead] == 1 ? 0 : s.nb[a - lead];
    }
    return gather_strided(t, b);
}

ggml_tensor* LowerCtx::flatten_tail(ggml_tensor* t, const Dims& shape, int first) const {
    Dims m;
    m.rank = first + 1;
    for (int i = 0; i < first; ++i) m.d[i] = shape.d[i];
    int64_t inner = 1;
    for (int i = first; i < shape.rank; ++i) inner *= shape.d[i];
    m.d[first] = inner;
    return reshape(t, m);
}

ggml_tensor* LowerCtx::safe_indices(ggml_tensor* idx, int64_t limit, const std::string& what) const {
    if (const int* port = env.input_port.find(view_root(idx))) {
        env.host_checks.push_back({*port, limit, what});
        return idx;
    }
    if (!env.host) {
        // exact through f32 below 2^24 rows; a bad index is clamped into range (the device cannot refuse
        // the write) and counted, and the execution fails after the compute (DeviceIndexCheck)
        if (limit > (int64_t(1) << 24)) not_portable(cat(what, ": computed indices into ", limit, " rows"));
        ggml_tensor* f = gg::cast(ctx, cont(idx), GGML_TYPE_F32);
        ggml_tensor* flat = gg::reshape_1d(ctx, f, ggml_nelements(f));
        ggml_tensor* above = gg::unary(ctx, gg::Unary::Step, gg::scale_bias(ctx, flat, 1.0f, 0.5f - float(limit)));
        ggml_tensor* below = gg::unary(ctx, gg::Unary::Step, gg::scale_bias(ctx, flat, -1.0f, -0.5f));
        ggml_tensor* count = gg::sum_rows(ctx, gg::add(ctx, above, below));
        ggml_set_output(count);  // (kept until it is read)
        env.side_effects.push_back(count);
        env.device_checks.push_back({count, limit, what});
        return gg::cast(ctx, gg::clamp(ctx, f, 0.0f, float(limit - 1)), idx->type);
    }
    env.kernel_checks.push_back(std::make_unique<KernelIndexCheck>());
    KernelIndexCheck* chk = env.kernel_checks.back().get();
    chk->limit = limit;
    chk->what = what;
    return kernels::clamp_indices(ctx, cont(idx), chk);
}

bool LowerCtx::is_state(const ggml_tensor* t) const {
    return env.state.contains(view_root(const_cast<ggml_tensor*>(t)));
}

namespace {

// The shape of input k aligned right to the output's rank (leading 1s).
Dims aligned(const Dims& in, int rank) {
    Dims a;
    a.rank = rank;
    for (int i = 0; i < rank; ++i) a.d[i] = i < rank - in.rank ? 1 : in.d[i - (rank - in.rank)];
    return a;
}

// Groups of consecutive axes (of size > 1 in the output) that every input treats alike:
// all broadcast (size 1) or all full. Returns the number of groups; first[g] is the first axis of group g.
int merge_groups(const Dims& out, const std::vector<Dims>& ins, int first[kMaxRank + 1]) {
    int n = 0, prev = -1;
    for (int a = 0; a < out.rank; ++a) {
        if (out.d[a] == 1) continue;
        bool same = prev >= 0;
        for (const Dims& in : ins) same = same && (in.d[a] == 1) == (in.d[prev] == 1);
        if (!same) first[n++] = a;
        prev = a;
    }
    first[n] = out.rank;
    return n;
}

Dims merged(const Dims& d, int n, const int first[kMaxRank + 1]) {
    Dims m;
    m.rank = n == 0 ? 1 : n;  // a tensor of one element
    for (int g = 0; g < n; ++g) {
        m.d[g] = 1;
        // the group runs to the next group's first axis (size-1 output axes inside it count as 1)
        for (int a = first[g]; a < first[g + 1]; ++a) m.d[g] *= d.d[a];
    }
    if (n > 0) {  // size-1 output axes before the first group
        for (int a = 0; a < first[0]; ++a) m.d[0] *= d.d[a];
    }
    return m;
}

void lower_elementwise_merged(LowerCtx& c, LowerFn fn) {
    if (c.op.outputs.size() != 1) c.internal_error("an elementwise op with more than one output");
    const Dims out = c.out_shape(0);
    std::vector<Dims> ins;
    for (size_t k = 0; k < c.n_in(); ++k) ins.push_back(aligned(c.in_shape(k), out.rank));
    int first[kMaxRank + 1];
    int n = merge_groups(out, ins, first);
    if (n > kGgmlRank) {  // broadcast the inputs that need it by a copy: then every axis merges
        for (size_t k = 0; k < ins.size(); ++k) {
            bool full = true;
            for (int a = 0; a < out.rank; ++a) full = full && ins[k].d[a] == out.d[a];
            if (full) continue;
            c.in[k] = c.broadcast(c.in[k], c.in_shape(k), out);
            ins[k] = out;
        }
        n = merge_groups(out, ins, first);
    }
    std::vector<Dims> in_dims;
    for (size_t k = 0; k < ins.size(); ++k) {
        in_dims.push_back(merged(ins[k], n, first));
        c.in[k] = c.reshape(c.in[k], in_dims.back());
    }
    const Dims out_dims = merged(out, n, first);
    c.in_dims = in_dims.data();
    c.out_dims = &out_dims;
    fn(c);
    c.in_dims = c.out_dims = nullptr;
    if (c.out.size() == 1) c.out[0] = c.reshape(c.out[0], out);
}

}  // namespace

void lower_any_rank(LowerCtx& c, LowerFn fn) {
    int rank = 0;
    for (size_t k = 0; k < c.n_in(); ++k) rank = std::max(rank, c.in_shape(k).rank);
    for (size_t k = 0; k < c.op.outputs.size(); ++k) rank = std::max(rank, c.out_shape(k).rank);
    if (rank <= kGgmlRank) return fn(c);
    switch (c.op.facts().high_rank) {
        case ops::HighRank::Lowering: return fn(c);
        case ops::HighRank::Elementwise: return lower_elementwise_merged(c, fn);
        case ops::HighRank::No: break;
    }
    c.unsupported(cat("its tensors have rank ", rank, "; ", c.op.facts().name, " takes rank 4 at most"));
}

ggml_tensor* LowerCtx::write_state_rows(ggml_tensor* dst, ggml_tensor* src, ggml_tensor* idx) const {
    ++env.state_writes;
    if (env.journal) return kernels::journaled_set_rows(ctx, dst, src, idx, env.journal);
    return gg::set_rows(ctx, dst, src, idx);
}

ggml_tensor* LowerCtx::write_state_view(ggml_tensor* src, ggml_tensor* view) const {
    ++env.state_writes;
    if (env.journal) return kernels::journaled_copy(ctx, cast(cont(src), view->type), view, env.journal);
    return gg::cpy(ctx, src, view);
}

void LoweringTable::add(uint16_t kind, LowerFn fn) {
    if (table_.size() <= kind) table_.resize(size_t(kind) + 1);
    table_[kind] = Lowering{fn};
}

const Lowering* LoweringTable::find(uint16_t kind) const {
    return kind < table_.size() && table_[kind].fn ? &table_[kind] : nullptr;
}

std::vector<int> LoweringTable::kinds() const {
    std::vector<int> k;
    for (size_t i = 0; i < table_.size(); ++i)
        if (table_[i].fn) k.push_back(int(i));
    return k;
}

const LoweringTable& lowerings() {
    static const LoweringTable table = [] {
        LoweringTable t;
        register_elementwise(t);
        register_matmul(t);
        register_norm(t);
        register_reduce(t);
        register_layout(t);
        register_indexing(t);
        register_dynamic_shape(t);
        register_generate(t);
        register_compare(t);
        register_attention(t);
        register_rope(t);
        // vision / audio
        register_conv(t);
        register_pool(t);
        register_channel_norm(t);
        register_interpolate(t);
        register_quantize(t);  // (opsquant)
        register_sort(t);
        register_scatter(t);
        register_moe(t);
        return t;
    }();
    return table;
}

}  // namespace dg
