#include "engine.h"

#include <unistd.h>

#include "device.h"
#include "errors.h"
#include "openblas_check.h"

namespace dg {

Engine::Engine(int n_threads, std::vector<std::shared_ptr<Device>> devices)
    : n_threads_(n_threads), owner_pid_(long(getpid())), devices_(std::move(devices)) {
    if (n_threads < 1 || n_threads > GGML_MAX_N_THREADS) fail<ExecutionError>("invalid thread count ", n_threads);
    require_sound_openblas();
    ggml_threadpool_params p = ggml_threadpool_params_default(n_threads);
    threadpool_ = ggml_threadpool_new(&p);
    if (!threadpool_) fail<ExecutionError>("cannot create a thread pool of ", n_threads, " threads");
}

Engine::~Engine() {
    // In a forked child the pool's worker threads do not exist: freeing it would wait for them forever.
    // The child leaks the parent's pool instead.
    if (threadpool_ && long(getpid()) == owner_pid_) ggml_threadpool_free(threadpool_);
}

bool Engine::same_as(const Engine& other) const {
    if (this == &other) return true;
    if (n_threads_ != other.n_threads_ || devices_.size() != other.devices_.size()) return false;
    for (size_t i = 0; i < devices_.size(); ++i)
        if (devices_[i] != other.devices_[i] &&
            (devices_[i]->kind() != other.devices_[i]->kind() || devices_[i]->name() != other.devices_[i]->name()))
            return false;
    return true;
}

std::string Engine::describe() const {
    if (is_cpu()) return cat("CPU engine (", n_threads_, n_threads_ == 1 ? " thread)" : " threads)");
    std::string r = "engine of ";
    for (const auto& d : devices_) r += d->name() + ", ";
    return cat(r, "CPU (", n_threads_, n_threads_ == 1 ? " thread)" : " threads)");
}

void Engine::check_process() const {
    if (n_threads_ > 1 && long(getpid()) != owner_pid_)
        fail<ExecutionError>("this ", describe(), " was made in process ", owner_pid_, "; process ", long(getpid()),
                             " (a child made by fork) has its thread pool but none of its threads: make an engine "
                             "in the child (dyngraph.Engine.shared() does) and compile there");
}

ggml_status Engine::compute(ggml_cgraph* graph, ggml_cplan& plan) {
    check_process();
    std::lock_guard<std::mutex> lock(mu_);
    if (plan.work_size > 0) {
        try {
            work_.reserve(plan.work_size);
        } catch (const std::bad_alloc&) {
            fail<ExecutionError>("cannot allocate ", plan.work_size, " bytes of ggml work memory");
        }
        plan.work_data = static_cast<uint8_t*>(work_.data());
    } else {
        plan.work_data = nullptr;
    }
    plan.n_threads = n_threads_;
    plan.threadpool = threadpool_;
    return ggml_graph_compute(graph, &plan);
}

}  // namespace dg
