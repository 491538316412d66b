#include "lowering.h"

#include "errors.h"
#include "gg.h"
#include "kernels/index_check.h"
#include "kernels/journal.h"
#include "lower/families.h"
#include "planner.h"

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
static bool dense(const ggml_tensor* t) {
    size_t nb = ggml_type_size(t->type);
    if (t->nb[0] != nb) return false;
    nb = t->nb[0] * size_t(t->ne[0] / ggml_blck_size(t->type));
    for (int i = 1; i < GGML_MAX_DIMS; ++i) {
        if (t->ne[i] > 1 && t->nb[i] != nb) return false;
        nb *= size_t(t->ne[i]);
    }
    return true;
}

ggml_tensor* LowerCtx::cont(ggml_tensor* t) const { return dense(t) ? t : gg::cont(ctx, t); }

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
    env.kernel_checks.push_back(std::make_unique<KernelIndexCheck>());
    KernelIndexCheck* chk = env.kernel_checks.back().get();
    chk->limit = limit;
    chk->what = what;
    return kernels::clamp_indices(ctx, cont(idx), chk);
}

bool LowerCtx::is_state(const ggml_tensor* t) const {
    return env.state.contains(view_root(const_cast<ggml_tensor*>(t)));
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
        return t;
    }();
    return table;
}

}  // namespace dg
