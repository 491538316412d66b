// dyngraph._backend: Engine, Tensor and CompiledPartition: compile, infer, execute, state.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "bindings.h"
#include "compiled_partition.h"
#include "device.h"
#include "engine.h"
#include "errors.h"
#include "verbose.h"

namespace py = pybind11;
using namespace dg;

namespace {

struct PyTensor {
    HostTensor h;
    py::array array;
};

void fill_host_shaped(HostTensor& h, int64_t id, int dtype, const std::vector<int64_t>& shape) {
    dg::fill_host(h, id, dtype, shape.data(), shape.size());
}

PyTensor make_tensor(int64_t id, int dtype, const std::vector<int64_t>& shape, py::array arr, const Engine* engine) {
    PyTensor t;
    fill_host_shaped(t.h, id, dtype, shape);
    t.h.engine = engine;
    if (!(arr.flags() & py::array::c_style))
        fail<ExecutionError>("tensor ", id, ": data must be C-contiguous (use numpy.ascontiguousarray)");
    if (size_t(arr.itemsize()) != dtype_size(t.h.dtype))
        fail<DTypeError>("tensor ", id, ": data has ", arr.itemsize(), "-byte elements, ", dtype_name(t.h.dtype), " needs ",
                         dtype_size(t.h.dtype));
    if (arr.size() != t.h.numel())
        fail<ShapeError>("tensor ", id, ": data has ", arr.size(), " elements, the shape needs ", t.h.numel());
    t.h.data = const_cast<void*>(arr.data());  // written only when writable
    t.h.nbytes = size_t(arr.nbytes());
    t.h.writable = arr.writeable();
    t.array = std::move(arr);
    return t;
}

template <size_t N>
struct HostList {
    const HostTensor* small[N];
    std::vector<const HostTensor*> big;
    const HostTensor** ptr = small;
    size_t n = 0;

    // Outputs: their arrays' writability is read now (it may have changed since the Tensor was made).
    HostList(const py::sequence& l, const char* what, bool outputs = false) {
        n = l.size();
        if (n > N) {
            big.resize(n);
            ptr = big.data();
        }
        for (size_t i = 0; i < n; ++i) {
            py::object item = l[i];
            // one look-up of the type (isinstance, then cast, looked it up twice: cold, as at a cache hit
            // after other work, that was most of this list's time)
            py::detail::make_caster<PyTensor> caster;
            if (!caster.load(item, false)) fail<ExecutionError>(what, " ", i, " is not a dyngraph.Tensor");
            PyTensor& t = py::detail::cast_op<PyTensor&>(caster);
            if (outputs) t.h.writable = t.array.writeable();
            ptr[i] = &t.h;
        }
    }
};

// Whether a numpy array's elements can hold `want`: bf16 as ml_dtypes' bfloat16 or 16-bit
// integer bits; s4 / u4 as ml_dtypes' int4 / uint4; f8 as ml_dtypes' float8 type or uint8 bits.
bool array_holds(const py::array& a, DType want) {
    const char kind = a.dtype().kind();
    const auto size = size_t(a.itemsize());
    const auto named = [&](const char* name) { return size == 1 && py::str(a.dtype().attr("name")).cast<std::string>() == name; };
    switch (want) {
        case DType::F32: return kind == 'f' && size == 4;
        case DType::F16: return kind == 'f' && size == 2;
        case DType::BF16: return size == 2 && kind != 'f' && kind != 'i';
        case DType::I32: return kind == 'i' && size == 4;
        case DType::I64: return kind == 'i' && size == 8;
        case DType::Bool: return kind == 'b';
        case DType::U8: return kind == 'u' && size == 1;
        case DType::S8: return kind == 'i' && size == 1;
        case DType::S4: return named("int4");
        case DType::U4: return named("uint4");
        case DType::F8E4M3: return named("float8_e4m3fn") || (kind == 'u' && size == 1);
        case DType::F8E5M2: return named("float8_e5m2") || (kind == 'u' && size == 1);
    }
    return false;
}

py::tuple dims_tuple(const Dims& d) {
    py::tuple t(size_t(d.rank));
    for (int i = 0; i < d.rank; ++i) t[size_t(i)] = d.d[i];
    return t;
}

py::dict stats_dict(const CacheStats& s) {
    py::dict d;
    d["hits"] = s.hits;
    d["misses"] = s.misses;
    d["evictions"] = s.evictions;
    d["executions"] = s.executions;
    d["staged_inputs"] = s.staged_inputs;
    d["staged_outputs"] = s.staged_outputs;
    d["device_copies"] = s.device_copies;
    d["host_fallback_ops"] = s.host_fallback_ops;
    d["graph_splits"] = s.graph_splits;
    d["device_copy_bytes"] = s.device_copy_bytes;
    d["entries"] = s.entries;
    d["capacity"] = s.capacity;
    d["build_seconds"] = s.build_seconds;
    d["last_build_seconds"] = s.last_build_seconds;
    d["last_graph_nodes"] = s.last_graph_nodes;
    d["metadata_bytes"] = s.metadata_bytes;
    d["arena_bytes"] = s.arena_bytes;
    d["constant_bytes"] = s.constant_bytes;
    d["borrowed_bytes"] = s.borrowed_bytes;
    d["repacked_bytes"] = s.repacked_bytes;
    d["panel_bytes"] = s.panel_bytes;
    d["state_bytes"] = s.state_bytes;
    d["derived_bytes"] = s.derived_bytes;
    return d;
}

int32_t checked_index(const CompiledPartition& cp, int64_t idx, Property want, const char* what) {
    const auto& ts = cp.program().tensors;
    if (idx < 0 || size_t(idx) >= ts.size() || ts[size_t(idx)].property != want)
        fail<ShapeError>("tensor index ", idx, " is not a ", what, " tensor of this partition");
    return int32_t(idx);
}

}  // namespace

