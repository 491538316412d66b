#include "compiled_partition.h"

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstring>

#include "errors.h"
#include "gg.h"
#include "ggml-cpu.h"
#include "verbose.h"

namespace dg {

namespace {

// Grow a host buffer, or refuse the execution: an allocation above the
// machine's memory would succeed (overcommit) and kill the process when touched.
void reserve_or_refuse(AlignedBuffer& buf, size_t n, const char* what) {
    const uint64_t ram = physical_memory();
    if (n > buf.size() && ram > 0 && n > ram)
        fail<ExecutionError>("the execution needs ", n, " bytes for ", what, ", more than this machine's ", ram, " bytes of memory");
    try {
        buf.reserve(n);
    } catch (const std::bad_alloc&) {
        fail<ExecutionError>("cannot allocate ", n, " bytes for ", what);
    }
}

// Before a compute: no kernel has failed, no computed index was refused.
void begin_compute(BuiltGraph& g) {
    for (auto& c : g.kernel_checks) c->bad = false;
    if (g.guards) g.guards->reset();
}

// After a compute: ggml's status, then a kernel that failed (KernelGuards), then an index a kernel
// refused; each refuses the execution, rolling back what it wrote in state where a journal holds it.
void end_compute(BuiltGraph& g, const Program& prog, ggml_status st) {
    if (st != GGML_STATUS_SUCCESS) {
        if (g.journal) g.journal->roll_back();
        fail<ExecutionError>("ggml compute failed: ", ggml_status_to_string(st));
    }
    if (g.guards && g.guards->failed()) {
        if (g.journal) g.journal->roll_back();
        const int k = g.guards->failed_op();
        const std::string op = k >= 0 && size_t(k) < prog.ops.size() ? prog.ops[size_t(k)].label() : "a kernel";
        fail<ExecutionError>(op, ": its kernel failed while computing: ", g.guards->what(),
                             g.journal ? " (state unchanged" : " (state it writes may be partly updated",
                             "; the outputs are not valid)");
    }
    for (const DeviceIndexCheck& c : g.device_checks) {
        float n = 0;
        ggml_backend_tensor_get(c.count, &n, 0, sizeof n);
        if (n != 0)
            fail<ExecutionError>(c.what, ": ", int64_t(n), " computed indices are outside [0, ", c.limit,
                                 "): the execution is refused (its outputs are not valid; on a device, state it writes "
                                 "holds the rows written at the indices clamped into range)");
    }
    for (auto& c : g.kernel_checks)
        if (c->bad) {
            if (g.journal) g.journal->roll_back();  // the state as it was before this call
            fail<ExecutionError>(c->what, ": computed index ", c->value.load(), " is outside [0, ", c->limit,
                                 "): the execution is refused (state unchanged; its outputs are not valid)");
        }
    if (g.journal) g.journal->clear();
}

}  // namespace

CompiledPartition::CompiledPartition(const uint8_t* ir, size_t ir_size, const std::map<int32_t, HostData>& external,
                                     std::shared_ptr<Engine> engine, size_t cache_capacity, bool borrow_ir, bool repack)
    : prog_(Program::parse(aligned_ir(ir, ir_size, ir_copy_), ir_size)), binder_(prog_), engine_(std::move(engine)),
      capacity_(cache_capacity) {
    if (capacity_ < 1) fail<CompileError>("the graph cache needs a capacity of at least 1");
    if (!engine_ || !engine_->is_cpu())
        fail<CompileError>("the host CPU path needs a CPU engine (an engine of devices takes the device path)");
    for (size_t i = 0; i < prog_.ops.size(); ++i)
        if (!lowerings().find(prog_.ops[i].kind))
            fail<CompileError>("op '", prog_.ops[i].name, "': the backend has no lowering for op kind ", prog_.ops[i].kind);
    for (const auto& [idx, d] : external) {
        if (idx < 0 || size_t(idx) >= prog_.tensors.size() || prog_.tensors[size_t(idx)].property == Property::Variable)
            fail<CompileError>("data given for tensor index ", idx, ", which is not a constant or state tensor");
    }
    // (a copy of the IR is not a file mapping: its pages must not be released)
    resident_ = std::make_unique<ResidentTensors>(prog_, external, borrow_ir && ir_copy_.size() == 0, repack);
    prog_.data.clear();  // it pointed into the IR buffer, which the caller may now release
    size_scratch();
}

CompiledPartition::CompiledPartition(const uint8_t* ir, size_t ir_size, const std::map<int32_t, HostData>& external,
                                     const std::vector<std::shared_ptr<Engine>>& engines, const std::vector<double>& shares,
                                     SplitRule rule, size_t cache_capacity, bool strict_placement)
    : prog_(Program::parse(aligned_ir(ir, ir_size, ir_copy_), ir_size)), binder_(prog_), capacity_(cache_capacity) {
    if (capacity_ < 1) fail<CompileError>("the graph cache needs a capacity of at least 1");
    if (engines.empty()) fail<CompileError>("compile needs at least one engine");
    for (const OpDef& op : prog_.ops)
        if (!lowerings().find(op.kind)) fail<CompileError>(op.label(), ": the backend has no lowering for it");
    for (const auto& [idx, d] : external)
        if (idx < 0 || size_t(idx) >= prog_.tensors.size() || prog_.tensors[size_t(idx)].property == Property::Variable)
            fail<CompileError>("data given for tensor index ", idx, ", which is not a constant or state tensor");
    engine_ = engines[0];
    engines_ = engines;
    placement_ = std::make_unique<Placement>();
    Placement& pl = *placement_;
    // the devices, in the engines' order; the scheduler wants a CPU backend last (inputs start there)
    std::vector<DeviceSlot> slots;
    std::vector<const Device*> seen;
    int cpu_slot = -1;
    for (const auto& e : engines) {
        if (!e) fail<CompileError>("compile got a null engine");
        for (auto* m : {&e->mutex()}) locks_.push_back(m);
        if (e->is_cpu()) {
            if (cpu_slot >= 0) fail<CompileError>("the host CPU is listed twice among the engines");
            ggml_backend_t cpu = ggml_backend_cpu_init();
            if (!cpu) fail<ExecutionError>("cannot create ggml's CPU backend");
            own_backends_.push_back(cpu);
            ggml_backend_cpu_set_n_threads(cpu, e->n_threads());
            ggml_backend_cpu_set_threadpool(cpu, e->threadpool());
            cpu_slot = int(slots.size());
            slots.push_back(DeviceSlot{"CPU (host)", true, cpu, {}});
            continue;
        }
        for (const auto& d : e->devices()) {
            if (std::find(seen.begin(), seen.end(), d.get()) != seen.end())
                fail<CompileError>("device ", d->name(), " is listed twice among the engines");
            seen.push_back(d.get());
            locks_.push_back(&d->mutex());
            slots.push_back(DeviceSlot{d->name(), false, d->backend(), d->connections()});
            for (auto* c : d->connections()) pl.conns.push_back(c);
        }
    }
    if (shares.size() != slots.size())
        fail<CompileError>("the split has ", shares.size(), " shares for ", slots.size(), " devices");
    for (double s : shares)
        if (!(s > 0) || !std::isfinite(s)) fail<CompileError>("split shares must be positive and finite, got ", s);
    std::vector<int> op_dev = split_ops(prog_, shares, rule);
    // scheduler order: the devices, then the CPU backend (the host CPU's slot, or one for the inputs)
    std::vector<int> order;
    for (int i = 0; i < int(slots.size()); ++i)
        if (i != cpu_slot) order.push_back(i);
    if (cpu_slot >= 0) {
        order.push_back(cpu_slot);
    } else {
        ggml_backend_t cpu = ggml_backend_cpu_init();
        if (!cpu) fail<ExecutionError>("cannot create ggml's CPU backend");
        own_backends_.push_back(cpu);
        ggml_backend_cpu_set_n_threads(cpu, engine_->n_threads());
        ggml_backend_cpu_set_threadpool(cpu, engine_->threadpool());
        slots.push_back(DeviceSlot{"CPU (host)", true, cpu, {}});
        order.push_back(int(slots.size()) - 1);
    }
    std::vector<int> slot_of(slots.size());
    for (size_t k = 0; k < order.size(); ++k) {
        slot_of[size_t(order[k])] = int(k);
        pl.slots.push_back(slots[size_t(order[k])]);
    }
    pl.host_slot = int(pl.slots.size()) - 1;  // (the CPU backend is the scheduler's last)
    pl.strict = strict_placement;
    pl.op_slot.resize(op_dev.size());
    for (size_t k = 0; k < op_dev.size(); ++k) pl.op_slot[k] = slot_of[size_t(op_dev[k])];
    std::sort(locks_.begin(), locks_.end());
    locks_.erase(std::unique(locks_.begin(), locks_.end()), locks_.end());
    // weights and state: on each device, what its ops read (uploaded once)
    auto subsets = resident_subsets(prog_, pl.op_slot, pl.slots.size());
    dev_resident_.resize(pl.slots.size());
    for (size_t s = 0; s < pl.slots.size(); ++s) {
        bool any = false;
        for (char c : subsets[s]) any = any || c;
        if (!any) continue;
        ResidentPlace place;
        place.subset = subsets[s];
        place.buft = pl.slots[s].host ? ggml_backend_cpu_buffer_type() : ggml_backend_get_default_buffer_type(pl.slots[s].backend);
        place.device = pl.slots[s].name;
        place.conns = pl.slots[s].conns;
        on_devices("uploading weights and state", [&] {
            dev_resident_[s] = std::make_unique<ResidentTensors>(prog_, external, false, false, &place);
        });
    }
    for (const auto& r : dev_resident_) pl.resident.push_back(r.get());
    ResidentPlace none;  // the host path's holder, empty here (build_graph reads the devices' own)
    none.subset.assign(prog_.tensors.size(), 0);
    none.buft = ggml_backend_cpu_buffer_type();
    resident_ = std::make_unique<ResidentTensors>(prog_, external, false, false, &none);
    prog_.data.clear();
    size_scratch();
}

void CompiledPartition::size_scratch() {
    const size_t n_in = prog_.inputs.size(), n_out = prog_.outputs.size();
    in_stage_.resize(n_in);
    out_stage_.resize(n_out);
    in_ptr_.resize(n_in);
    out_ptr_.resize(n_out);
    out_staged_.resize(n_out);
}

CompiledPartition::~CompiledPartition() {
    index_.clear();
    lru_.clear();  // graphs first: their schedulers use the backends and buffers below
    dev_resident_.clear();
    for (ggml_backend_t b : own_backends_) ggml_backend_free(b);
}

template <class Fn>
auto CompiledPartition::on_devices(const char* doing, Fn&& fn) -> decltype(fn()) {
    if (!failed_.empty())
        fail<DeviceError>("this compiled partition cannot run any more: ", failed_);
    std::vector<std::unique_lock<std::mutex>> held;
    held.reserve(locks_.size());
    for (std::mutex* m : locks_) held.emplace_back(*m);
    try {
        return remote::guarded(placement_->conns, doing, std::forward<Fn>(fn), true);
    } catch (const DeviceError& e) {
        failed_ = e.what();
        throw;
    } catch (const GgmlAbort& e) {
        failed_ = e.what();
        throw;
    }
}

std::vector<CompiledPartition::SlotSummary> CompiledPartition::placement_summary() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<SlotSummary> r;
    if (!placement_) return r;
    for (size_t s = 0; s < placement_->slots.size(); ++s) {
        SlotSummary x;
        x.device = placement_->slots[s].name;
        // the last graph built (a device may run an op at one size and not another), else the compile's plan
        for (int o : last_op_slot_.empty() ? placement_->op_slot : last_op_slot_) x.ops += o == int(s);
        if (dev_resident_[s]) x.resident_bytes = dev_resident_[s]->constant_bytes() + dev_resident_[s]->state_bytes();
        r.push_back(x);
    }
    return r;
}

