#include "builder.h"

#include <chrono>
#include <unordered_map>

#include "errors.h"

namespace dg {

BuiltGraph::~BuiltGraph() {
    if (ctx) ggml_free(ctx);
}

namespace {

ggml_tensor* new_tensor(ggml_context* ctx, ggml_type type, const Dims& s) {
    auto ne = s.ne();
    return ggml_new_tensor_4d(ctx, type, ne[0], ne[1], ne[2], ne[3]);
}

void check_lowered(const LowerCtx& lc, size_t k, const ggml_tensor* t) {
    const TensorDef& def = lc.prog.tensors[size_t(lc.op.outputs[k])];
    Dims want = lc.out_shape(k);
    auto ne = want.ne();
    ggml_type type = ggml_type_of(def.dtype);
    bool ok = t != nullptr && t->type == type;
    for (int d = 0; ok && d < 4; ++d) ok = t->ne[d] == ne[size_t(d)];
    if (!ok) {
        std::string got = t ? cat("ne [", t->ne[0], ", ", t->ne[1], ", ", t->ne[2], ", ", t->ne[3], "] ", ggml_type_name(t->type))
                            : std::string("nothing");
        fail<CompileError>("internal error: the lowering of op '", lc.op.name, "' produced ", got, " for output ",
                           def.label(), ", which the IR says is ", want.str(), " ", dtype_name(def.dtype));
    }
}

}  // namespace

std::unique_ptr<BuiltGraph> build_graph(const Program& prog, const ResidentTensors& resident, const Binding& b,
                                        const BuildOptions& opts) {
    auto t0 = std::chrono::steady_clock::now();
    const LoweringTable& table = lowerings();
    size_t budget = prog.inputs.size() + 2 * prog.outputs.size() + 16;
    std::vector<const Lowering*> fns;
    fns.reserve(prog.ops.size());
    for (const OpDef& op : prog.ops) {
        const Lowering* l = table.find(op.kind);
        if (!l) fail<CompileError>("op '", op.name, "': the backend has no lowering for op kind ", op.kind);
        fns.push_back(l);
        budget += size_t(l->max_tensors) + 4 * op.inputs.size();
    }
    const size_t graph_size = budget;
    auto g = std::make_unique<BuiltGraph>();
    g->key = b.symbols;
    ggml_init_params ip{budget * ggml_tensor_overhead() + ggml_graph_overhead_custom(graph_size, false) + 4096, nullptr, true};
    g->ctx = ggml_init(ip);
    if (!g->ctx) fail<ExecutionError>("ggml_init failed (", ip.mem_size, " bytes of graph metadata)");
    ggml_context* ctx = g->ctx;

    std::vector<ggml_tensor*> vals(prog.tensors.size(), nullptr);
    for (size_t i = 0; i < prog.tensors.size(); ++i)
        if (prog.tensors[i].property != Property::Variable) vals[i] = resident.tensor(int32_t(i));

    BuildEnv env;
    for (size_t i = 0; i < prog.tensors.size(); ++i)
        if (prog.tensors[i].property == Property::State) env.state.insert(vals[i]);
    std::unordered_set<const ggml_tensor*> external;
    std::unordered_map<const ggml_tensor*, std::pair<bool, int>> port_of;
    for (size_t k = 0; k < prog.inputs.size(); ++k) {
        const TensorDef& t = prog.tensors[size_t(prog.inputs[k])];
        Dims s;
        s.rank = int(t.shape.size());
        for (int d = 0; d < s.rank; ++d) s.d[d] = b.values[size_t(t.shape[size_t(d)])];
        ggml_tensor* leaf = new_tensor(ctx, ggml_type_of(t.dtype), s);
        ggml_format_name(leaf, "in%zu", k);
        ggml_set_input(leaf);
        vals[size_t(prog.inputs[k])] = leaf;
        g->inputs.push_back(leaf);
        external.insert(leaf);
        port_of[leaf] = {false, int(k)};
        env.input_port[leaf] = int(k);
    }

    for (size_t k = 0; k < prog.ops.size(); ++k) {
        const OpDef& op = prog.ops[k];
        LowerCtx lc{ctx, prog, op, b.values, {}, {}, env};
        lc.in.reserve(op.inputs.size());
        for (int32_t i : op.inputs) lc.in.push_back(vals[size_t(i)]);
        fns[k]->fn(lc);
        if (lc.out.size() != op.outputs.size())
            fail<CompileError>("internal error: the lowering of op '", op.name, "' produced ", lc.out.size(), " outputs, expected ",
                               op.outputs.size());
        for (size_t j = 0; j < op.outputs.size(); ++j) {
            check_lowered(lc, j, lc.out[j]);
            vals[size_t(op.outputs[j])] = lc.out[j];
        }
    }

    std::vector<ggml_tensor*> roots;
    for (size_t j = 0; j < prog.outputs.size(); ++j) {
        ggml_tensor* t = vals[size_t(prog.outputs[j])];
        bool direct = t->op != GGML_OP_NONE && t->view_src == nullptr && ggml_is_contiguous(t) && !external.count(t);
        ggml_tensor* holder = t;
        ggml_tensor* node = t;
        if (!direct) {
            holder = ggml_new_tensor(ctx, t->type, 4, t->ne);
            node = ggml_cpy(ctx, t, holder);
        }
        ggml_format_name(holder, "out%zu", j);
        ggml_set_output(holder);
        external.insert(holder);
        port_of[holder] = {true, int(j)};
        g->outputs.push_back(holder);
        roots.push_back(node);
        const TensorDef& def = prog.tensors[size_t(prog.outputs[j])];
        Dims s;
        s.rank = int(def.shape.size());
        for (int d = 0; d < s.rank; ++d) s.d[d] = b.values[size_t(def.shape[size_t(d)])];
        g->output_shapes.push_back(s);
    }

    g->graph = ggml_new_graph_custom(ctx, graph_size, false);
    for (ggml_tensor* r : roots) ggml_build_forward_expand(g->graph, r);
    for (ggml_tensor* s : env.side_effects) ggml_build_forward_expand(g->graph, s);
    g->host_checks = std::move(env.host_checks);
    g->kernel_checks = std::move(env.kernel_checks);

    for (ggml_tensor* leaf : g->inputs) g->external.push_back({leaf, false, port_of[leaf].second, 0});
    for (ggml_tensor* holder : g->outputs) g->external.push_back({holder, true, port_of[holder].second, 0});
    const int n_nodes = ggml_graph_n_nodes(g->graph);
    for (int i = 0; i < n_nodes; ++i) {
        ggml_tensor* t = ggml_graph_node(g->graph, i);
        size_t off = 0;
        ggml_tensor* r = view_root(t, &off);
        if (r != t && external.count(r)) g->external.push_back({t, port_of[r].first, port_of[r].second, off});
    }
    g->plan = plan_memory(g->graph, external, opts.align);
    g->cplan = ggml_graph_plan(g->graph, opts.n_threads, opts.threadpool);
    g->build_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return g;
}

}  // namespace dg