void dg::bindings::bind_partition(py::module_& m) {
    py::class_<Engine, std::shared_ptr<Engine>>(m, "Engine")
        .def(py::init<int, std::vector<std::shared_ptr<Device>>>(), py::arg("n_threads"),
             py::arg("devices") = std::vector<std::shared_ptr<Device>>{})
        .def_property_readonly("n_threads", &Engine::n_threads)
        .def_property_readonly("devices", &Engine::devices);

    py::class_<PyTensor>(m, "Tensor", py::dynamic_attr())
        .def(py::init([](int64_t id, int dtype, const std::vector<int64_t>& shape, py::array data,
                         std::shared_ptr<Engine> engine) { return make_tensor(id, dtype, shape, std::move(data), engine.get()); }),
             py::arg("id"), py::arg("dtype"), py::arg("shape"), py::arg("data"), py::arg("engine") = nullptr)
        .def_property_readonly("id", [](const PyTensor& t) { return t.h.id; })
        .def_property_readonly("shape", [](const PyTensor& t) {
            py::tuple s(size_t(t.h.ndim));
            for (int i = 0; i < t.h.ndim; ++i) s[size_t(i)] = t.h.shape[i];
            return s;
        })
        .def_property_readonly("data_ptr", [](const PyTensor& t) { return reinterpret_cast<uintptr_t>(t.h.data); })
        .def("get_data_handle", [](const PyTensor& t) { return t.array; });

    py::class_<CompiledPartition, std::shared_ptr<CompiledPartition>>(m, "CompiledPartition")
        .def(py::init([](py::buffer ir, const std::map<int32_t, py::array>& data, std::shared_ptr<Engine> engine,
                         size_t capacity, bool borrow_ir, bool repack) {
                 py::buffer_info info = ir.request();
                 std::map<int32_t, HostData> ext;
                 for (const auto& [k, a] : data) {
                     if (!(a.flags() & py::array::c_style)) fail<CompileError>("constant data must be C-contiguous");
                     ext[k] = HostData{a.data(), size_t(a.nbytes())};
                 }
                 const double t0 = verbose::on() ? verbose::now_ms() : 0.0;
                 auto cp = std::make_shared<CompiledPartition>(static_cast<const uint8_t*>(info.ptr),
                                                               size_t(info.size * info.itemsize), ext, std::move(engine),
                                                               capacity, borrow_ir, repack);
                 if (verbose::on())
                     verbose::compile(cp.get(), cp->engine_kind().c_str(), cp->program(), cp->stats().constant_bytes, verbose::now_ms() - t0);
                 return cp;
             }),
             py::arg("ir"), py::arg("data"), py::arg("engine"), py::arg("cache_capacity"), py::arg("borrow_ir") = false,
             py::arg("repack") = true)
        .def(py::init([](py::buffer ir, const std::map<int32_t, py::array>& data,
                         const std::vector<std::shared_ptr<Engine>>& engines, const std::vector<double>& shares, int rule,
                         size_t capacity, bool strict_placement) {
                 py::buffer_info info = ir.request();
                 std::map<int32_t, HostData> ext;
                 for (const auto& [k, a] : data) {
                     if (!(a.flags() & py::array::c_style)) fail<CompileError>("constant data must be C-contiguous");
                     ext[k] = HostData{a.data(), size_t(a.nbytes())};
                 }
                 if (rule != 0 && rule != 1) fail<CompileError>("unknown split rule ", rule);
                 const double t0 = verbose::on() ? verbose::now_ms() : 0.0;
                 std::shared_ptr<CompiledPartition> cp;
                 {
                     py::gil_scoped_release release;
                     cp = std::make_shared<CompiledPartition>(static_cast<const uint8_t*>(info.ptr),
                                                              size_t(info.size * info.itemsize), ext, engines, shares,
                                                              SplitRule(rule), capacity, strict_placement);
                 }
                 if (verbose::on())
                     verbose::compile(cp.get(), cp->engine_kind().c_str(), cp->program(), cp->stats().constant_bytes, verbose::now_ms() - t0);
                 return cp;
             }),
             py::arg("ir"), py::arg("data"), py::arg("engines"), py::arg("shares"), py::arg("rule"), py::arg("cache_capacity"),
             py::arg("strict_placement") = false)
        .def("placement",
             [](const CompiledPartition& cp) {
                 py::list l;
                 for (const auto& s : cp.placement_summary()) l.append(py::make_tuple(s.device, s.ops, s.resident_bytes));
                 return l;
             })
        .def("op_devices", &CompiledPartition::op_devices)
        .def("remote_traffic", [](const CompiledPartition& cp) {
            auto [s, r] = cp.remote_traffic();
            return py::make_tuple(s, r);
        })
        .def("execute",
             [](CompiledPartition& cp, const py::sequence& in, const py::sequence& out) {
                 HostList<8> hi(in, "input");
                 HostList<8> ho(out, "output", true);
                 py::gil_scoped_release release;
                 cp.execute(hi.ptr, hi.n, ho.ptr, ho.n);
             })
        .def("infer",
             [](CompiledPartition& cp, const py::list& specs, bool build, bool check_dtype) {
                 // specs: (id, dtype, shape) tuples, or Tensors (whose values a shape input needs)
                 std::vector<PyTensor> owned(specs.size());
                 std::vector<const HostTensor*> ptrs(specs.size());
                 for (size_t i = 0; i < specs.size(); ++i) {
                     py::handle s = specs[i];
                     py::detail::make_caster<PyTensor> caster;
                     if (caster.load(s, false)) {
                         ptrs[i] = &py::detail::cast_op<PyTensor&>(caster).h;
                     } else {
                         auto tup = s.cast<py::tuple>();
                         fill_host_shaped(owned[i].h, tup[0].cast<int64_t>(), tup[1].cast<int>(), tup[2].cast<std::vector<int64_t>>());
                         ptrs[i] = &owned[i].h;
                     }
                 }
                 std::vector<Dims> shapes;
                 {
                     py::gil_scoped_release release;
                     shapes = cp.infer(ptrs.data(), ptrs.size(), build, check_dtype);
                 }
                 py::list res;
                 for (const Dims& d : shapes) res.append(dims_tuple(d));
                 return res;
             },
             py::arg("inputs"), py::arg("build") = true, py::arg("check_dtype") = true)
        .def(
            "run",
            [](CompiledPartition& cp, const py::sequence& arrays, const py::sequence& out_dtypes, bool copy_strided) {
                // numpy in, numpy out: bind, allocate the outputs, compute (one call for the common case)
                const Program& prog = cp.program();
                const size_t n = arrays.size();
                if (n != prog.inputs.size()) fail<ShapeError>("expected ", prog.inputs.size(), " inputs, got ", n);
                std::vector<PyTensor> ins(n);
                std::vector<const HostTensor*> in_ptrs(n);
                for (size_t i = 0; i < n; ++i) {
                    const TensorDef& t = prog.tensors[size_t(prog.inputs[i])];
                    if (!copy_strided && py::isinstance<py::array>(arrays[i]) &&
                        !(py::array(arrays[i]).flags() & py::array::c_style))
                        fail<ExecutionError>("input ", i, " ", t.label(),
                                             ": data must be C-contiguous, it is used in place (numpy.ascontiguousarray "
                                             "or torch's .contiguous() copies it)");
                    py::array a = py::array::ensure(arrays[i], py::array::c_style);
                    if (!a) fail<ExecutionError>("input ", i, " ", t.label(), " is not an array");
                    if (!array_holds(a, t.dtype))
                        fail<DTypeError>("input ", i, " ", t.label(), ": expected ", dtype_name(t.dtype), " data, got numpy ",
                                         std::string(py::str(a.dtype())));
                    std::vector<int64_t> shape(a.shape(), a.shape() + a.ndim());
                    ins[i] = make_tensor(t.id, int(t.dtype), shape, std::move(a), &cp.engine());
                    in_ptrs[i] = &ins[i].h;
                }
                std::vector<Dims> shapes;
                {
                    py::gil_scoped_release release;
                    shapes = cp.infer(in_ptrs.data(), n, true, true);
                }
                std::vector<PyTensor> outs(shapes.size());
                std::vector<const HostTensor*> out_ptrs(shapes.size());
                py::list result;
                for (size_t j = 0; j < shapes.size(); ++j) {
                    const TensorDef& t = prog.tensors[size_t(prog.outputs[j])];
                    std::vector<py::ssize_t> shape(shapes[j].d, shapes[j].d + shapes[j].rank);
                    py::array a(py::dtype::from_args(out_dtypes[j]), shape);
                    result.append(a);
                    outs[j] = make_tensor(t.id, int(t.dtype), std::vector<int64_t>(shape.begin(), shape.end()), std::move(a),
                                          &cp.engine());
                    out_ptrs[j] = &outs[j].h;
                }
                {
                    py::gil_scoped_release release;
                    cp.execute(in_ptrs.data(), n, out_ptrs.data(), out_ptrs.size());
                }
                return result;
            },
            py::arg("arrays"), py::arg("out_dtypes"), py::arg("copy_strided") = false,
            "cp(...): numpy in, numpy out; a non-contiguous array is refused, or with copy_strided copied "
            "(dyngraph.torch: the tensors PyTorch hands on)")
        .def(
            "time_compute",
            [](CompiledPartition& cp, const py::sequence& in, const py::sequence& out, int iters) {
                HostList<8> hi(in, "input");
                HostList<8> ho(out, "output", true);
                py::gil_scoped_release release;
                return cp.time_compute(hi.ptr, hi.n, ho.ptr, ho.n, iters);
            },
            "Benchmark baseline: median ns of the bare ggml compute of this execution's graph.")
        .def(
            "time_nodes",
            [](CompiledPartition& cp, const py::sequence& in, const py::sequence& out, int iters) {
                HostList<8> hi(in, "input");
                HostList<8> ho(out, "output", true);
                std::vector<CompiledPartition::NodeTime> r;
                {
                    py::gil_scoped_release release;
                    r = cp.time_nodes(hi.ptr, hi.n, ho.ptr, ho.n, iters);
                }
                py::list l;
                for (const auto& t : r)
                    l.append(py::make_tuple(t.op, t.name, t.type, py::make_tuple(t.ne[0], t.ne[1], t.ne[2], t.ne[3]), t.srcs, t.ns));
                return l;
            },
            "Profiling aid: (op, name, type, ne, sources, median ns) of each ggml node of this execution's graph, "
            "each computed alone.")
        .def("stats", [](const CompiledPartition& cp) { return stats_dict(cp.stats()); })
        .def("clear_cache", &CompiledPartition::clear_cache)
        .def("use_engine", &CompiledPartition::use_engine, py::arg("engine"))
        .def("set_capacity", &CompiledPartition::set_capacity)
        .def("export_data",
             [](CompiledPartition& cp, int64_t idx) {
                 const auto& ts = cp.program().tensors;
                 if (idx < 0 || size_t(idx) >= ts.size() || ts[size_t(idx)].property == Property::Variable)
                     fail<ShapeError>("tensor index ", idx, " holds no data");
                 std::vector<uint8_t> bytes;
                 {
                     py::gil_scoped_release release;
                     bytes = cp.export_data(int32_t(idx));
                 }
                 py::array_t<uint8_t> a(py::ssize_t(bytes.size()));
                 if (!bytes.empty()) std::memcpy(a.mutable_data(), bytes.data(), bytes.size());
                 return a;
             })
        .def("read_state",
             [](CompiledPartition& cp, int64_t idx, py::array out) {
                 int32_t i = checked_index(cp, idx, Property::State, "state");
                 if (!(out.flags() & py::array::c_style) || !out.writeable())
                     fail<ExecutionError>("read_state needs a writable C-contiguous array");
                 void* dst = out.mutable_data();
                 py::gil_scoped_release release;
                 cp.read_state(i, dst, size_t(out.nbytes()));
             })
        .def("write_state",
             [](CompiledPartition& cp, int64_t idx, py::array data) {
                 int32_t i = checked_index(cp, idx, Property::State, "state");
                 if (!(data.flags() & py::array::c_style)) fail<ExecutionError>("write_state needs a C-contiguous array");
                 const void* src = data.data();
                 py::gil_scoped_release release;
                 cp.write_state(i, src, size_t(data.nbytes()));
             })
        .def("reset_state", [](CompiledPartition& cp) {
            py::gil_scoped_release release;
            cp.reset_state();
        });
}