std::vector<std::string> CompiledPartition::op_devices() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> r;
    if (!placement_) return r;
    for (int o : last_op_slot_.empty() ? placement_->op_slot : last_op_slot_)
        r.push_back(o >= 0 && size_t(o) < placement_->slots.size() ? placement_->slots[size_t(o)].name : std::string());
    return r;
}

std::pair<uint64_t, uint64_t> CompiledPartition::remote_traffic() const {
    uint64_t sent = 0, received = 0;
    if (placement_)
        for (const remote::Connection* c : placement_->conns) {
            sent += c->bytes_sent();
            received += c->bytes_received();
        }
    return {sent, received};
}

ResidentTensors& CompiledPartition::resident_of(int32_t index) {
    if (!placement_) return *resident_;
    for (auto& r : dev_resident_)
        if (r && r->holds(index)) return *r;
    fail<ShapeError>("tensor index ", index, " holds no data");
}

std::vector<uint8_t> CompiledPartition::export_data(int32_t index) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!placement_) return resident_->export_data(index);
    return on_devices("reading weights", [&] { return resident_of(index).export_data(index); });
}

void CompiledPartition::read_state(int32_t index, void* dst, size_t nbytes) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!placement_) return resident_->read_state(index, dst, nbytes);
    on_devices("reading state", [&] { resident_of(index).read_state(index, dst, nbytes); });
}

