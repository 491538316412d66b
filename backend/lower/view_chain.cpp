#include "view_chain.h"

#include "../generated/dyngraph_ir_generated.h"
#include "../gg.h"

namespace dg {

namespace {

using K = dyngraph::fb::OpKind;

// Ops walked through, at most: a chain longer than this starts where the walk stopped.
constexpr size_t kMaxChain = 16;

// A logical tensor as a strided view of X: each axis (outermost first) a list of sub-dimensions
// (size, byte stride), outermost first. A reshape that merges axes which do not step as one keeps
// their sub-dimensions; a later reshape may split them apart again, which one strided view can say
// where a ggml tensor of the intermediate shape could not.
struct Layout {
    struct Sub {
        int64_t n, s;
    };
    std::vector<std::vector<Sub>> axes;
    int64_t offset = 0;  // bytes from X's data

    static Layout of(const ggml_tensor* x, const Dims& d) {
        Layout l;
        l.axes.resize(size_t(d.rank));
        for (int a = 0; a < d.rank; ++a)
            if (d.d[a] != 1) l.axes[size_t(a)].push_back({d.d[a], int64_t(x->nb[ggml_dim(a, d.rank)])});
        return l;
    }

    void transpose(const int* perm) {
        std::vector<std::vector<Sub>> t(axes.size());
        for (size_t i = 0; i < axes.size(); ++i) t[i] = axes[size_t(perm[i])];
        axes = std::move(t);
    }

    // `count` elements of axis a from `start`, every `step`-th.
    bool slice(size_t a, int64_t start, int64_t step, int64_t count) {
        std::vector<Sub>& subs = axes[a];
        if (count == 1) {  // one element: its offset
            int64_t rest = start;
            for (size_t k = subs.size(); k-- > 0;) {
                offset += (rest % subs[k].n) * subs[k].s;
                rest /= subs[k].n;
            }
            subs.clear();
            return true;
        }
        if (subs.size() == 1) {
            offset += start * subs[0].s;
            subs[0] = {count, subs[0].s * step};
            return true;
        }
        // several: whole steps of the outermost only
        int64_t inner = 1;
        for (size_t k = 1; k < subs.size(); ++k) inner *= subs[k].n;
        if (step != 1 || start % inner != 0 || count % inner != 0) return false;
        offset += (start / inner) * subs[0].s;
        subs[0].n = count / inner;
        return true;
    }

    // The same elements in row-major order as axes of sizes d[0..rank).
    bool reshape(const Dims& d) {
        std::vector<Sub> q = flat_subs();
        size_t next = 0;
        std::vector<std::vector<Sub>> out(size_t(d.rank));
        for (int a = 0; a < d.rank; ++a) {
            int64_t want = d.d[a];
            while (want > 1) {
                if (next == q.size()) return false;
                Sub& f = q[next];
                if (want % f.n == 0) {  // the whole sub-dimension
                    out[size_t(a)].push_back(f);
                    want /= f.n;
                    ++next;
                } else if (f.n % want == 0) {  // its outer part; the inner one goes on
                    out[size_t(a)].push_back({want, f.s * (f.n / want)});
                    f.n /= want;
                    want = 1;
                } else {
                    return false;
                }
            }
        }
        if (next != q.size()) return false;
        axes = std::move(out);
        return true;
    }

    std::vector<Sub> flat_subs() const {
        std::vector<Sub> q;
        for (const auto& subs : axes)
            for (const Sub& s : subs)
                if (s.n != 1) q.push_back(s);
        return q;
    }

