#include "builder.h"

#include <algorithm>
#include <chrono>

#include "errors.h"
#include "gg.h"
#include "ir_limits.h"
#include "remote.h"

namespace dg {

namespace {

// A scheduler holds compute buffers on its devices: freed while they live, leaked when one was lost.
void free_sched(BuiltGraph& g) {
    if (!g.sched) return;
    ggml_backend_sched_t s = g.sched;
    g.sched = nullptr;
    for (const remote::Connection* c : g.conns)
        if (c->dead()) return;
    try {
        remote::guarded(g.conns, "freeing a graph's buffers", [&] { ggml_backend_sched_free(s); });
    } catch (...) {
    }
}

}  // namespace

BuiltGraph::~BuiltGraph() {
    free_sched(*this);
    if (ctx) ggml_free(ctx);
}

AlignedBuffer BuiltGraph::release_metadata() {
    free_sched(*this);
    if (ctx) ggml_free(ctx);  // the context does not own the buffer it was given
    ctx = nullptr;
    graph = nullptr;
    return std::move(meta);
}

namespace {

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

namespace {

// Device mode: a scheduler of the graph's own over the placement's backends, every node of an op on
// the op's device, then split and allocated (compute buffers on each device, copies between them).
void schedule(BuiltGraph& g, const Placement& pl, PtrMap<int>& node_slot) {
    std::vector<ggml_backend_t> backends;
    for (const DeviceSlot& s : pl.slots) backends.push_back(s.backend);
    const size_t n = size_t(ggml_graph_size(g.graph));
    g.conns = pl.conns;
    g.sched = ggml_backend_sched_new(backends.data(), nullptr, int(backends.size()),
                                     std::max<size_t>(GGML_DEFAULT_GRAPH_SIZE, 2 * n + 64), false, false);
    if (!g.sched) fail<ExecutionError>("cannot create a scheduler over the partition's devices");
    for (int i = 0; i < ggml_graph_n_nodes(g.graph); ++i) {
        ggml_tensor* t = ggml_graph_node(g.graph, i);
        // a view stays where its source's memory is (the scheduler places it there and copies what the
        // device reads): pinned elsewhere it would point into another device's memory
        if (t->view_src) continue;
        if (const int* s = node_slot.find(t)) ggml_backend_sched_set_tensor_backend(g.sched, t, backends[size_t(*s)]);
    }
    if (!ggml_backend_sched_alloc_graph(g.sched, g.graph))
        fail<ExecutionError>("cannot allocate the compute buffers of this graph on the partition's devices");
    g.n_splits = ggml_backend_sched_get_n_splits(g.sched);
}

// Thrown when a graph writes state in place and checks computed indices only
// while computing: it is built again with its state writes journaled.
struct NeedJournal {};

// One attempt at building with room for `n_tensors` tensor objects; throws
// gg::OutOfRoom when the lowerings need more.
std::unique_ptr<BuiltGraph> build_once(const Program& prog, const ResidentTensors& resident, const Binding& b,
                                       const BuildOptions& opts, size_t n_tensors, bool journal) {
    const LoweringTable& table = lowerings();
    std::vector<const Lowering*> fns;
    fns.reserve(prog.ops.size());
    for (const OpDef& op : prog.ops) {
        const Lowering* l = table.find(op.kind);
        if (!l) fail<CompileError>(op.label(), ": the backend has no lowering for it");
        fns.push_back(l);
    }
    // graph nodes are tensors of this context; its leafs also the resident tensors
    const size_t n_outside = prog.tensors.size() + 16;
    auto g = std::make_unique<BuiltGraph>();
    g->key = b.symbols;
    const size_t meta_size =
        n_tensors * ggml_tensor_overhead() + ggml_graph_overhead_custom(n_tensors + n_outside, false) + 4096;
    // the metadata lives in a buffer of ours: a recycled one (its pages already mapped) when it is large enough
    if (opts.recycled && opts.recycled->size() >= meta_size) g->meta = std::move(*opts.recycled);
    else g->meta.reserve(meta_size);
    ggml_init_params ip{g->meta.size(), g->meta.data(), true};
    g->ctx = ggml_init(ip);
    if (!g->ctx) fail<ExecutionError>("ggml_init failed (", ip.mem_size, " bytes of graph metadata)");
    ggml_context* ctx = g->ctx;

    const Placement* pl = opts.placement;
    std::vector<ggml_tensor*> vals(prog.tensors.size(), nullptr);
    for (size_t i = 0; i < prog.tensors.size(); ++i) {
        if (prog.tensors[i].property == Property::Variable) continue;
        if (!pl) {
            vals[i] = resident.tensor(int32_t(i));
            continue;
        }
        for (const ResidentTensors* r : pl->resident)  // (where no op reads it: the device that holds it)
            if (r && r->holds(int32_t(i)) && !vals[i]) vals[i] = r->tensor(int32_t(i));
    }

    BuildEnv env;
    if (!pl) {
        env.vals = &vals;
        env.derived = opts.derived;
    }
    if (journal) {
        g->journal = std::make_unique<kernels::Journal>();
        env.journal = g->journal.get();
    }
    for (size_t i = 0; i < prog.tensors.size(); ++i)
        if (prog.tensors[i].property == Property::State) {
            if (!pl) env.state[vals[i]] = 1;
            else
                for (const ResidentTensors* r : pl->resident)
                    if (r && r->holds(int32_t(i))) env.state[r->tensor(int32_t(i))] = 1;
        }
    // tensors in the caller's buffers: input k -> k, output j -> -(j + 1)
    PtrMap<int> external(prog.inputs.size() + prog.outputs.size());
    for (size_t k = 0; k < prog.inputs.size(); ++k) {
        const TensorDef& t = prog.tensors[size_t(prog.inputs[k])];
        Dims s;
        s.rank = int(t.shape.size());
        for (int d = 0; d < s.rank; ++d) s.d[d] = b.values[size_t(t.shape[size_t(d)])];
        ggml_tensor* leaf = gg::new_tensor(ctx, ggml_type_of(t.dtype), s.ne().data(), /*allow_empty=*/true);
        ggml_set_input(leaf);
        vals[size_t(prog.inputs[k])] = leaf;
        g->inputs.push_back(leaf);
        external[leaf] = int(k);
        env.input_port[leaf] = int(k);
    }

    g->guards = std::make_unique<KernelGuards>();
    GuardScope guard_scope(g->guards.get());
    std::vector<ggml_tensor*> in, out;
    PtrMap<int> node_slot(pl ? 4 * prog.ops.size() + 64 : 1);  // device mode: each new tensor's device
    ggml_tensor* mark = nullptr;  // the last tensor of ctx before the op being lowered
    for (ggml_tensor* t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) mark = t;
    g->op_slot.assign(pl ? prog.ops.size() : 0, -1);
    // Lower op k on placement slot `slot` (device mode) and check what it made; NotOnDevice when a tensor
    // it made cannot run on that device.
    PtrMap<char> fresh(64);       // device mode: the tensors the op being lowered made
    size_t n_side_before = 0;     // env.side_effects before it
    auto lower_on = [&](size_t k, int slot) {
        const OpDef& op = prog.ops[k];
        in.clear();
        out.clear();
        for (int32_t i : op.inputs) {
            ggml_tensor* v = vals[size_t(i)];
            if (pl && prog.tensors[size_t(i)].property != Property::Variable) {
                // the weights and state of the op's device; on the host CPU as a fallback, those of the device
                // the partition placed the op on (the scheduler copies what the host reads)
                const ResidentTensors* r = pl->resident[size_t(pl->op_slot[k])];
                if (!r || !r->holds(i)) fail<CompileError>("internal error: ", op.label(), " reads a tensor its device does not hold");
                v = r->tensor(i);
            }
            in.push_back(v);
        }
        if (pl) {
            env.placed = true;
            env.host = pl->slots[size_t(slot)].host;
            env.device = pl->slots[size_t(slot)].name;
            env.backend = pl->slots[size_t(slot)].backend;
        }
        LowerCtx lc{ctx, prog, op, b.values, in, out, env};
        g->guards->set_op(int(k));
        try {
            const auto absorbed = std::find_if(env.absorbed.begin(), env.absorbed.end(),
                                               [&](const BuildEnv::Absorbed& a) { return a.op == &op; });
            if (absorbed != env.absorbed.end())
                out = {in.at(absorbed->input)};  // computed by the kernel that made that input (LowerCtx::absorb)
            else
                lower_any_rank(lc, fns[k]->fn);
        } catch (const gg::Violation& e) {
            fail<CompileError>(op.label(), " cannot be lowered: ", e.what());
        }
        if (out.size() != op.outputs.size())
            fail<CompileError>("internal error: the lowering of ", op.label(), " produced ", out.size(), " outputs, expected ",
                               op.outputs.size());
        for (size_t j = 0; j < op.outputs.size(); ++j) check_lowered(lc, j, out[j]);
        if (!pl) return;
        // the op's ggml tensors run on its device; on any but the host CPU, ggml's own ops only, and
        // only those the device's backend implements for these types (a GPU's says which; dyngraph's
        // rpc-server says what its device computes, rpc_caps.h). Checked: what the graph will compute,
        // the tensors the op's outputs and state writes reach (a lowering may have made a tensor to ask
        // whether the device takes it, then gone another way).
        if (env.host) return;
        ggml_backend_t be = pl->slots[size_t(slot)].backend;
        fresh.clear();
        for (ggml_tensor* t = mark ? ggml_get_next_tensor(ctx, mark) : ggml_get_first_tensor(ctx); t;
             t = ggml_get_next_tensor(ctx, t))
            fresh[t] = 0;
        std::vector<const ggml_tensor*> computed;
        std::vector<ggml_tensor*> todo(out.begin(), out.end());
        for (size_t s = n_side_before; s < env.side_effects.size(); ++s) todo.push_back(env.side_effects[s]);
        while (!todo.empty()) {
            ggml_tensor* t = todo.back();
            todo.pop_back();
            char* seen = t ? fresh.find(t) : nullptr;
            if (!seen || *seen) continue;  // made before this op, or checked
            *seen = 1;
            for (ggml_tensor* src : t->src) todo.push_back(src);
            if (t->view_src) todo.push_back(t->view_src);
            if (t->op == GGML_OP_CUSTOM || t->op == GGML_OP_MAP_CUSTOM1 || t->op == GGML_OP_MAP_CUSTOM2 ||
                t->op == GGML_OP_MAP_CUSTOM3)
                lc.not_portable("its lowering");
            if (t->op != GGML_OP_NONE && !t->view_src) computed.push_back(t);
        }
        const std::vector<char> ok = remote::backend_supports(be, computed);
        for (size_t i = 0; i < computed.size(); ++i)
            if (!ok[i]) lc.not_on_device(cat(ggml_op_desc(computed[i]), " for ", gg::describe(computed[i])));
    };
    for (size_t k = 0; k < prog.ops.size(); ++k) {
        const OpDef& op = prog.ops[k];
        int slot = pl ? pl->op_slot[k] : -1;
        // what a failed attempt on a device must not leave behind
        const size_t n_side = env.side_effects.size(), n_host_checks = env.host_checks.size(),
                     n_kernel_checks = env.kernel_checks.size(), n_kept = env.kept.size(),
                     n_device_checks = env.device_checks.size();
        const int state_writes = env.state_writes;
        n_side_before = n_side;
        try {
            lower_on(k, slot);
        } catch (const NotOnDevice& e) {
            // the host CPU runs it (as ggml_backend_sched does for llama.cpp), unless placement is strict or
            // the op writes state: state lives on its device, and the host would write a copy
            if (!pl || pl->strict || pl->host_slot < 0) throw;
            if (env.state_writes != state_writes)
                fail<CompileError>(e.what(), "; it writes state that lives on that device, so the host CPU cannot run it "
                                             "in its place");
            env.side_effects.resize(n_side);  // (the tensors the attempt made stay in the context, unused)
            env.host_checks.resize(n_host_checks);
            env.kernel_checks.resize(n_kernel_checks);
            env.kept.resize(n_kept);
            env.device_checks.resize(n_device_checks);
            env.flat_positions.clear();  // (what the attempt made and shared now runs on the host CPU)
            env.device_masks.clear();
            slot = pl->host_slot;
            lower_on(k, slot);
            ++g->host_fallback_ops;
        }
        for (size_t j = 0; j < op.outputs.size(); ++j) vals[size_t(op.outputs[j])] = out[j];
        if (pl) {
            g->op_slot[k] = slot;
            for (ggml_tensor* t = mark ? ggml_get_next_tensor(ctx, mark) : ggml_get_first_tensor(ctx); t;
                 t = ggml_get_next_tensor(ctx, t)) {
                mark = t;
                node_slot[t] = slot;  // (a failed attempt's tensors too: they are in no graph)
            }
        }
    }

    // (on devices, state lives in device memory: no journal there)
    if (!pl && !journal && env.state_writes > 0 && !env.kernel_checks.empty()) throw NeedJournal{};
    // every tensor the lowerings made (intermediates too: an attention score matrix is the product of
    // several IR dimensions) has a representable size within the limit
    for (ggml_tensor* t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
        uint64_t bytes = ggml_row_size(t->type, t->ne[0]);
        bool overflow = false;
        for (int d = 1; d < GGML_MAX_DIMS; ++d) overflow |= __builtin_mul_overflow(bytes, uint64_t(t->ne[d]), &bytes);
        if (overflow || bytes > limits::kMaxTensorBytes)
            fail<ShapeError>("a ", gg::describe(t), " tensor of this graph is above the limit of ", limits::kMaxTensorBytes,
                             " bytes (", overflow ? "its size overflows" : cat(bytes, " bytes"), ")");
    }

    std::vector<ggml_tensor*> roots;
    for (size_t j = 0; j < prog.outputs.size(); ++j) {
        ggml_tensor* t = vals[size_t(prog.outputs[j])];
        bool direct = t->op != GGML_OP_NONE && t->view_src == nullptr && !external.contains(t);
        ggml_tensor* holder = t;
        ggml_tensor* node = t;
        if (!direct) {
            holder = gg::new_tensor(ctx, t->type, t->ne);
            node = gg::cpy(ctx, t, holder);
        }
        ggml_set_output(holder);
        external[holder] = -int(j) - 1;
        g->outputs.push_back(holder);
        roots.push_back(node);
        const TensorDef& def = prog.tensors[size_t(prog.outputs[j])];
        Dims s;
        s.rank = int(def.shape.size());
        for (int d = 0; d < s.rank; ++d) s.d[d] = b.values[size_t(def.shape[size_t(d)])];
        g->output_shapes.push_back(s);
    }

    // ggml names every unnamed node it adds to a graph with snprintf; a short
    // name set here skips that (a third of the build's time went there)
    size_t created = 0;
    for (ggml_tensor* t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t), ++created)
        if (t->name[0] == 0) {
            t->name[0] = '#';
            t->name[1] = 0;
        }
    g->n_tensors = created;
    const size_t graph_size = created + n_outside;
    if (ggml_get_mem_size(ctx) - ggml_used_mem(ctx) < ggml_graph_overhead_custom(graph_size, false) + 64)
        throw gg::OutOfRoom{};
    g->graph = ggml_new_graph_custom(ctx, graph_size, false);
    for (ggml_tensor* r : roots) ggml_build_forward_expand(g->graph, r);
    for (ggml_tensor* s : env.side_effects) ggml_build_forward_expand(g->graph, s);
    g->host_checks = std::move(env.host_checks);
    g->kernel_checks = std::move(env.kernel_checks);
    g->device_checks = std::move(env.device_checks);
    g->kept = std::move(env.kept);