void CompiledPartition::write_state(int32_t index, const void* src, size_t nbytes) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!placement_) return resident_->write_state(index, src, nbytes);
    on_devices("writing state", [&] { resident_of(index).write_state(index, src, nbytes); });
}

void CompiledPartition::reset_state() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!placement_) return resident_->reset_state();
    on_devices("resetting state", [&] {
        for (auto& r : dev_resident_)
            if (r) r->reset_state();
    });
}

BuiltGraph& CompiledPartition::lookup(const Binding& b) {
    auto it = index_.find(b.symbols);
    if (it != index_.end()) {
        ++stats_.hits;
        if (it->second != lru_.begin()) lru_.splice(lru_.begin(), lru_, it->second);
        return *lru_.front();
    }
    binder_.check_all_dims(b);
    BuildOptions opts;
    opts.n_threads = engine_->n_threads();
    opts.threadpool = engine_->threadpool();
    while (lru_.size() >= capacity_) evict_last();  // first: its metadata buffer can serve the new graph
    opts.recycled = &spare_meta_;
    opts.tensor_hint = tensor_hint_;
    opts.derived = &derived_;
    std::unique_ptr<BuiltGraph> g;
    if (placement_) {
        opts.placement = placement_.get();
        g = on_devices("allocating a graph's buffers", [&] { return build_graph(prog_, *resident_, b, opts); });
    } else {
        g = build_graph(prog_, *resident_, b, opts);
    }
    tensor_hint_ = std::max(tensor_hint_, g->n_tensors);
    ++stats_.misses;
    stats_.build_seconds += g->build_seconds;
    stats_.last_build_seconds = g->build_seconds;
    stats_.last_graph_nodes = g->n_nodes();
    if (placement_) {
        stats_.host_fallback_ops = g->host_fallback_ops;
        stats_.graph_splits = g->n_splits;
        last_op_slot_ = g->op_slot;
    }
    if (verbose::creation()) verbose::build(this, engine_kind().c_str(), prog_, b, g->n_nodes(), g->build_seconds * 1e3);
    lru_.push_front(std::move(g));
    index_.emplace(lru_.front()->key, lru_.begin());
    return *lru_.front();
}

