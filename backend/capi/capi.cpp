// The C API (include/dyngraph/dyngraph.h) over the C++ runtime. Every entry point catches
// everything: C++ exceptions become status codes and a thread-local message.
#include "dyngraph/dyngraph.h"

#include <sched.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "compiled_partition.h"
#include "device.h"
#include "engine.h"
#include "errors.h"
#include "ggml_log.h"
#include "host_tensor.h"
#include "remote.h"
#include "saved_file.h"
#include "verbose.h"

using namespace dg;

struct dg_partition {
    std::unique_ptr<saved::MappedFile> file;  // the loaded file, when the weights are used in place (first: outlives cp)
    std::unique_ptr<CompiledPartition> cp;
    std::shared_ptr<Engine> engine;
    std::vector<int32_t> states;  // tensor indices of the STATE tensors
    // per port dimension: its expression string and range (computed once)
    struct DimInfo {
        std::string expr;
        int64_t min, max;
    };
    std::vector<std::vector<DimInfo>> in_dims, out_dims;
};

namespace {

// A dtype as the caller wrote it. C lets any int sit in an enum; in C++ a load of a value
// outside dg_dtype's enumerators is undefined (UBSan: -fsanitize=enum), so read the bytes.
static_assert(sizeof(dg_dtype) == sizeof(int32_t), "dg_dtype is an int");
int raw_dtype(const dg_dtype* field) {
    int32_t v;
    std::memcpy(&v, field, sizeof v);
    return v;
}

thread_local std::string t_error;

dg_status set_error(dg_status s, const char* msg) {
    try {
        t_error = msg;
    } catch (...) {
    }
    return s;
}

// Runs `fn`, mapping dyngraph's exceptions (errors.h, remote.h) to status codes.
template <class Fn>
dg_status guarded(Fn&& fn) noexcept {
    try {
        fn();
        return DG_OK;
    } catch (const ShapeError& e) {
        return set_error(DG_ERR_SHAPE, e.what());
    } catch (const DTypeError& e) {
        return set_error(DG_ERR_DTYPE, e.what());
    } catch (const IRError& e) {
        return set_error(DG_ERR_IR, e.what());
    } catch (const CompileError& e) {
        return set_error(DG_ERR_COMPILE, e.what());
    } catch (const DeviceError& e) {
        return set_error(DG_ERR_DEVICE, e.what());
    } catch (const ExecutionError& e) {
        return set_error(DG_ERR_EXECUTION, e.what());
    } catch (const Error& e) {
        return set_error(DG_ERR_INVALID, e.what());
    } catch (const std::bad_alloc&) {
        return set_error(DG_ERR_OUT_OF_MEMORY, "out of memory");
    } catch (const std::exception& e) {
        return set_error(DG_ERR_INTERNAL, e.what());
    } catch (...) {
        return set_error(DG_ERR_INTERNAL, "unknown error");
    }
}

struct Invalid : Error {
    using Error::Error;
};

#define DG_REQUIRE(cond, ...) \
    do {                      \
        if (!(cond)) fail<Invalid>(__VA_ARGS__); \
    } while (0)

void init_once() {
    static std::once_flag once;
    std::call_once(once, [] {
        install_ggml_log();
        if (std::string w = verbose::init_from_env(); !w.empty()) std::fprintf(stderr, "dyngraph: warning: %s\n", w.c_str());
    });
}

// DYNGRAPH_NUM_THREADS, else the cores this process may use (at most 8): as dyngraph.Engine.
int default_threads() {
    if (const char* env = std::getenv("DYNGRAPH_NUM_THREADS"); env && *env) {
        char* end = nullptr;
        const long v = std::strtol(env, &end, 10);
        if (*end == '\0') return v < 1 ? 1 : v > 1024 ? 1024 : int(v);
    }
    cpu_set_t set;
    int n = 1;
    if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
    return n < 1 ? 1 : n > 8 ? 8 : n;
}

std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> r;
    size_t start = 0;
    for (;;) {
        const size_t k = s.find(sep, start);
        r.push_back(s.substr(start, k == std::string::npos ? std::string::npos : k - start));
        if (k == std::string::npos) return r;
        start = k + 1;
    }
}

