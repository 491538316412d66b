// A compiled partition: the IR (read once), its resident tensors (constants
// uploaded once, state), and an LRU cache of ggml graphs built per binding.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "aligned_buffer.h"
#include "binder.h"
#include "builder.h"
#include "device.h"
#include "engine.h"
#include "placement.h"
#include "host_tensor.h"
#include "program.h"
#include "resident.h"

namespace dg {

struct CacheStats {
    uint64_t hits = 0;
    uint64_t misses = 0;  // = graphs built
    uint64_t evictions = 0;
    uint64_t executions = 0;
    uint64_t staged_inputs = 0;   // inputs copied/converted instead of used in place
    uint64_t staged_outputs = 0;  // outputs computed aside and copied/converted into the caller's buffer
    uint64_t device_copies = 0;   // device mode: inputs copied into the graph, outputs copied out of a device
    uint64_t device_copy_bytes = 0;
    int host_fallback_ops = 0;  // device mode, the last graph built: ops a device could not run, on the host CPU
    int graph_splits = 0;       // device mode, the last graph built: runs of ops on one device (copies between them)
    size_t entries = 0;
    size_t capacity = 0;
    double build_seconds = 0;
    double last_build_seconds = 0;
    int last_graph_nodes = 0;  // ggml nodes of the most recently built graph
    size_t metadata_bytes = 0;  // graph metadata of the cached entries
    size_t arena_bytes = 0;     // shared compute buffer
    size_t constant_bytes = 0;
    size_t borrowed_bytes = 0;  // constants used in place in the loaded file
    size_t repacked_bytes = 0;  // quantized weights in ggml's repacked layout
    size_t panel_bytes = 0;     // f32 and quantized weights in panels for our product (kernels/f32_panels.h, quant_panels.h)
    size_t state_bytes = 0;
    size_t derived_bytes = 0;  // computed once from constants in a kernel's layout (Winograd's weights)
};

struct KeyHash {
    size_t operator()(const std::vector<int64_t>& k) const noexcept {
        uint64_t h = 1469598103934665603ull;
        for (int64_t v : k) h = (h ^ uint64_t(v)) * 1099511628211ull;
        return size_t(h);
    }
};

class CompiledPartition {
public:
    // With `borrow_ir`, constants are used where they lie in `ir`, which must
    // then outlive this object unchanged, and be a read-only file mapping (a
    // loaded file): the pages of repacked weights are released after upload.
    CompiledPartition(const uint8_t* ir, size_t ir_size, const std::map<int32_t, HostData>& external,
                      std::shared_ptr<Engine> engine, size_t cache_capacity, bool borrow_ir = false, bool repack = true);

    // Device mode: the partition's ops on the devices of `engines` (a CPU engine is the host CPU, others
    // their devices), split by `rule` in proportion to `shares` (one per device), run through ggml-backend.
    CompiledPartition(const uint8_t* ir, size_t ir_size, const std::map<int32_t, HostData>& external,
                      const std::vector<std::shared_ptr<Engine>>& engines, const std::vector<double>& shares, SplitRule rule,
                      size_t cache_capacity, bool strict_placement = false);
    ~CompiledPartition();

    const Program& program() const { return prog_; }
    // The engine kind verbose lines name: "cpu", or the devices joined by '+'.
    std::string engine_kind() const;
    const Engine& engine() const { return *engine_; }
    bool device_mode() const { return placement_ != nullptr; }
    // Device mode: per device, its name, the ops it runs and the bytes of weights and state it holds.
    struct SlotSummary {
        std::string device;
        size_t ops = 0;
        size_t resident_bytes = 0;
    };
    std::vector<SlotSummary> placement_summary() const;
    // The device of each op of the program (by op position), as placement_summary counts them; [] on the
    // host CPU path.
    std::vector<std::string> op_devices() const;
    // Bytes sent to / received from the partition's RPC servers so far (all users of those connections).
    std::pair<uint64_t, uint64_t> remote_traffic() const;

    // Constants and state, wherever they live (under the partition's lock).
    std::vector<uint8_t> export_data(int32_t index);
    void read_state(int32_t index, void* dst, size_t nbytes);
    void write_state(int32_t index, const void* src, size_t nbytes);
    void reset_state();

    // Run with the caller's buffers. Inputs are validated (nothing is written,
    // state included, when they are not valid); the graph for this binding is
    // built on a cache miss.
    void execute(const HostTensor* const* in, size_t n_in, const HostTensor* const* out, size_t n_out);