std::vector<Dims> CompiledPartition::infer(const HostTensor* const* in, size_t n_in, bool build, bool check_dtype) {
    std::lock_guard<std::mutex> lock(mu_);
    Binding b;
    binder_.bind(in, n_in, b, check_dtype);
    if (build) return lookup(b).output_shapes;
    binder_.check_all_dims(b);
    std::vector<Dims> shapes;
    for (int32_t o : prog_.outputs) {
        const TensorDef& t = prog_.tensors[size_t(o)];
        Dims s;
        s.rank = int(t.shape.size());
        for (int d = 0; d < s.rank; ++d) s.d[d] = b.values[size_t(t.shape[size_t(d)])];
        shapes.push_back(s);
    }
    return shapes;
}

void CompiledPartition::check_indices(const HostTensor& h, const HostIndexCheck& c) const {
    const int64_t n = h.numel();
    auto bad = [&](int64_t i, int64_t v) {
        fail<ShapeError>(c.what, ": index ", v, " at element ", i, " of ", binder_.input_label(size_t(c.port)),
                         " is outside [0, ", c.limit, ")");
    };
    if (h.dtype == DType::I64) {
        const int64_t* p = static_cast<const int64_t*>(h.data);
        for (int64_t i = 0; i < n; ++i)
            if (p[i] < 0 || p[i] >= c.limit) bad(i, p[i]);
    } else {
        const int32_t* p = static_cast<const int32_t*>(h.data);
        for (int64_t i = 0; i < n; ++i)
            if (p[i] < 0 || p[i] >= c.limit) bad(i, p[i]);
    }
}