struct EngineSpec {
    std::shared_ptr<Engine> engine;
    size_t n_devices = 0;  // 0: the host CPU path
};

EngineSpec parse_engine(const char* spec) {
    const std::string s = spec ? spec : "cpu";
    const auto bad = [&] {
        fail<Invalid>("unknown engine '", s, "': one of \"cpu\", \"cpu:THREADS\", \"rpc:HOST:PORT[,HOST:PORT...]\", \"gpu\", "
                      "\"gpu:DEVICE\"");
    };
    EngineSpec r;
    if (s.empty() || s == "cpu") {
        r.engine = std::make_shared<Engine>(default_threads());
    } else if (s.rfind("cpu:", 0) == 0) {
        const std::string n = s.substr(4);
        if (n.empty() || n.size() > 4 || n.find_first_not_of("0123456789") != std::string::npos) bad();
        const int threads = std::atoi(n.c_str());
        DG_REQUIRE(threads >= 1 && threads <= 1024, "engine '", s, "': the thread count must lie in [1, 1024]");
        r.engine = std::make_shared<Engine>(threads);
    } else if (s.rfind("rpc:", 0) == 0) {
        const std::vector<std::string> eps = split(s.substr(4), ',');
        std::vector<std::shared_ptr<Device>> devs;
        for (size_t i = 0; i < eps.size(); ++i) {
            const std::string& e = eps[i];
            const size_t colon = e.rfind(':');
            if (e.empty() || colon == std::string::npos || colon == 0 || colon + 1 == e.size() ||
                e.find_first_not_of("0123456789", colon + 1) != std::string::npos)
                fail<Invalid>("engine '", s, "': '", e, "' is not HOST:PORT");
            for (size_t j = 0; j < i; ++j)
                DG_REQUIRE(eps[j] != e, "engine '", s, "': endpoint ", e, " is named twice");
            for (auto& d : Device::open_rpc(e, 5.0, 60.0)) devs.push_back(std::move(d));
        }
        r.n_devices = devs.size();
        r.engine = std::make_shared<Engine>(default_threads(), std::move(devs));
    } else if (s == "gpu" || s.rfind("gpu:", 0) == 0) {
        std::string name = s.size() > 4 ? s.substr(4) : "";
        if (s.size() == 4) bad();  // "gpu:"
        if (name.empty()) {
            for (const DeviceInfo& d : list_devices())
                if (d.kind == "gpu" || d.kind == "igpu") {
                    name = d.name;
                    break;
                }
            if (name.empty())
                fail<DeviceError>("this ggml has no GPU device (build it with GGML_CUDA=ON or GGML_VULKAN=ON: "
                                  "third_party/ggml/README.md)");
        }
        r.engine = std::make_shared<Engine>(default_threads(), std::vector<std::shared_ptr<Device>>{Device::open_local(name)});
        r.n_devices = 1;
    } else {
        bad();
    }
    return r;
}

constexpr size_t kDefaultCapacity = 16;

// The range of every expression node, from the symbols' ranges (saturating at the int64 limits).
struct Range {
    int64_t lo, hi;
};

int64_t sat_add(int64_t a, int64_t b) {
    int64_t r;
    return __builtin_add_overflow(a, b, &r) ? (b > 0 ? INT64_MAX : INT64_MIN) : r;
}
int64_t sat_mul(int64_t a, int64_t b) {
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? (((a < 0) != (b < 0)) ? INT64_MIN : INT64_MAX) : r;
}