    const int n_nodes = ggml_graph_n_nodes(g->graph);
    g->external.reserve(prog.inputs.size() + prog.outputs.size() + 8);
    auto add_external = [&](ggml_tensor* t, int code, size_t off) {
        g->external.push_back({t, code < 0, code < 0 ? -code - 1 : code, off});
    };
    for (size_t k = 0; k < g->inputs.size(); ++k) add_external(g->inputs[k], int(k), 0);
    for (size_t j = 0; j < g->outputs.size(); ++j) add_external(g->outputs[j], -int(j) - 1, 0);
    for (int i = 0; i < n_nodes; ++i) {
        ggml_tensor* t = ggml_graph_node(g->graph, i);
        if (t->view_src == nullptr) continue;
        size_t off = 0;
        ggml_tensor* r = view_root(t, &off);
        if (const int* code = external.find(r)) add_external(t, *code, off);
    }
    if (pl) {
        schedule(*g, *pl, node_slot);
        return g;
    }
    g->plan = plan_memory(g->graph, external, opts.align);
    g->cplan = ggml_graph_plan(g->graph, opts.n_threads, opts.threadpool);
    return g;
}

}  // namespace

std::unique_ptr<BuiltGraph> build_graph(const Program& prog, const ResidentTensors& resident, const Binding& b,
                                        const BuildOptions& opts) {
    auto t0 = std::chrono::steady_clock::now();
    // room for as many tensors as the last graph of this program needed (a good guess for the next binding),
    // or a first guess; doubled until the lowerings fit
    size_t n = opts.tensor_hint ? opts.tensor_hint + opts.tensor_hint / 4 + 16
                                : 8 * prog.ops.size() + prog.inputs.size() + 2 * prog.outputs.size() + 16;
    bool journal = false;
    for (;;) {
        try {
            std::unique_ptr<BuiltGraph> g = build_once(prog, resident, b, opts, n, journal);
            g->build_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            return g;
        } catch (const gg::OutOfRoom&) {
            if (n > kMaxGraphTensors) fail<CompileError>("the graph needs more than ", kMaxGraphTensors, " ggml tensors");
            n *= 2;
        } catch (const NeedJournal&) {
            journal = true;
        }
    }
}

}  // namespace dg
