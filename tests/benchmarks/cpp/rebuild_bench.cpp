// What a rebuild costs: dyngraph's build_graph (lower the IR for a new
// binding, plan memory, ggml_graph_plan) against building and allocating the
// same ggml graph by hand (ggml_init, the ops, ggml_build_forward_expand,
// ggml_gallocr_alloc_graph, ggml_graph_plan), for the decoder stack of
// tests/benchmarks/stack.py at a new sequence length each time.
//
//   python tests/benchmarks/cpp/write_stack_ir.py /tmp/stack.dgir
//   build/dev/tests/benchmarks/cpp/dg_bench rebuild /tmp/stack.dgir [iterations]
//
// The hand-built graph mirrors the lowering node for node (checked: same
// node count, op and shape at every position). Both run on one thread,
// interleaved, alternating which goes first; medians are printed.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "bench.h"
#include "binder.h"
#include "builder.h"
#include "errors.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "kernels/f32_matmul.h"
#include "kernels/row_norm.h"
#include "program.h"
#include "resident.h"

namespace {

using Clock = std::chrono::steady_clock;

double us(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); }

using dg_bench::median;

// The model's sizes, read from the IR (x is [seq, hidden]; the stack's weights by name).
struct Sizes {
    int64_t hidden = 0, heads = 0, ffn = 0, layers = 0;
    float eps = 1e-6f;
};

Sizes read_sizes(const dg::Program& prog) {
    Sizes s;
    const dg::TensorDef& x = prog.tensors[size_t(prog.inputs[0])];
    s.hidden = prog.const_value(x.shape[1]);
    for (const dg::OpDef& op : prog.ops) {
        if (op.name == "l0.q_split") {
            const auto& shape = std::get<dg::ops::StaticReshapeAttrs>(op.attrs).shape;
            s.heads = shape.size() == 3 ? prog.const_value(shape[1]) : 0;
        }
        if (op.name == "l0.attn_norm_out") s.eps = float(std::get<dg::ops::RMSNormAttrs>(op.attrs).epsilon);
        if (op.name.size() > 3 && op.name.compare(op.name.size() - 3, 3, ".up") == 0) {
            ++s.layers;
            s.ffn = prog.const_value(prog.tensors[size_t(op.outputs[0])].shape[1]);
        }
    }
    if (!s.hidden || !s.heads || !s.ffn || !s.layers) {
        std::fprintf(stderr, "this IR is not the decoder stack of tests/benchmarks/stack.py\n");
        std::exit(2);
    }
    return s;
}

// Weights for the hand-built graph, allocated once (ggml_gallocr leaves tensors that have data alone).
struct HandWeights {
    ggml_context* ctx = nullptr;
    struct Layer {
        ggml_tensor *wq, *wk, *wv, *wo, *w1, *w2, *g_attn, *g_mlp;
    };
    std::vector<Layer> layers;
    ggml_tensor *g_final = nullptr, *scale = nullptr;

    explicit HandWeights(const Sizes& s) {
        const int64_t h = s.hidden, f = s.ffn;
        size_t bytes = size_t(s.layers) * size_t(4 * h * h + 2 * h * f + 2 * h) * sizeof(float) + size_t(h + 1) * sizeof(float);
        ggml_init_params ip{bytes + size_t(s.layers * 8 + 4) * (ggml_tensor_overhead() + 64), nullptr, false};
        ctx = ggml_init(ip);
        auto filled = [](ggml_tensor* t) {
            std::fill_n(static_cast<float*>(t->data), ggml_nelements(t), 0.01f);
            return t;
        };
        // ggml ne [k, n]: n rows of k, a weight stored transposed as dyngraph stores it
        auto mat = [&](int64_t k, int64_t n) { return filled(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, k, n)); };
        auto vec = [&](int64_t n) { return filled(ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n)); };
        for (int64_t i = 0; i < s.layers; ++i)
            layers.push_back({mat(h, h), mat(h, h), mat(h, h), mat(h, h), mat(h, f), mat(f, h), vec(h), vec(h)});
        g_final = vec(h);
        scale = vec(1);
    }
    ~HandWeights() { ggml_free(ctx); }
};

struct HandGraph {
    ggml_context* ctx = nullptr;
    ggml_cgraph* graph = nullptr;
    ~HandGraph() {
        if (ctx) ggml_free(ctx);
    }
};