std::vector<Range> node_ranges(const Program& prog) {
    std::vector<Range> r(prog.exprs.size(), Range{INT64_MIN, INT64_MAX});
    const Range any{INT64_MIN, INT64_MAX};
    for (size_t i = 0; i < prog.exprs.size(); ++i) {
        const ExprNode& e = prog.exprs[i];
        if (prog.is_const[i]) {
            r[i] = {prog.const_vals[i], prog.const_vals[i]};
            continue;
        }
        // operands come before the node (Program::parse checks the order); anything else is unbounded
        const auto at = [&](int64_t k) { return k >= 0 && size_t(k) < i ? r[size_t(k)] : any; };
        switch (e.op) {
            case ExprOp::Const: r[i] = {e.a, e.a}; break;
            case ExprOp::Symbol:
                if (e.a >= 0 && size_t(e.a) < prog.symbols.size())
                    r[i] = {prog.symbols[size_t(e.a)].min, prog.symbols[size_t(e.a)].max};
                break;
            case ExprOp::Add: {
                const Range a = at(e.a), b = at(e.b);
                r[i] = {sat_add(a.lo, b.lo), sat_add(a.hi, b.hi)};
                break;
            }
            case ExprOp::Sub: {
                const Range a = at(e.a), b = at(e.b);
                r[i] = {b.hi == INT64_MIN ? INT64_MIN : sat_add(a.lo, -b.hi), b.lo == INT64_MIN ? INT64_MAX : sat_add(a.hi, -b.lo)};
                break;
            }
            case ExprOp::Mul: {
                const Range a = at(e.a), b = at(e.b);
                const int64_t c[4] = {sat_mul(a.lo, b.lo), sat_mul(a.lo, b.hi), sat_mul(a.hi, b.lo), sat_mul(a.hi, b.hi)};
                r[i] = {std::min(std::min(c[0], c[1]), std::min(c[2], c[3])), std::max(std::max(c[0], c[1]), std::max(c[2], c[3]))};
                break;
            }
            case ExprOp::FloorDiv: {
                const Range a = at(e.a), b = at(e.b);
                if (b.lo > 0 && a.lo >= 0) r[i] = {a.lo / b.hi, a.hi / b.lo};
                break;
            }
            case ExprOp::Mod: {
                const Range b = at(e.b);
                if (b.lo > 0) r[i] = {0, b.hi - 1};
                break;
            }
            case ExprOp::Min: {
                const Range a = at(e.a), b = at(e.b);
                r[i] = {std::min(a.lo, b.lo), std::min(a.hi, b.hi)};
                break;
            }
            case ExprOp::Max: {
                const Range a = at(e.a), b = at(e.b);
                r[i] = {std::max(a.lo, b.lo), std::max(a.hi, b.hi)};
                break;
            }
        }
    }
    return r;
}

void describe_ports(dg_partition& p) {
    const Program& prog = p.cp->program();
    const std::vector<Range> ranges = node_ranges(prog);
    const auto dims_of = [&](int32_t t) {
        std::vector<dg_partition::DimInfo> v;
        for (int32_t node : prog.tensors[size_t(t)].shape) {
            const Range rg = ranges[size_t(node)];
            v.push_back({prog.expr_string(node), rg.lo < 0 ? 0 : rg.lo, rg.hi});
        }
        return v;
    };
    for (int32_t t : prog.inputs) p.in_dims.push_back(dims_of(t));
    for (int32_t t : prog.outputs) p.out_dims.push_back(dims_of(t));
    for (size_t i = 0; i < prog.tensors.size(); ++i)
        if (prog.tensors[i].property == Property::State) p.states.push_back(int32_t(i));
}

