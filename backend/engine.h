// The CPU engine: thread count, a persistent thread pool, and the work buffer
// ggml's kernels use. Partitions compiled for one engine share them; one
// graph computes at a time per engine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>

#include "aligned_buffer.h"
#include "ggml-cpu.h"
#include "ggml.h"

namespace dg {

class Engine {
public:
    explicit Engine(int n_threads);
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    int n_threads() const { return n_threads_; }
    ggml_threadpool* threadpool() const { return threadpool_; }

    // Compute `graph` with a plan made by ggml_graph_plan for this engine.
    ggml_status compute(ggml_cgraph* graph, ggml_cplan& plan);

private:
    int n_threads_;
    ggml_threadpool* threadpool_ = nullptr;
    std::mutex mu_;
    AlignedBuffer work_;
};

}  // namespace dg