static bool overlaps(const HostTensor& a, const HostTensor& b) {
    auto pa = static_cast<const char*>(a.data), pb = static_cast<const char*>(b.data);
    return pa < pb + b.nbytes && pb < pa + a.nbytes;
}

// Where each input is read from and each output written to: the caller's memory where ggml can use it
// as it is, else a staging buffer (a converted copy of an input; an output computed aside and converted
// or copied at the end). An output that overlaps an input or an earlier output is computed aside, on the
// host CPU as on devices. On the host CPU the graph's external tensors then point at that memory; on
// devices execute() copies it to and from the graph's tensors (an input no node reads has none).
void CompiledPartition::stage_buffers(BuiltGraph& g, const HostTensor* const* in, const HostTensor* const* out) {
    const size_t n_in = prog_.inputs.size(), n_out = prog_.outputs.size();
    for (size_t i = 0; i < n_in; ++i) {
        const HostTensor& h = *in[i];
        ggml_tensor* leaf = g.inputs[i];
        if (placement_ && !leaf->buffer) {
            in_ptr_[i] = nullptr;  // read by no node (a shape input): nothing to copy
            continue;
        }
        bool aligned = reinterpret_cast<uintptr_t>(h.data) % dtype_size(h.dtype) == 0;
        if (host_matches_ggml(h.dtype) && aligned) {
            in_ptr_[i] = h.data;
        } else {
            reserve_or_refuse(in_stage_[i], ggml_nbytes(leaf), "a converted copy of an input");
            convert_to_ggml(h.dtype, h.data, leaf->type, in_stage_[i].data(), h.numel(), h.shape[h.ndim ? h.ndim - 1 : 0],
                            binder_.input_label(i));
            in_ptr_[i] = in_stage_[i].data();
            ++stats_.staged_inputs;
        }
    }
    for (size_t j = 0; j < n_out; ++j) {
        const HostTensor& h = *out[j];
        bool staged = !host_matches_ggml(h.dtype) || reinterpret_cast<uintptr_t>(h.data) % dtype_size(h.dtype) != 0;
        for (size_t i = 0; i < n_in && !staged; ++i) staged = overlaps(h, *in[i]);
        for (size_t k = 0; k < j && !staged; ++k) staged = overlaps(h, *out[k]);
        out_staged_[j] = staged;
        if (staged) {
            reserve_or_refuse(out_stage_[j], ggml_nbytes(g.outputs[j]), "a converted copy of an output");
            out_ptr_[j] = out_stage_[j].data();
            ++stats_.staged_outputs;
        } else {
            out_ptr_[j] = h.data;
        }
    }
    if (placement_) return;
    for (const ExternalRef& e : g.external)
        e.tensor->data = static_cast<char*>(e.output ? out_ptr_[size_t(e.port)] : in_ptr_[size_t(e.port)]) + e.offset;
}