// The stack at `seq`, op for op as dyngraph's lowerings build it.
void build_by_hand(HandGraph& g, const HandWeights& w, const Sizes& s, int64_t seq) {
    const size_t graph_size = 512;
    ggml_init_params ip{1024 * ggml_tensor_overhead() + ggml_graph_overhead_custom(graph_size, false), nullptr, true};
    ggml_context* ctx = g.ctx = ggml_init(ip);
    const int64_t h = s.hidden, heads = s.heads, d = s.hidden / s.heads;
    ggml_tensor* x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, h, seq);
    ggml_tensor* mask = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, seq, seq);
    ggml_set_input(x);
    ggml_set_input(mask);
    // RMSNorm with its gamma in one node, as the norm lowering makes it on the host (kernels/row_norm.h)
    auto norm = [&](ggml_tensor* t, ggml_tensor* gamma) { return dg::kernels::row_norm(ctx, t, gamma, nullptr, s.eps, true); };
    auto split_heads = [&](ggml_tensor* t) {  // [seq, hidden] -> [heads, seq, d]
        t = ggml_reshape_4d(ctx, t, d, heads, seq, 1);
        return ggml_cont(ctx, ggml_permute(ctx, t, 0, 2, 1, 3));
    };
    // every product as the MatMul lowering makes it (from 2 rows, dyngraph's f32 kernels)
    auto mm = [&](ggml_tensor* a, ggml_tensor* b) { return dg::kernels::mul_mat(ctx, a, b); };
    ggml_tensor* cur = x;
    ggml_tensor *last_residual = nullptr, *last_mlp = nullptr;  // the last layer's sum, read by the final norm only
    for (const auto& l : w.layers) {
        ggml_tensor* a = norm(cur, l.g_attn);
        ggml_tensor* q = split_heads(mm(l.wq, a));
        ggml_tensor* k = split_heads(mm(l.wk, a));
        ggml_tensor* v = split_heads(mm(l.wv, a));
        ggml_tensor* sc = mm(k, q);  // [heads, seq_q, seq_k]
        sc = ggml_mul(ctx, sc, w.scale);
        sc = ggml_add(ctx, sc, mask);
        sc = ggml_soft_max(ctx, sc);
        ggml_tensor* o = mm(ggml_cont(ctx, ggml_transpose(ctx, v)), sc);  // [heads, seq, d]
        o = ggml_cont(ctx, ggml_permute(ctx, o, 0, 2, 1, 3));
        o = ggml_reshape_4d(ctx, o, h, seq, 1, 1);
        cur = ggml_add(ctx, cur, mm(l.wo, o));
        ggml_tensor* m = mm(l.w1, norm(cur, l.g_mlp));
        m = mm(l.w2, ggml_silu(ctx, m));
        last_residual = cur, last_mlp = m;
        cur = ggml_add(ctx, cur, m);
    }
    // the final norm adds the last layer's sum itself, as the norm lowering does when nothing else reads it
    ggml_tensor* y = last_mlp ? dg::kernels::row_norm(ctx, last_residual, w.g_final, nullptr, s.eps, true, last_mlp)
                              : norm(cur, w.g_final);
    ggml_set_output(y);
    g.graph = ggml_new_graph_custom(ctx, graph_size, false);
    ggml_build_forward_expand(g.graph, y);
}

// Same node count, and the same op and shape at every position.
std::string compare(ggml_cgraph* ours, ggml_cgraph* hand) {
    int n = ggml_graph_n_nodes(ours), m = ggml_graph_n_nodes(hand);
    if (n != m) return "node counts differ: " + std::to_string(n) + " vs " + std::to_string(m);
    for (int i = 0; i < n; ++i) {
        const ggml_tensor* a = ggml_graph_node(ours, i);
        const ggml_tensor* b = ggml_graph_node(hand, i);
        bool same = a->op == b->op && a->type == b->type;
        for (int k = 0; same && k < 4; ++k) same = a->ne[k] == b->ne[k];
        if (!same)
            return "node " + std::to_string(i) + ": " + ggml_op_desc(a) + " [" + std::to_string(a->ne[0]) + ", " +
                   std::to_string(a->ne[1]) + ", " + std::to_string(a->ne[2]) + "] vs " + ggml_op_desc(b) + " [" +
                   std::to_string(b->ne[0]) + ", " + std::to_string(b->ne[1]) + ", " + std::to_string(b->ne[2]) + "]";
    }
    return "";
}

}  // namespace