    // Every sub-dimension in order, neighbours that step as one merged.
    std::vector<Sub> merged() const {
        std::vector<Sub> m;
        for (const Sub& s : flat_subs()) {
            if (!m.empty() && m.back().s == s.n * s.s) m.back() = {m.back().n * s.n, s.s};
            else m.push_back(s);
        }
        return m;
    }
};

bool view_op(const OpDef& op) {
    return op.kind == uint16_t(K::StaticReshape) || op.kind == uint16_t(K::StaticTranspose) ||
           op.kind == uint16_t(K::Slice);
}

// Apply one op of the chain (input shape `in`, output shape `out`) to the layout.
bool apply(const LowerCtx& c, const OpDef& op, const Dims& in, const Dims& out, Layout& l) {
    if (op.kind == uint16_t(K::StaticReshape)) return l.reshape(out);
    if (op.kind == uint16_t(K::StaticTranspose)) {
        const auto* a = std::get_if<ops::StaticTransposeAttrs>(&op.attrs);
        if (!a) return false;
        int perm[kMaxRank] = {0, 1, 2, 3, 4, 5};
        for (int i = 0; i < in.rank; ++i) {
            const int64_t p = a->order.empty() ? in.rank - 1 - i : a->order[size_t(i)];
            perm[i] = int(p < 0 ? p + in.rank : p);
            if (perm[i] < 0 || perm[i] >= in.rank) return false;
        }
        l.transpose(perm);
        return true;
    }
    const auto* a = std::get_if<ops::SliceAttrs>(&op.attrs);
    if (!a || a->starts.size() != size_t(in.rank) || a->strides.size() != size_t(in.rank)) return false;
    for (int ax = 0; ax < in.rank; ++ax) {
        const int64_t start = c.eval(a->starts[size_t(ax)]), step = a->strides[size_t(ax)], count = out.d[ax];
        if (start == 0 && step == 1 && count == in.d[ax]) continue;
        // the shape rule resolved these; a slice reaching past the axis is not composed
        int64_t last = 0;
        if (start < 0 || step < 1 || count < 1 || __builtin_mul_overflow(count - 1, step, &last) ||
            __builtin_add_overflow(last, start, &last) || last >= in.d[ax])
            return false;
        if (!l.slice(size_t(ax), start, step, count)) return false;
    }
    return true;
}

}  // namespace

ggml_tensor* composed_copy(const LowerCtx& c) {
    const std::vector<ggml_tensor*>* vals = c.env.vals;
    if (!vals || !c.env.host || c.env.placed || c.in_dims || c.out_dims) return nullptr;
    const Dims out = c.out_shape(0);
    if (out.rank > kGgmlRank || out.numel() == 0) return nullptr;
    // back from the op's input through view ops of rank <= 4, to X: the first tensor not made by one
    const OpDef* chain[kMaxChain] = {&c.op};
    size_t n = 1;
    bool copied = false;  // another transpose on the way (a copy this saves)
    int32_t x = c.op.inputs[0];
    while (n < kMaxChain) {
        const int32_t p = c.prog.tensors[size_t(x)].producer;
        if (p < 0 || !view_op(c.prog.ops[size_t(p)])) break;
        const OpDef& op = c.prog.ops[size_t(p)];
        if (c.prog.tensors[size_t(op.inputs[0])].shape.size() > size_t(kGgmlRank) ||
            c.prog.tensors[size_t(x)].shape.size() > size_t(kGgmlRank))
            break;
        copied = copied || op.kind == uint16_t(K::StaticTranspose);
        chain[n++] = &op;
        x = op.inputs[0];
    }
    if (!copied) return nullptr;
    ggml_tensor* base = (*vals)[size_t(x)];
    const Dims xd = c.shape_of(x);
    if (!base || xd.rank > kGgmlRank || c.is_state(base) || ggml_blck_size(base->type) != 1 ||
        base->type != ggml_type_of(c.out_dtype(0)))
        return nullptr;
    const auto xne = xd.ne();
    for (int g = 0; g < 4; ++g)
        if (base->ne[g] != xne[size_t(g)]) return nullptr;

    Layout l = Layout::of(base, xd);
    for (size_t k = n; k-- > 0;) {
        const OpDef& op = *chain[k];
        if (!apply(c, op, c.shape_of(op.inputs[0]), c.shape_of(op.outputs[0]), l)) return nullptr;
    }
    const std::vector<Layout::Sub> m = l.merged();
    const size_t elem = ggml_type_size(base->type);
    if (m.size() > 4 || (!m.empty() && m.back().s != int64_t(elem))) return nullptr;
    // the sub-dimensions as ggml dims (innermost first); one copy where they are not dense already
    int64_t ne[4] = {1, 1, 1, 1};
    size_t nb[4] = {elem, elem, elem, elem};
    for (size_t i = 0; i < m.size(); ++i) {
        ne[i] = m[m.size() - 1 - i].n;
        nb[i] = size_t(m[m.size() - 1 - i].s);
    }
    bool dense = true;
    for (int g = 1; g < 4; ++g) {
        if (ne[g] == 1) nb[g] = nb[g - 1] * size_t(ne[g - 1]);
        dense = dense && nb[g] == nb[g - 1] * size_t(ne[g - 1]);
    }
    // ggml measures a view by its offset and its dense size (ggml_view_4d aborts past the buffer, and
    // gg::view_4d refuses it). This view passes: its elements are distinct addresses of X from its
    // offset on. Checked, not assumed: one that did not would go the usual way, not fail the build.
    const ggml_tensor* root = base->view_src ? base->view_src : base;
    const size_t start = (base->view_src ? base->view_offs : 0) + size_t(l.offset);
    if (start + size_t(ne[0] * ne[1] * ne[2] * ne[3]) * elem > ggml_nbytes(root)) return nullptr;
    ggml_tensor* v = gg::view_4d(c.ctx, base, ne[0], ne[1], ne[2], ne[3], nb[1], nb[2], nb[3], size_t(l.offset));
    if (!dense) v = gg::cont(c.ctx, v);
    const auto one = out.ne();
    return gg::reshape_4d(c.ctx, v, one[0], one[1], one[2], one[3]);
}

}  // namespace dg