BuiltGraph& CompiledPartition::validate(const HostTensor* const* in, size_t n_in, const HostTensor* const* out,
                                        size_t n_out) {
    binder_.bind(in, n_in, binding_);
    if (n_out != prog_.outputs.size()) fail<ShapeError>("expected ", prog_.outputs.size(), " outputs, got ", n_out);
    // a tensor's engine: the partition's, or one interchangeable with it (Engine::same_as); `what()` names
    // the tensor, made only for a message (strings built at every call were most of this check's time)
    auto check_engine = [&](const HostTensor& h, auto what) {
        const auto* e = static_cast<const Engine*>(h.engine);
        if (e && e->same_as(*engine_)) return;
        if (!e)
            fail<ExecutionError>(what(), " was made without an engine (tensors must be made for the engine the partition "
                                         "was compiled for, or an equal one)");
        fail<ExecutionError>(what(), " was made for another engine: a ", e->describe(), ", the partition's is a ",
                             engine_->describe(), " (tensors must be made for an equal engine: same devices and threads)");
    };
    for (size_t i = 0; i < n_in; ++i) {
        if (in[i]->data == nullptr) fail<ExecutionError>(binder_.input_label(i), " has no data");
        check_engine(*in[i], [&] { return binder_.input_label(i); });
    }
    for (size_t j = 0; j < n_out; ++j) check_engine(*out[j], [&] { return cat("output ", j); });
    BuiltGraph& g = lookup(binding_);
    for (size_t j = 0; j < n_out; ++j) {
        const TensorDef& t = prog_.tensors[size_t(prog_.outputs[j])];
        const HostTensor& h = *out[j];
        const Dims& s = g.output_shapes[j];
        if (h.id != t.id) fail<ShapeError>("output ", j, " should be tensor ", t.label(), ", got tensor id ", h.id);
        if (h.dtype != t.dtype)
            fail<DTypeError>("output ", j, " ", t.label(), ": expected dtype ", dtype_name(t.dtype), ", got ", dtype_name(h.dtype));
        bool same = h.ndim == s.rank;
        for (int d = 0; same && d < s.rank; ++d) same = h.shape[d] == s.d[d];
        if (!same) {
            Dims got;
            got.rank = h.ndim;
            for (int d = 0; d < h.ndim; ++d) got.d[d] = h.shape[d];
            fail<ShapeError>("output ", j, " ", t.label(), ": expected shape ", s.str(), " for these inputs, got ", got.str(),
                             " (allocate outputs from infer_outputs())");
        }
        if (h.data == nullptr || !h.writable) fail<ExecutionError>("output ", j, " ", t.label(), " is not a writable buffer");
    }
    return g;
}

BuiltGraph& CompiledPartition::prepare(const HostTensor* const* in, size_t n_in, const HostTensor* const* out,
                                       size_t n_out) {
    if (placement_ && !failed_.empty()) fail<DeviceError>("this compiled partition cannot run any more: ", failed_);
    BuiltGraph& g = validate(in, n_in, out, n_out);
    if (!placement_) {  // (on devices the scheduler allocates the graph's memory)
        if (g.plan.size > arena_.size()) {
            reserve_or_refuse(arena_, g.plan.size, "working memory for these shapes");
            ++arena_generation_;
        }
        if (g.arena_generation != arena_generation_) {
            apply_plan(g.plan, arena_.data());
            g.arena_generation = arena_generation_;
        }
    }
    for (const HostIndexCheck& c : g.host_checks) check_indices(*in[c.port], c);
    stage_buffers(g, in, out);
    return g;
}

