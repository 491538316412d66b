// A ggml graph built for one binding of the symbols, and the function that
// builds it from the IR. Like llama.cpp's llm_graph_result: the graph knows
// the binding (its cache key) it was built for; reusing it is a lookup.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "aligned_buffer.h"
#include "binder.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "lowering.h"
#include "planner.h"
#include "program.h"
#include "kernel_guard.h"
#include "kernels/journal.h"
#include "placement.h"
#include "resident.h"

namespace dg {

// A tensor whose data lives in a caller's buffer: set before every compute.
struct ExternalRef {
    ggml_tensor* tensor;
    bool output;   // an output port (else an input port)
    int port;
    size_t offset;  // bytes into the port's buffer (views)
};

struct BuiltGraph {
    std::vector<int64_t> key;
    AlignedBuffer meta;  // the memory of ctx: tensor and graph metadata
    ggml_context* ctx = nullptr;
    ggml_cgraph* graph = nullptr;
    std::vector<ggml_tensor*> inputs;   // per runtime input: its leaf
    std::vector<ggml_tensor*> outputs;  // per output: the tensor that holds it (in the caller's buffer)
    std::vector<Dims> output_shapes;
    std::vector<ExternalRef> external;
    MemoryPlan plan;
    uint64_t arena_generation = UINT64_MAX;  // arena the plan was last applied to
    bool executed = false;                    // an execute has run it (verbose: its first says "miss")
    ggml_cplan cplan{};
    std::vector<HostIndexCheck> host_checks;                      // run before each compute
    std::vector<std::unique_ptr<KernelIndexCheck>> kernel_checks;  // read after each compute
    std::vector<DeviceIndexCheck> device_checks;                   // device mode: read after each compute
    std::vector<std::shared_ptr<const void>> kept;                 // parameters its kernels point to
    std::unique_ptr<KernelGuards> guards;       // its custom ops' kernels run behind these (read after each compute)
    std::unique_ptr<kernels::Journal> journal;  // what this compute overwrote in state, when a kernel check may refuse it
    double build_seconds = 0;
    size_t n_tensors = 0;  // ggml tensors its lowerings created (the next build's first guess)
    // Device mode (a Placement): the graph's own scheduler, which split it over the devices and holds its
    // compute buffers there; the remote connections it uses (to free it only while they live).
    ggml_backend_sched_t sched = nullptr;
    std::vector<remote::Connection*> conns;
    std::vector<int> op_slot;   // per op, the placement slot it runs on in this graph
    int host_fallback_ops = 0;  // ops placed on a device that run on the host CPU instead
    int n_splits = 0;           // the scheduler's splits (runs of nodes on one backend)

    size_t metadata_bytes() const { return ctx ? ggml_used_mem(ctx) : 0; }
    int n_nodes() const { return graph ? ggml_graph_n_nodes(graph) : 0; }

    BuiltGraph() = default;
    BuiltGraph(const BuiltGraph&) = delete;
    BuiltGraph& operator=(const BuiltGraph&) = delete;
    ~BuiltGraph();
    // Free the graph and hand back its metadata buffer, for the next build to reuse.
    AlignedBuffer release_metadata();
};

struct BuildOptions {
    int n_threads = 1;
    ggml_threadpool* threadpool = nullptr;
    size_t align = 64;
    AlignedBuffer* recycled = nullptr;  // a metadata buffer to reuse, if large enough (taken)
    size_t tensor_hint = 0;             // tensors the previous graph of this program needed (0: unknown)
    const Placement* placement = nullptr;  // device mode: ops on devices, run by a ggml_backend_sched
    DerivedConstants* derived = nullptr;   // the partition's tensors computed once from its constants (host path)
};

// Graphs of more ggml tensors than this are refused (CompileError).
constexpr size_t kMaxGraphTensors = size_t(1) << 22;

// Build the graph of `prog` for binding `b`. Every lowered tensor is checked
// against the shape the IR evaluates to. Throws (nothing is left half-built).
// In device mode (opts.placement) `resident` is unused: each op reads the
// weights and state of its device, and the graph is split and allocated by a
// scheduler of its own (the caller guards the call: it allocates on remote devices).
std::unique_ptr<BuiltGraph> build_graph(const Program& prog, const ResidentTensors& resident, const Binding& b,
                                        const BuildOptions& opts);

}  // namespace dg