int dg_bench::rebuild_main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s STACK.dgir [iterations]\n", argv[0]);
        return 2;
    }
    const int iters = argc > 2 ? std::atoi(argv[2]) : 2000;
    std::ifstream f(argv[1], std::ios::binary);
    std::vector<uint8_t> ir((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (ir.empty()) {
        std::fprintf(stderr, "cannot read %s\n", argv[1]);
        return 2;
    }
    // a saved file: a 64-byte header (dyngraph.serialization) before the IR
    const size_t skip = ir.size() > 64 && std::memcmp(ir.data(), "DYNGRAPH", 8) == 0 ? 64 : 0;
    try {
        dg::Program prog = dg::Program::parse(ir.data() + skip, ir.size() - skip);
        dg::ResidentTensors resident(prog, {});
        dg::Binder binder(prog);
        const Sizes sz = read_sizes(prog);
        HandWeights weights(sz);
        ggml_gallocr_t galloc = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
        dg::BuildOptions opts;  // one thread, like the benchmarks
        const int64_t seq_max = prog.symbols.at(0).max;

        dg::HostTensor in[2];
        const dg::HostTensor* in_ptrs[2] = {&in[0], &in[1]};
        for (int k = 0; k < 2; ++k) {
            const dg::TensorDef& t = prog.tensors[size_t(prog.inputs[size_t(k)])];
            in[k].id = t.id;
            in[k].dtype = t.dtype;
            in[k].ndim = 2;
        }
        auto set_seq = [&](int64_t seq) {
            in[0].shape[0] = seq;
            in[0].shape[1] = sz.hidden;
            in[1].shape[0] = in[1].shape[1] = seq;
        };

        // the check: both graphs at one length
        dg::Binding b;
        set_seq(7);
        binder.bind(in_ptrs, 2, b);
        auto ours = dg::build_graph(prog, resident, b, opts);
        HandGraph hand;
        build_by_hand(hand, weights, sz, 7);
        std::string diff = compare(ours->graph, hand.graph);
        const int nodes = ours->n_nodes();
        std::printf("stack IR: %zu ops, %lld layers, hidden %lld, %lld heads, ffn %lld; graph at seq 7: %d nodes (ours), %d (by hand)%s%s\n",
                    prog.ops.size(), (long long)sz.layers, (long long)sz.hidden, (long long)sz.heads, (long long)sz.ffn,
                    nodes, ggml_graph_n_nodes(hand.graph), diff.empty() ? ", same op and shape at every node" : "; DIFFERENT: ",
                    diff.c_str());

        std::vector<double> t_bind, t_build, t_free, h_build, h_alloc, h_plan, h_total, h_free;
        const int warmup = std::max(20, iters / 20);
        for (int i = 0; i < warmup + iters; ++i) {
            // a new length every time, never 1 (where a transpose of one row is a view, not a copy)
            const int64_t seq = 2 + (int64_t(i) * 37) % (seq_max - 1);
            set_seq(seq);
            for (int turn = 0; turn < 2; ++turn) {
                if ((turn ^ (i & 1)) == 0) {
                    auto t0 = Clock::now();
                    binder.bind(in_ptrs, 2, b);
                    auto t1 = Clock::now();
                    auto g = dg::build_graph(prog, resident, b, opts);
                    auto t2 = Clock::now();
                    g.reset();
                    auto t3 = Clock::now();
                    if (i >= warmup) {
                        t_bind.push_back(us(t0, t1));
                        t_build.push_back(us(t1, t2));
                        t_free.push_back(us(t2, t3));
                    }
                } else {
                    auto t0 = Clock::now();
                    auto g = std::make_unique<HandGraph>();
                    build_by_hand(*g, weights, sz, seq);
                    auto t1 = Clock::now();
                    if (!ggml_gallocr_alloc_graph(galloc, g->graph)) throw std::runtime_error("ggml_gallocr_alloc_graph failed");
                    auto t2 = Clock::now();
                    ggml_cplan plan = ggml_graph_plan(g->graph, opts.n_threads, nullptr);
                    auto t3 = Clock::now();
                    g.reset();
                    auto t4 = Clock::now();
                    (void)plan;
                    if (i >= warmup) {
                        h_build.push_back(us(t0, t1));
                        h_alloc.push_back(us(t1, t2));
                        h_plan.push_back(us(t2, t3));
                        h_total.push_back(us(t0, t3));
                        h_free.push_back(us(t3, t4));
                    }
                }
            }
        }
        ggml_gallocr_free(galloc);

        const double ob = median(t_build), ht = median(h_total);
        std::printf("%d builds each, seq 2..%lld (a new length each time), interleaved; medians:\n", iters, (long long)seq_max);
        std::printf("  dyngraph  build_graph (lower IR, plan_memory, ggml_graph_plan)  %8.1f us  %5.2f us/node\n", ob, ob / nodes);
        std::printf("            Binder::bind (before it)                            %8.1f us\n", median(t_bind));
        std::printf("            destroy (ggml_free)                                 %8.1f us\n", median(t_free));
        std::printf("  by hand   ggml_init + ops + ggml_build_forward_expand           %8.1f us\n", median(h_build));
        std::printf("            ggml_gallocr_alloc_graph                            %8.1f us\n", median(h_alloc));
        std::printf("            ggml_graph_plan                                     %8.1f us\n", median(h_plan));
        std::printf("            total                                               %8.1f us  %5.2f us/node\n", ht, ht / nodes);
        std::printf("            ggml_free                                           %8.1f us\n", median(h_free));
        std::printf("  build_graph / by hand: %.2fx\n", ob / ht);
        return diff.empty() ? 0 : 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
}