// Device mode: the staged inputs into the graph's input tensors (which the scheduler placed in host
// memory; it copies them on to the devices that read them), the compute, the outputs back.
void CompiledPartition::compute_on_devices(BuiltGraph& g) {
    for (const auto& e : engines_) e->check_process();
    on_devices("computing", [&] {
        for (size_t i = 0; i < prog_.inputs.size(); ++i)
            if (in_ptr_[i]) {
                ggml_backend_tensor_set(g.inputs[i], in_ptr_[i], 0, ggml_nbytes(g.inputs[i]));
                ++stats_.device_copies;
                stats_.device_copy_bytes += ggml_nbytes(g.inputs[i]);
            }
        begin_compute(g);
        end_compute(g, prog_, ggml_backend_sched_graph_compute(g.sched, g.graph));
        for (size_t j = 0; j < prog_.outputs.size(); ++j) {
            ggml_backend_tensor_get(g.outputs[j], out_ptr_[j], 0, ggml_nbytes(g.outputs[j]));
            ++stats_.device_copies;
            stats_.device_copy_bytes += ggml_nbytes(g.outputs[j]);
        }
    });
}

void CompiledPartition::execute(const HostTensor* const* in, size_t n_in, const HostTensor* const* out, size_t n_out) {
    const double t0 = verbose::on() ? verbose::now_ms() : 0.0;
    std::lock_guard<std::mutex> lock(mu_);
    const uint64_t misses = stats_.misses;
    // verbose says "miss" when this execute built its graph, or when the graph
    // was built for it by the infer_outputs just before (cp(...)) and never ran
    auto report = [&] {
        BuiltGraph& g = *lru_.front();  // lookup() puts the graph it returns first
        const bool fresh = !g.executed || stats_.misses != misses;
        g.executed = true;
        if (verbose::on())
            verbose::exec(this, engine_kind().c_str(), prog_, binding_, fresh, in, n_in, out, n_out, verbose::now_ms() - t0);
    };
    BuiltGraph& g = prepare(in, n_in, out, n_out);
    if (placement_) {
        compute_on_devices(g);
    } else {
        begin_compute(g);
        end_compute(g, prog_, engine_->compute(g.graph, g.cplan));
    }
    for (size_t j = 0; j < n_out; ++j)
        if (out_staged_[j]) convert_from_ggml(g.outputs[j]->type, out_ptr_[j], out[j]->dtype, out[j]->data, out[j]->numel());
    ++stats_.executions;
    report();
}

std::string CompiledPartition::engine_kind() const {
    if (!placement_) return "cpu";
    std::string s;
    for (const DeviceSlot& d : placement_->slots) s += (s.empty() ? "" : "+") + d.name;
    return s;
}

double CompiledPartition::time_compute(const HostTensor* const* in, size_t n_in, const HostTensor* const* out, size_t n_out,
                                       int iters) {
    std::lock_guard<std::mutex> lock(mu_);
    if (placement_) fail<ExecutionError>("time_compute measures the host CPU path; this partition runs on devices");
    // what execute() does before computing, and nothing else: the first timed
    // compute meets the caches as the previous call left them, as execute() does
    BuiltGraph& g = prepare(in, n_in, out, n_out);
    std::vector<double> ns(size_t(std::max(iters, 1)));
    for (double& t : ns) {
        auto t0 = std::chrono::steady_clock::now();
        engine_->compute(g.graph, g.cplan);
        t = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
        if (g.journal) g.journal->clear();
    }
    std::nth_element(ns.begin(), ns.begin() + long(ns.size() / 2), ns.end());
    return ns[ns.size() / 2];
}