dg_status load(const uint8_t* data, size_t size, const std::string& where, std::unique_ptr<saved::MappedFile> file,
               const char* engine, dg_partition** out) {
    return guarded([&] {
        init_once();
        EngineSpec es = parse_engine(engine);
        size_t body_size = 0;
        const uint8_t* body = saved::check_file(data, size, where, body_size);
        auto p = std::make_unique<dg_partition>();
        const double t0 = verbose::on() ? verbose::now_ms() : 0.0;
        if (es.n_devices == 0) {
            // a mapped file's constants are used where they lie (the mapping is kept); bytes are copied
            p->cp = std::make_unique<CompiledPartition>(body, body_size, std::map<int32_t, HostData>{}, es.engine,
                                                        kDefaultCapacity, file != nullptr);
            if (file) p->file = std::move(file);
        } else {
            p->cp = std::make_unique<CompiledPartition>(body, body_size, std::map<int32_t, HostData>{},
                                                        std::vector<std::shared_ptr<Engine>>{es.engine},
                                                        std::vector<double>(es.n_devices, 1.0), SplitRule(0),
                                                        kDefaultCapacity);
        }
        if (verbose::on()) verbose::compile(p->cp.get(), p->cp->engine_kind().c_str(), p->cp->program(), p->cp->stats().constant_bytes, verbose::now_ms() - t0);
        p->engine = std::move(es.engine);
        describe_ports(*p);
        *out = p.release();
    });
}

const TensorDef& port(const dg_partition* p, int32_t i, bool input) {
    DG_REQUIRE(p, "the partition is NULL");
    const Program& prog = p->cp->program();
    const auto& v = input ? prog.inputs : prog.outputs;
    DG_REQUIRE(i >= 0 && size_t(i) < v.size(), input ? "input " : "output ", i, " does not exist (the partition has ",
               v.size(), input ? " inputs)" : " outputs)");
    return prog.tensors[size_t(v[size_t(i)])];
}

void describe(const dg_partition* p, const TensorDef& t, const std::vector<dg_partition::DimInfo>* info, dg_desc* d,
              dg_dim* dims) {
    const Program& prog = p->cp->program();
    if (d) {
        std::memset(d, 0, sizeof *d);
        d->id = t.id;
        d->dtype = dg_dtype(t.dtype);
        d->ndims = int32_t(t.shape.size());
        for (size_t k = 0; k < t.shape.size(); ++k) {
            const int32_t node = t.shape[k];
            d->dims[k] = prog.is_const[size_t(node)] ? prog.const_vals[size_t(node)] : DG_DIM_DYNAMIC;
        }
    }
    if (dims && info) {
        for (size_t k = 0; k < t.shape.size(); ++k) {
            const int32_t node = t.shape[k];
            const ExprNode& e = prog.exprs[size_t(node)];
            dg_dim& o = dims[k];
            o.value = prog.is_const[size_t(node)] ? prog.const_vals[size_t(node)] : DG_DIM_DYNAMIC;
            o.symbol = e.op == ExprOp::Symbol ? int32_t(e.a) : -1;
            o.expr = (*info)[k].expr.c_str();
            o.min = (*info)[k].min;
            o.max = (*info)[k].max;
        }
    }
}

// Checked host tensors of the caller's descriptions (and data).
struct Hosts {
    std::vector<HostTensor> h;
    std::vector<const HostTensor*> ptr;
    Hosts(const dg_partition* p, const dg_desc* d, const void* const* data, int32_t n, bool outputs, bool need_data) {
        const Program& prog = p->cp->program();
        const size_t want = outputs ? prog.outputs.size() : prog.inputs.size();
        const char* what = outputs ? "output" : "input";
        if (n != int32_t(want)) fail<ShapeError>("expected ", want, " ", what, "s, got ", n);
        DG_REQUIRE(n == 0 || d, "the ", what, " descriptions are NULL");
        DG_REQUIRE(!need_data || n == 0 || data, "the ", what, " data pointers are NULL");
        h.resize(size_t(n));
        ptr.resize(size_t(n));
        for (int32_t i = 0; i < n; ++i) {
            const dg_desc& x = d[i];
            DG_REQUIRE(x.ndims >= 0 && x.ndims <= DG_MAX_NDIMS, what, " ", i, ": ndims is ", x.ndims, "; it must lie in [0, ",
                       DG_MAX_NDIMS, "]");
            HostTensor& t = h[size_t(i)];
            fill_host(t, x.id, raw_dtype(&x.dtype), x.dims, size_t(x.ndims));
            t.engine = &p->cp->engine();
            if (data) {
                t.data = const_cast<void*>(data[i]);
                DG_REQUIRE(t.data || t.numel() == 0 || !need_data, what, " ", i, ": its data pointer is NULL");
                t.nbytes = size_t(t.numel()) * dtype_size(t.dtype);
                t.writable = outputs;
            }
            ptr[size_t(i)] = &t;
        }
    }
};