    // Output shapes for these input shapes. With `build`, the graph for the
    // binding is made ready, so the execute() that follows computes at once.
    std::vector<Dims> infer(const HostTensor* const* in, size_t n_in, bool build, bool check_dtype);

    // Benchmark baseline: prepare one execution as execute() does, then time
    // `iters` bare ggml graph computes of it (no binding, no lookup, no
    // Python). Median ns.
    double time_compute(const HostTensor* const* in, size_t n_in, const HostTensor* const* out, size_t n_out, int iters);
    // Benchmark baseline, per node: as time_compute, but each ggml node of the
    // graph computed alone, in order, `iters` times over the graph (a node
    // meets its inputs as the node before it left them). Median ns per node.
    struct NodeTime {
        std::string op;  // ggml_op_desc: "MUL_MAT", "CUSTOM", ...
        std::string name;
        std::string type;
        int64_t ne[4];
        std::string srcs;  // each source's type, ne and byte strides nb
        double ns;
    };
    std::vector<NodeTime> time_nodes(const HostTensor* const* in, size_t n_in, const HostTensor* const* out,
                                     size_t n_out, int iters);

    CacheStats stats() const;
    void clear_cache();
    // Host CPU path: run on `engine` (a CPU engine) from now on, as a partition loaded without an
    // engine does for the first stream of another CPU engine (api/dyngraph/compiled_partition.py).
    void use_engine(std::shared_ptr<Engine> engine);
    void set_capacity(size_t capacity);

    std::mutex& mutex() { return mu_; }

private:
    AlignedBuffer ir_copy_;  // the IR, when the caller's buffer was not 8-byte aligned (first: prog_ may point into it)

    ResidentTensors& resident_of(int32_t index);
    // Device mode: `fn` with the devices locked and ggml's aborts guarded; a lost device or a ggml abort
    // leaves the partition refused from then on (what ran is half-done).
    template <class Fn>
    auto on_devices(const char* doing, Fn&& fn) -> decltype(fn());
    void compute_on_devices(BuiltGraph& g);
    BuiltGraph& validate(const HostTensor* const* in, size_t n_in, const HostTensor* const* out, size_t n_out);
    // execute() up to the compute, on the host CPU and on devices: validate, look up (build), place,
    // stage. Under mu_.
    BuiltGraph& prepare(const HostTensor* const* in, size_t n_in, const HostTensor* const* out, size_t n_out);
    BuiltGraph& lookup(const Binding& b);
    void evict_last();
    void stage_buffers(BuiltGraph& g, const HostTensor* const* in, const HostTensor* const* out);
    void size_scratch();  // the per-call scratch below, for the program's inputs and outputs
    void check_indices(const HostTensor& h, const HostIndexCheck& c) const;

    Program prog_;
    Binder binder_;
    std::unique_ptr<ResidentTensors> resident_;  // the host CPU path
    DerivedConstants derived_;                   // computed once from its constants (before the graphs: outlives them)
    std::shared_ptr<Engine> engine_;             // the engine tensors are made for (device mode: the first)
    // device mode
    std::vector<std::shared_ptr<Engine>> engines_;
    std::unique_ptr<Placement> placement_;
    std::vector<int> last_op_slot_;  // device mode: where the last graph built runs each op
    std::vector<std::unique_ptr<ResidentTensors>> dev_resident_;  // per slot
    std::vector<ggml_backend_t> own_backends_;                    // CPU backends made for CPU engines
    std::vector<std::mutex*> locks_;                              // engines' and devices', in address order
    std::string failed_;                                          // why the partition is refused
    mutable std::mutex mu_;

    // graph cache: most recently used at the front
    std::list<std::unique_ptr<BuiltGraph>> lru_;
    std::unordered_map<std::vector<int64_t>, std::list<std::unique_ptr<BuiltGraph>>::iterator, KeyHash> index_;
    size_t capacity_;
    CacheStats stats_;

    AlignedBuffer spare_meta_;  // the metadata buffer of the last graph evicted, for the next build
    size_t tensor_hint_ = 0;    // ggml tensors the largest graph built so far needed

    // shared compute arena (grows to the largest graph seen; huge pages)
    AlignedBuffer arena_{true};
    uint64_t arena_generation_ = 0;

    // per-call scratch (kept to avoid allocation on the hot path)
    Binding binding_;
    std::vector<AlignedBuffer> in_stage_, out_stage_;
    std::vector<void*> in_ptr_, out_ptr_;
    std::vector<char> out_staged_;
};

}  // namespace dg