std::vector<CompiledPartition::NodeTime> CompiledPartition::time_nodes(const HostTensor* const* in, size_t n_in,
                                                                       const HostTensor* const* out, size_t n_out,
                                                                       int iters) {
    std::lock_guard<std::mutex> lock(mu_);
    if (placement_) fail<ExecutionError>("time_nodes measures the host CPU path; this partition runs on devices");
    BuiltGraph& g = prepare(in, n_in, out, n_out);
    const int n = ggml_graph_n_nodes(g.graph);
    ggml_init_params ip{ggml_graph_overhead_custom(1, false), nullptr, true};
    std::unique_ptr<ggml_context, decltype(&ggml_free)> ctx(ggml_init(ip), &ggml_free);
    if (!ctx) fail<ExecutionError>("time_nodes: no memory for a one-node graph");
    ggml_cgraph* one = ggml_new_graph_custom(ctx.get(), 1, false);
    const size_t rounds = size_t(std::max(iters, 1));
    std::vector<std::vector<double>> ns(static_cast<size_t>(n), std::vector<double>(rounds));
    for (size_t it = 0; it < rounds; ++it) {
        for (int i = 0; i < n; ++i) {
            ggml_graph_clear(one);
            ggml_graph_add_node(one, ggml_graph_node(g.graph, i));
            auto t0 = std::chrono::steady_clock::now();
            engine_->compute(one, g.cplan);
            ns[size_t(i)][it] = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
        }
        if (g.journal) g.journal->clear();
    }
    std::vector<NodeTime> r;
    for (int i = 0; i < n; ++i) {
        const ggml_tensor* t = ggml_graph_node(g.graph, i);
        std::vector<double>& v = ns[size_t(i)];
        std::nth_element(v.begin(), v.begin() + long(v.size() / 2), v.end());
        std::string srcs;
        for (const ggml_tensor* s : t->src)
            if (s)
                srcs += cat(srcs.empty() ? "" : " ", gg::describe(s), " nb [", s->nb[0], ", ", s->nb[1], ", ", s->nb[2],
                            ", ", s->nb[3], "]");
        r.push_back({ggml_op_desc(t), ggml_get_name(t), ggml_type_name(t->type), {t->ne[0], t->ne[1], t->ne[2], t->ne[3]},
                     srcs, v[v.size() / 2]});
    }
    return r;
}

CacheStats CompiledPartition::stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    CacheStats s = stats_;
    s.entries = lru_.size();
    s.capacity = capacity_;
    s.metadata_bytes = 0;
    for (const auto& g : lru_) s.metadata_bytes += g->metadata_bytes();
    s.arena_bytes = arena_.size();
    s.constant_bytes = resident_->constant_bytes();
    s.borrowed_bytes = resident_->borrowed_bytes();
    s.repacked_bytes = resident_->repacked_bytes();
    s.panel_bytes = resident_->panel_bytes();
    s.state_bytes = resident_->state_bytes();
    s.derived_bytes = derived_.bytes();
    for (const auto& r : dev_resident_)
        if (r) {
            s.constant_bytes += r->constant_bytes();
            s.state_bytes += r->state_bytes();
        }
    return s;
}

void CompiledPartition::evict_last() {
    if (verbose::creation()) verbose::evict(this, engine_kind().c_str(), prog_, lru_.back()->key, lru_.size() - 1);
    index_.erase(lru_.back()->key);
    AlignedBuffer meta = lru_.back()->release_metadata();
    if (meta.size() > spare_meta_.size()) spare_meta_ = std::move(meta);
    lru_.pop_back();
    ++stats_.evictions;
}

void CompiledPartition::use_engine(std::shared_ptr<Engine> engine) {
    std::lock_guard<std::mutex> lock(mu_);
    if (placement_) fail<ExecutionError>("a partition that runs on devices keeps the engines it was compiled for");
    if (!engine || !engine->is_cpu()) fail<ExecutionError>("the host CPU path needs a CPU engine");
    if (engine.get() == engine_.get()) return;
    // a built graph's plan (its ggml work size) is for a thread count; Engine::compute gives it the
    // engine's pool, so graphs built for as many threads keep serving
    if (engine->n_threads() != engine_->n_threads())
        while (!lru_.empty()) {
            evict_last();
            --stats_.evictions;  // dropped for the new engine, not evicted
        }
    engine_ = std::move(engine);
}

void CompiledPartition::clear_cache() {
    std::lock_guard<std::mutex> lock(mu_);
    while (!lru_.empty()) {
        evict_last();
        --stats_.evictions;  // cleared on request, not evicted
    }
}

void CompiledPartition::set_capacity(size_t capacity) {
    std::lock_guard<std::mutex> lock(mu_);
    if (capacity < 1) fail<CompileError>("the graph cache needs a capacity of at least 1");
    capacity_ = capacity;
    while (lru_.size() > capacity_) evict_last();
}

}  // namespace dg