int32_t state_index(const dg_partition* p, int32_t k) {
    DG_REQUIRE(p, "the partition is NULL");
    DG_REQUIRE(k >= 0 && size_t(k) < p->states.size(), "state ", k, " does not exist (the partition has ", p->states.size(),
               " state tensors)");
    return p->states[size_t(k)];
}

dg_status infer(dg_partition* p, const dg_desc* in, const void* const* in_data, int32_t n_in, dg_desc* out, int32_t n_out) {
    return guarded([&] {
        DG_REQUIRE(p, "the partition is NULL");
        const Program& prog = p->cp->program();
        Hosts hi(p, in, in_data, n_in, false, false);
        DG_REQUIRE(n_out == int32_t(prog.outputs.size()), "expected room for ", prog.outputs.size(), " outputs, got ", n_out);
        DG_REQUIRE(n_out == 0 || out, "the output descriptions are NULL");
        std::vector<Dims> shapes = p->cp->infer(hi.ptr.data(), hi.ptr.size(), true, true);
        for (int32_t j = 0; j < n_out; ++j) {
            const TensorDef& t = prog.tensors[size_t(prog.outputs[size_t(j)])];
            dg_desc& o = out[j];
            std::memset(&o, 0, sizeof o);
            o.id = t.id;
            o.dtype = dg_dtype(t.dtype);
            o.ndims = shapes[size_t(j)].rank;
            for (int k = 0; k < o.ndims; ++k) o.dims[k] = shapes[size_t(j)].d[k];
        }
    });
}

}  // namespace

