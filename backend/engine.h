// The CPU engine: thread count, a persistent thread pool, and the work buffer
// ggml's kernels use. Partitions compiled for one engine share them; one
// graph computes at a time per engine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "aligned_buffer.h"
#include "ggml-cpu.h"
#include "ggml.h"

namespace dg {

class Device;

class Engine {
public:
    // `devices` empty: the host CPU (dyngraph's CPU path). Otherwise the
    // engine's partitions run on these devices through ggml-backend; the
    // thread pool serves the CPU parts of their graphs.
    explicit Engine(int n_threads, std::vector<std::shared_ptr<Device>> devices = {});
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    int n_threads() const { return n_threads_; }
    ggml_threadpool* threadpool() const { return threadpool_; }
    const std::vector<std::shared_ptr<Device>>& devices() const { return devices_; }
    bool is_cpu() const { return devices_.empty(); }
    // Whether `other` is interchangeable with this engine (oneDNN asks for the same device and
    // context, not the same object): the same devices (by name; none for the host CPU) and the
    // same thread count. Tensors and streams of either serve partitions of the other.
    bool same_as(const Engine& other) const;
    // For messages: "CPU engine (2 threads)", "engine of RPC0 (host:port), CPU (2 threads)".
    std::string describe() const;
    // A forked child has the pool but not its worker threads: computing would wait for them forever.
    // ExecutionError there instead (a one-thread engine has no workers and runs anywhere).
    void check_process() const;
    // Held while the thread pool computes (compute() takes it itself).
    std::mutex& mutex() { return mu_; }

    // Compute `graph` with a plan made by ggml_graph_plan for this engine.
    ggml_status compute(ggml_cgraph* graph, ggml_cplan& plan);

private:
    int n_threads_;
    long owner_pid_;  // the process that made the thread pool
    ggml_threadpool* threadpool_ = nullptr;
    std::mutex mu_;
    AlignedBuffer work_;
    std::vector<std::shared_ptr<Device>> devices_;
};

}  // namespace dg