extern "C" {

const char* dg_version(void) { return "0.1.0"; }

const char* dg_last_error(void) { return t_error.c_str(); }

const char* dg_status_name(dg_status s) {
    switch (s) {
        case DG_OK: return "DG_OK";
        case DG_ERR_INVALID: return "DG_ERR_INVALID";
        case DG_ERR_IR: return "DG_ERR_IR";
        case DG_ERR_SHAPE: return "DG_ERR_SHAPE";
        case DG_ERR_EXECUTION: return "DG_ERR_EXECUTION";
        case DG_ERR_DEVICE: return "DG_ERR_DEVICE";
        case DG_ERR_OUT_OF_MEMORY: return "DG_ERR_OUT_OF_MEMORY";
        case DG_ERR_DTYPE: return "DG_ERR_DTYPE";
        case DG_ERR_COMPILE: return "DG_ERR_COMPILE";
        case DG_ERR_INTERNAL: return "DG_ERR_INTERNAL";
    }
    return "DG_ERR_UNKNOWN";
}

size_t dg_dtype_size(dg_dtype t) {
    const int v = raw_dtype(&t);
    return v >= 0 && v < kNumDTypes ? dtype_size(DType(v)) : 0;
}

dg_status dg_partition_load(const char* path, const char* engine, dg_partition** out) {
    if (!out) return set_error(DG_ERR_INVALID, "dg_partition_load: out is NULL");
    *out = nullptr;
    if (!path) return set_error(DG_ERR_INVALID, "dg_partition_load: path is NULL");
    std::unique_ptr<saved::MappedFile> file;
    const dg_status s = guarded([&] { file = std::make_unique<saved::MappedFile>(path); });
    if (s != DG_OK) return s;
    const uint8_t* data = file->data();
    const size_t size = file->size();
    return load(data, size, path, std::move(file), engine, out);
}

dg_status dg_partition_load_bytes(const void* data, size_t size, const char* engine, dg_partition** out) {
    if (!out) return set_error(DG_ERR_INVALID, "dg_partition_load_bytes: out is NULL");
    *out = nullptr;
    if (!data && size) return set_error(DG_ERR_INVALID, "dg_partition_load_bytes: data is NULL");
    static const uint8_t empty = 0;
    return load(data ? static_cast<const uint8_t*>(data) : &empty, size, "<bytes>", nullptr, engine, out);
}

void dg_partition_destroy(dg_partition* p) {
    try {
        delete p;
    } catch (...) {
    }
}

int32_t dg_partition_num_inputs(const dg_partition* p) { return p ? int32_t(p->cp->program().inputs.size()) : -1; }
int32_t dg_partition_num_outputs(const dg_partition* p) { return p ? int32_t(p->cp->program().outputs.size()) : -1; }
int32_t dg_partition_num_states(const dg_partition* p) { return p ? int32_t(p->states.size()) : -1; }
int32_t dg_partition_num_symbols(const dg_partition* p) { return p ? int32_t(p->cp->program().symbols.size()) : -1; }

dg_status dg_partition_input(const dg_partition* p, int32_t i, dg_desc* d, dg_dim* dims, const char** name) {
    return guarded([&] {
        const TensorDef& t = port(p, i, true);
        describe(p, t, &p->in_dims[size_t(i)], d, dims);
        if (name) *name = t.name.c_str();
    });
}

dg_status dg_partition_output(const dg_partition* p, int32_t i, dg_desc* d, dg_dim* dims, const char** name) {
    return guarded([&] {
        const TensorDef& t = port(p, i, false);
        describe(p, t, &p->out_dims[size_t(i)], d, dims);
        if (name) *name = t.name.c_str();
    });
}

dg_status dg_partition_state(const dg_partition* p, int32_t k, dg_desc* d, const char** name) {
    return guarded([&] {
        const TensorDef& t = p->cp->program().tensors[size_t(state_index(p, k))];
        describe(p, t, nullptr, d, nullptr);
        if (name) *name = t.name.c_str();
    });
}

dg_status dg_partition_symbol(const dg_partition* p, int32_t k, const char** name, int64_t* min, int64_t* max) {
    return guarded([&] {
        DG_REQUIRE(p, "the partition is NULL");
        const auto& syms = p->cp->program().symbols;
        DG_REQUIRE(k >= 0 && size_t(k) < syms.size(), "symbol ", k, " does not exist (the partition has ", syms.size(),
                   " symbols)");
        if (name) *name = syms[size_t(k)].name.c_str();
        if (min) *min = syms[size_t(k)].min;
        if (max) *max = syms[size_t(k)].max;
    });
}

dg_status dg_partition_infer_outputs(dg_partition* p, const dg_desc* in, int32_t n_in, dg_desc* out, int32_t n_out) {
    return infer(p, in, nullptr, n_in, out, n_out);
}

dg_status dg_partition_infer_outputs_data(dg_partition* p, const dg_desc* in, const void* const* in_data, int32_t n_in,
                                          dg_desc* out, int32_t n_out) {
    return infer(p, in, in_data, n_in, out, n_out);
}

dg_status dg_partition_execute(dg_partition* p, const dg_desc* in, const void* const* in_data, int32_t n_in,
                               const dg_desc* out, void* const* out_data, int32_t n_out) {
    return guarded([&] {
        DG_REQUIRE(p, "the partition is NULL");
        if (n_in >= 0 && n_in <= 8 && n_out >= 0 && n_out <= 8) {
            // the common case without a heap allocation
            HostTensor h[16];
            const HostTensor* ptr[16];
            const Program& prog = p->cp->program();
            if (n_in != int32_t(prog.inputs.size())) fail<ShapeError>("expected ", prog.inputs.size(), " inputs, got ", n_in);
            if (n_out != int32_t(prog.outputs.size()))
                fail<ShapeError>("expected ", prog.outputs.size(), " outputs, got ", n_out);
            DG_REQUIRE((n_in == 0 || (in && in_data)) && (n_out == 0 || (out && out_data)),
                       "the descriptions or data pointers are NULL");
            for (int32_t i = 0; i < n_in + n_out; ++i) {
                const bool o = i >= n_in;
                const int32_t k = o ? i - n_in : i;
                const dg_desc& x = o ? out[k] : in[k];
                DG_REQUIRE(x.ndims >= 0 && x.ndims <= DG_MAX_NDIMS, o ? "output " : "input ", k, ": ndims is ", x.ndims,
                           "; it must lie in [0, ", DG_MAX_NDIMS, "]");
                HostTensor& t = h[i];
                fill_host(t, x.id, raw_dtype(&x.dtype), x.dims, size_t(x.ndims));
                t.engine = &p->cp->engine();
                t.data = o ? out_data[k] : const_cast<void*>(in_data[k]);
                t.nbytes = size_t(t.numel()) * dtype_size(t.dtype);
                DG_REQUIRE(t.data || t.nbytes == 0, o ? "output " : "input ", k, ": its data pointer is NULL");
                t.writable = o;
                ptr[i] = &t;
            }
            p->cp->execute(ptr, size_t(n_in), ptr + n_in, size_t(n_out));
            return;
        }
        Hosts hi(p, in, in_data, n_in, false, true);
        Hosts ho(p, out, out_data, n_out, true, true);
        p->cp->execute(hi.ptr.data(), hi.ptr.size(), ho.ptr.data(), ho.ptr.size());
    });
}

dg_status dg_partition_reset_state(dg_partition* p) {
    return guarded([&] {
        DG_REQUIRE(p, "the partition is NULL");
        p->cp->reset_state();
    });
}

dg_status dg_partition_read_state(dg_partition* p, int32_t k, void* dst, size_t nbytes) {
    return guarded([&] {
        const int32_t i = state_index(p, k);
        DG_REQUIRE(dst || nbytes == 0, "read_state: dst is NULL");
        p->cp->read_state(i, dst, nbytes);
    });
}

dg_status dg_partition_write_state(dg_partition* p, int32_t k, const void* src, size_t nbytes) {
    return guarded([&] {
        const int32_t i = state_index(p, k);
        DG_REQUIRE(src || nbytes == 0, "write_state: src is NULL");
        p->cp->write_state(i, src, nbytes);
    });
}

dg_status dg_partition_cache_info(const dg_partition* p, dg_cache_info* info) {
    return guarded([&] {
        DG_REQUIRE(p && info, "the partition or info is NULL");
        const CacheStats s = p->cp->stats();
        info->hits = s.hits;
        info->misses = s.misses;
        info->evictions = s.evictions;
        info->executions = s.executions;
        info->entries = s.entries;
        info->capacity = s.capacity;
        info->build_seconds = s.build_seconds;
        info->constant_bytes = s.constant_bytes;
        info->state_bytes = s.state_bytes;
        info->arena_bytes = s.arena_bytes;
    });
}

dg_status dg_partition_set_cache_capacity(dg_partition* p, size_t capacity) {
    return guarded([&] {
        DG_REQUIRE(p, "the partition is NULL");
        DG_REQUIRE(capacity >= 1, "the graph cache capacity must be positive, got ", capacity);
        p->cp->set_capacity(capacity);
    });
}

dg_status dg_partition_clear_cache(dg_partition* p) {
    return guarded([&] {
        DG_REQUIRE(p, "the partition is NULL");
        p->cp->clear_cache();
    });
}

}  // extern "C"
