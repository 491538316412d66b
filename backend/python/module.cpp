// Python bindings: dyngraph._backend. The classes of a compiled partition are bound in
// bind_partition.cpp (bindings.h says why).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <optional>

#include "bindings.h"
#include "build_info.h"
#include "device.h"
#include "errors.h"
#include "program.h"
#include "remote.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "ir_limits.h"
#include "ggml_log.h"
#include "kernels/amx.h"
#include "kernels/amx_emulated.h"
#include "kernels/f32_matmul.h"
#include "kernels/f32_panels.h"
#include "kernels/isa.h"
#include "kernels/quant_amx.h"
#include "kernels/vector_clones.h"
#include "lowering.h"
#include "openblas_check.h"
#include "rpc_caps.h"
#include "rpc_relay.h"
#include "verbose.h"

namespace py = pybind11;
using namespace dg;

namespace {
// -- DLPack export with a dtype numpy cannot name (bf16) -------------------------------------------
// The legacy (unversioned) DLPack ABI, as the DLPack specification lays it out: a capsule named
// "dltensor" holding a DLManagedTensor; the consumer renames it "used_dltensor" and calls the deleter.
struct DlDevice {
    int32_t device_type;  // 1: CPU
    int32_t device_id;
};
struct DlDataType {
    uint8_t code;  // 0 int, 1 uint, 2 float, 4 bfloat
    uint8_t bits;
    uint16_t lanes;
};
struct DlTensor {
    void* data;
    DlDevice device;
    int32_t ndim;
    DlDataType dtype;
    int64_t* shape;
    int64_t* strides;  // in elements
    uint64_t byte_offset;
};
struct DlManaged {
    DlTensor t;
    void* ctx;
    void (*deleter)(DlManaged*);
};
struct DlOwner {  // what the managed tensor keeps alive
    DlManaged m;
    std::vector<int64_t> shape, strides;
    PyObject* array;  // a reference to the array whose memory it is
};

void dl_delete(DlManaged* m) {
    auto* o = static_cast<DlOwner*>(m->ctx);
    {
        py::gil_scoped_acquire gil;  // consumers may call this without the GIL
        Py_XDECREF(o->array);
    }
    delete o;
}

void dl_capsule_destructor(PyObject* cap) {
    if (PyCapsule_IsValid(cap, "dltensor")) {  // never consumed: ours to free
        auto* m = static_cast<DlManaged*>(PyCapsule_GetPointer(cap, "dltensor"));
        if (m && m->deleter) m->deleter(m);
    }
}

// A DLPack capsule of a's memory (read as dtype code/bits), keeping a alive.
py::object dlpack_capsule(py::array a, int code, int bits) {
    if (bits % 8 != 0 || a.itemsize() != bits / 8)
        fail<ExecutionError>("cannot export ", a.itemsize(), "-byte elements as a ", bits, "-bit DLPack type");
    auto* o = new DlOwner();
    for (py::ssize_t d = 0; d < a.ndim(); ++d) {
        if (a.strides(d) % a.itemsize() != 0) {
            delete o;
            fail<ExecutionError>("cannot export an array whose strides are not whole elements through DLPack");
        }
        o->shape.push_back(int64_t(a.shape(d)));
        o->strides.push_back(int64_t(a.strides(d) / a.itemsize()));
    }
    o->array = a.ptr();
    Py_INCREF(o->array);
    o->m.t.data = const_cast<void*>(a.data());
    o->m.t.device = {1, 0};
    o->m.t.ndim = int32_t(a.ndim());
    o->m.t.dtype = {uint8_t(code), uint8_t(bits), 1};
    o->m.t.shape = o->shape.data();
    o->m.t.strides = o->strides.data();
    o->m.t.byte_offset = 0;
    o->m.ctx = o;
    o->m.deleter = dl_delete;
    PyObject* cap = PyCapsule_New(&o->m, "dltensor", dl_capsule_destructor);
    if (!cap) {
        dl_delete(&o->m);
        throw py::error_already_set();
    }
    return py::reinterpret_steal<py::object>(cap);
}

#ifdef DYNGRAPH_HAVE_RPC
#include "ggml-rpc.h"
#endif

PyObject* g_errors[7] = {nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};

// The devices `dyngraph rpc-server --device NAME ...` serves (the CPU when none is named).
std::vector<ggml_backend_dev_t> served_devices(const std::vector<std::string>& names) {
    std::vector<ggml_backend_dev_t> devs;
    for (const std::string& n : names) {
        ggml_backend_dev_t d = ggml_backend_dev_by_name(n.c_str());
        if (!d) fail<DeviceError>("no device named '", n, "' in this ggml");
        devs.push_back(d);
    }
    if (devs.empty()) devs.push_back(ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU));
    return devs;
}

void register_errors(py::module_& m) {
    py::module_ errors = py::module_::import("dyngraph.errors");
    const char* names[7] = {"DyngraphError", "ShapeError", "DTypeError", "IRError", "CompileError", "ExecutionError",
                            "DeviceError"};
    for (int i = 0; i < 7; ++i) {
        py::object cls = errors.attr(names[i]);
        g_errors[i] = cls.release().ptr();  // held for the life of the module
    }
    py::register_exception_translator([](std::exception_ptr p) {
        // messages quote names from files, which need not be UTF-8: undecodable bytes are replaced
        auto set = [](PyObject* cls, const char* what) {
            PyObject* msg = PyUnicode_DecodeUTF8(what, Py_ssize_t(std::strlen(what)), "replace");
            PyErr_SetObject(cls, msg);
            Py_XDECREF(msg);
        };
        try {
            if (p) std::rethrow_exception(p);
        } catch (const ShapeError& e) {
            set(g_errors[1], e.what());
        } catch (const DTypeError& e) {
            set(g_errors[2], e.what());
        } catch (const IRError& e) {
            set(g_errors[3], e.what());
        } catch (const CompileError& e) {
            set(g_errors[4], e.what());
        } catch (const DeviceError& e) {
            set(g_errors[6], e.what());
        } catch (const ExecutionError& e) {
            set(g_errors[5], e.what());
        } catch (const Error& e) {
            set(g_errors[0], e.what());
        }
    });
    (void)m;
}

py::dict device_info_dict(const DeviceInfo& i) {
    py::dict d;
    d["kind"] = i.kind;
    d["name"] = i.name;
    d["description"] = i.description;
    d["endpoint"] = i.endpoint;
    d["memory_free"] = i.memory_free;
    d["memory_total"] = i.memory_total;
    return d;
}

// -- AMX: the rule, this process's answer, and the products on emulated tiles (tests/ops/test_amx.py) --
kernels::Isa isa_named(const std::string& name) {
    for (kernels::Isa i : {kernels::Isa::generic, kernels::Isa::avx2, kernels::Isa::avx512, kernels::Isa::avx512vnni})
        if (name == kernels::isa_name(i)) return i;
    throw py::value_error("no kernel level named '" + name + "'");
}

void bind_amx(py::module_& m) {
    m.def(
        "amx_rule",
        [](uint32_t leaf7_edx, uint32_t leaf1_ecx, uint64_t xcr0, bool permitted, const std::string& isa,
           std::optional<std::string> env) {
            kernels::AmxInputs in;
            in.leaf7_edx = leaf7_edx, in.leaf1_ecx = leaf1_ecx, in.xcr0 = xcr0, in.permitted = permitted;
            in.isa = isa_named(isa), in.env = std::move(env);
            return kernels::amx_int8_rule(in);
        },
        py::arg("leaf7_edx"), py::arg("leaf1_ecx"), py::arg("xcr0"), py::arg("permitted"), py::arg("isa"),
        py::arg("env") = py::none(), "The AMX int8 rule (kernels/amx.h) on the inputs given.");
    m.def("quant_panels_rule", [](const std::string& isa, bool amx) { return kernels::quant_panels_rule(isa_named(isa), amx); },
          py::arg("isa"), py::arg("amx"), "Whether quantized weights go in panels by default (kernels/f32_matmul.h).");
    m.def("bf16_pair_panels", &kernels::bf16_pair_panels, py::arg("k"),
          "Whether bf16 weights of rows of k values lie in pairs of k in their panels, for vdpbf16ps "
          "(kernels/f32_panels.h: the CPU has AVX-512 BF16, the kernel ISA AVX-512, k is even).");
    m.def("panel_split", &kernels::panel_split,
          "The width of the sub-panels f32 and f16 weights in panels lie in, in this process (kernels/f32_panels.h).");
    m.def(
        "dequant_min_rows",
        [](const std::string& type) {
            for (int t = 0; t < GGML_TYPE_COUNT; ++t)
                if (ggml_get_type_traits(ggml_type(t))->type_name && type == ggml_type_name(ggml_type(t)))
                    return kernels::dequant_min_rows(ggml_type(t));
            throw py::value_error("unknown ggml type " + type);
        },
        py::arg("type"),
        "From how many activation rows our kernels multiply weights of this ggml type (e.g. 'q5_0') dequantized "
        "(kernels/f32_matmul.h); below, ggml's product or quant_rows.h.");
    m.def("amx_int8", &kernels::amx_int8, "Whether this process runs the AMX int8 products (kernels/amx.h).");
    m.def("amx_compiled", &kernels::amx_compiled, "Whether the AMX tile code is built in.");
    m.def(
        "amx_probe",
        [] {
            const kernels::AmxProbe& p = kernels::amx_probe();
            py::dict d;
            d["leaf7_edx"] = p.inputs.leaf7_edx, d["leaf1_ecx"] = p.inputs.leaf1_ecx, d["xcr0"] = p.inputs.xcr0;
            d["permitted"] = p.inputs.permitted, d["isa"] = std::string(kernels::isa_name(p.inputs.isa));
            d["env"] = p.inputs.env ? py::object(py::str(*p.inputs.env)) : py::object(py::none());
            d["requested"] = p.requested;
            return d;
        },
        "What the AMX probe read in this process (the rule's inputs) and whether it requested the permission.");
    m.def(
        "quant_gemm_emulated_amx",
        [](const std::string& type, py::array_t<float> a, py::array_t<uint8_t, py::array::c_style> w, int64_t n,
           py::array_t<float> out) {
            const ggml_type t = type == "q8_0" ? GGML_TYPE_Q8_0 : type == "q4_0" ? GGML_TYPE_Q4_0 : GGML_TYPE_COUNT;
            if (t == GGML_TYPE_COUNT) throw py::value_error("the AMX products take q8_0 or q4_0 weights, not " + type);
            if (a.ndim() != 2 || a.strides(1) != sizeof(float) || a.strides(0) % sizeof(float) != 0)
                throw py::value_error("A: a 2-d float32 array with contiguous rows");
            const int64_t M = a.shape(0), K = a.shape(1);
            if (K % 32 != 0 || K == 0) throw py::value_error("K must be a positive multiple of 32");
            const size_t ldw = size_t(K / 32) * ggml_type_size(t);
            if (size_t(w.size()) != size_t(n) * ldw) throw py::value_error("W: N rows of K / 32 blocks");
            if (out.ndim() != 2 || out.shape(0) != M || out.shape(1) < n || out.strides(1) != sizeof(float) ||
                out.strides(0) % sizeof(float) != 0)
                throw py::value_error("out: a float32 array of M rows of at least N contiguous values");
            float* c = out.mutable_data();
            kernels::amx::quant_gemm_nt_emulated(t, M, n, K, a.data(), a.strides(0) / 4,
                                                 reinterpret_cast<const char*>(w.data()), ldw, c, out.strides(0) / 4);
        },
        py::arg("type"), py::arg("A"), py::arg("W"), py::arg("N"), py::arg("out"),
        "out[:, :N] = A . W^T with the AMX products' algorithm on emulated tiles (W: N rows of q8_0 / q4_0 blocks).");
    m.def(
        "amx_emulated_dpbssd",
        [](py::array_t<int32_t, py::array::c_style> c, py::array_t<int8_t, py::array::c_style> a,
           py::array_t<int8_t, py::array::c_style> b) {
            if (c.ndim() != 2 || a.ndim() != 2 || b.ndim() != 2) throw py::value_error("three 2-d arrays");
            // tiles 0, 1, 2 shaped as the arrays: the emulation refuses what the hardware would
            kernels::amx::TileConfig cfg;
            cfg.palette = 1;
            const py::array* arrays[3] = {&c, &a, &b};
            for (int t = 0; t < 3; ++t) {
                const py::ssize_t rows = arrays[t]->shape(0), colsb = arrays[t]->shape(1) * arrays[t]->itemsize();
                if (rows > 255 || colsb > 65535) throw py::value_error("a tile of at most 255 rows");
                cfg.rows[t] = uint8_t(rows), cfg.colsb[t] = uint16_t(colsb);
            }
            py::array_t<int32_t> out({c.shape(0), c.shape(1)});
            kernels::amx::EmulatedTiles tiles;
            tiles.config(cfg);
            tiles.load<0>(c.data(), size_t(c.strides(0)));
            tiles.load<1>(a.data(), size_t(a.strides(0)));
            tiles.load<2>(b.data(), size_t(b.strides(0)));
            tiles.dpbssd<0, 1, 2>();
            tiles.store<0>(out.mutable_data(), size_t(out.strides(0)));
            tiles.release();
            return out;
        },
        py::arg("C"), py::arg("A"), py::arg("B"), "TDPBSSD on emulated tiles shaped as the arrays: C + A . B (int32).");
}

// The tables of a checked IR as Python values: names decoded as UTF-8 with replacement (as the
// Python reader always did), enums as their codes, vectors as lists. See ir_reader.read_program.
py::str utf8(const std::string& s) {
    PyObject* o = PyUnicode_DecodeUTF8(s.data(), Py_ssize_t(s.size()), "replace");
    if (!o) throw py::error_already_set();
    return py::reinterpret_steal<py::str>(o);
}

template <typename T>
py::list list_of(const std::vector<T>& v) {
    py::list l(v.size());
    for (size_t i = 0; i < v.size(); ++i) l[i] = py::cast(v[i]);
    return l;
}

py::dict read_ir_tables(py::buffer ir) {
    py::buffer_info info = ir.request();
    AlignedBuffer copy;
    const size_t n = size_t(info.size * info.itemsize);
    const Program p = Program::parse(aligned_ir(static_cast<const uint8_t*>(info.ptr), n, copy), n, true);
    py::list symbols, exprs, tensors, ops, sources, guards;
    for (const SymbolDef& s : p.symbols) symbols.append(py::make_tuple(utf8(s.name), s.min, s.max));
    for (const ExprNode& e : p.exprs) exprs.append(py::make_tuple(int(e.op), e.a, e.b));
    for (const TensorDef& t : p.tensors)
        tensors.append(py::make_tuple(t.id, utf8(t.name), int(t.dtype), list_of(t.shape), int(t.property), int(t.storage)));
    for (const OpDef& o : p.ops) {
        py::list attrs;
        for (const AttrDef& a : o.raw_attrs)
            attrs.append(py::make_tuple(utf8(a.name), int(a.type), list_of(a.ints), list_of(a.floats), utf8(a.str),
                                        list_of(a.exprs)));
        ops.append(py::make_tuple(o.id, int(o.kind), utf8(o.name), list_of(o.inputs), list_of(o.outputs), attrs));
    }
    for (const SourceDef& s : p.sources)
        sources.append(py::make_tuple(s.symbol, int(s.kind), s.input, s.index, s.coeff, s.offset, s.ref, s.flag));
    for (const GuardDef& g : p.guards) guards.append(py::make_tuple(g.lhs, g.rhs, utf8(g.message)));
    py::dict d;
    d["symbols"] = symbols;
    d["exprs"] = exprs;
    d["tensors"] = tensors;
    d["ops"] = ops;
    d["inputs"] = list_of(p.inputs);
    d["outputs"] = list_of(p.outputs);
    d["sources"] = sources;
    d["guards"] = guards;
    return d;
}

}  // namespace

PYBIND11_MODULE(_backend, m) {
    m.doc() = "dyngraph's C++ runtime: IR reader, shape binding, ggml graph builder and cache";
    register_errors(m);
    install_ggml_log();
    if (std::string w = verbose::init_from_env(); !w.empty()) {
        if (PyErr_WarnEx(PyExc_RuntimeWarning, w.c_str(), 1) != 0) throw py::error_already_set();
    }

    m.def("openblas_core", &openblas_core,
          "The core whose kernels this process's OpenBLAS runs (its sgemm's instruction set: Haswell is AVX2, "
          "SkylakeX and Cooperlake AVX-512), as OpenBLAS picked it or OPENBLAS_CORETYPE named it.");
    m.def("openblas_core_problem", [](const char* core, std::optional<std::string> coretype) {
        return openblas_core_problem(core, coretype ? coretype->c_str() : nullptr);
    }, py::arg("core"), py::arg("coretype"), "Why an engine refuses OpenBLAS's core `core` (openblas_check.h), or ''.");
    m.def("supported_op_kinds", [] { return lowerings().kinds(); }, "Op kinds (IR codes) the backend can lower.");
    m.def("ggml_version", [] { return std::string(ggml_version()); });
    m.def(
        "set_verbose",
        [](int l) {
            if (!verbose::set_level(l)) throw py::value_error("verbose level " + std::to_string(l) + " is below 0");
        },
        py::arg("level"), "DYNGRAPH_VERBOSE's level, at run time (0: off, 1: executes, 2: + compiles and builds).");
    m.def("dlpack_capsule", &dlpack_capsule, py::arg("array"), py::arg("code"), py::arg("bits"),
          "A DLPack capsule of the array's memory read as DLPack type (code, bits): bf16 arrays numpy cannot export.");
    m.def("parse_verbose", [](const std::string& v) { return verbose::parse_level(v.c_str()); },
          "The level a DYNGRAPH_VERBOSE value names, or -1.");
    m.def("verbose_level", [] { return verbose::level; });
    m.def("vector_level", [] { return kernels::vector_level(); },
          "The level of the loops kernels/vector_clones.h compiles several times: 2 x86-64-v4, 1 x86-64-v3, 0 baseline.");
    m.def("kernel_isa", [] { return std::string(kernels::isa_name(kernels::kernel_isa())); },
          "Instruction set of the hand-vectorized kernels in this process (avx512, avx2 or generic).");
    m.def("vector_units", [] { return kernels::half_width_units() ? 128 : kernels::split_512_units() ? 256 : 512; },
          "Width in bits of the vector units the kernels are tuned for: 128 where the CPU issues 256-bit "
          "operations as two halves (AMD Zen 1, Zen+), 256 where it issues 512-bit ones as two (AMD's family "
          "19h: Zen 4), else 512; DYNGRAPH_VECTOR_UNITS overrides it.");
    bind_amx(m);
    m.def(
        "build_info",
        [] {
            py::dict d;
            d["ggml"] = DYNGRAPH_BUILD_GGML;
            py::list flags;
            const std::string all = DYNGRAPH_BUILD_GGML_CPU_ISA_FLAGS;
            for (size_t at = 0; at < all.size();) {
                size_t end = all.find(';', at);
                if (end == std::string::npos) end = all.size();
                if (end > at) flags.append(all.substr(at, end - at));
                at = end + 1;
            }
            d["ggml_cpu_isa_flags"] = flags;
            d["c_compiler"] = DYNGRAPH_BUILD_C_COMPILER;
            // what ggml-cpu was compiled to use (its compile-time macros)
            py::dict has;
            has["avx2"] = ggml_cpu_has_avx2() != 0;
            has["f16c"] = ggml_cpu_has_f16c() != 0;
            has["fma"] = ggml_cpu_has_fma() != 0;
            has["avx512"] = ggml_cpu_has_avx512() != 0;
            has["avx512_vnni"] = ggml_cpu_has_avx512_vnni() != 0;
            has["avx512_bf16"] = ggml_cpu_has_avx512_bf16() != 0;
            has["amx_int8"] = ggml_cpu_has_amx_int8() != 0;
            has["llamafile"] = ggml_cpu_has_llamafile() != 0;
            has["neon"] = ggml_cpu_has_neon() != 0;
            has["dotprod"] = ggml_cpu_has_dotprod() != 0;
            has["matmul_int8"] = ggml_cpu_has_matmul_int8() != 0;
            has["sve"] = ggml_cpu_has_sve() != 0;
            has["fp16_va"] = ggml_cpu_has_fp16_va() != 0;
            d["ggml_cpu_has"] = has;
            return d;
        },
        "How ggml was built: source or wheel, ggml-cpu's instruction-set flags, the C compiler, and what "
        "ggml-cpu was compiled to use.");
    m.def(
        "check_ir",
        [](py::buffer ir) {
            py::buffer_info info = ir.request();
            AlignedBuffer copy;
            const size_t n = size_t(info.size * info.itemsize);
            Program::parse(aligned_ir(static_cast<const uint8_t*>(info.ptr), n, copy), n);
        },
        "Verify an IR buffer (FlatBuffers verification and index checks); raises IRError.");
    m.def("read_ir", &read_ir_tables,
          "Verify an IR buffer as check_ir does and return its tables as Python values (the Python reader's "
          "input: the generated FlatBuffers accessors cost microseconds per field).");
    py::class_<Device, std::shared_ptr<Device>>(m, "Device")
        .def_property_readonly("kind", &Device::kind)
        .def_property_readonly("name", &Device::name)
        .def_property_readonly("endpoint",
                               [](const Device& d) { return d.connection() ? d.connection()->endpoint() : std::string(); })
        .def("info", [](Device& d) { return device_info_dict(d.info()); })
        .def("traffic", [](const Device& d) {
            remote::Connection* c = d.connection();
            return py::make_tuple(c ? c->bytes_sent() : 0, c ? c->bytes_received() : 0);
        })
        .def_property_readonly("lost", [](const Device& d) { return d.connection() && d.connection()->dead(); });
    m.def("open_rpc_devices", &Device::open_rpc, py::arg("endpoint"), py::arg("connect_timeout"), py::arg("timeout"),
          py::arg("token") = std::string(), py::call_guard<py::gil_scoped_release>(), "The devices of a ggml RPC server (DeviceError when unreachable).");
    m.def("open_local_device", &Device::open_local, py::arg("name"), "A device ggml registered (a GPU), by name.");
    m.def("list_devices", [] {
        std::vector<DeviceInfo> infos;
        {
            py::gil_scoped_release release;
            infos = list_devices();
        }
        py::list l;
        for (const DeviceInfo& i : infos) l.append(device_info_dict(i));
        return l;
    });
    m.def("_hmac_sha256", [](py::bytes key, py::bytes msg) { return py::bytes(dg::remote::hmac_sha256(key, msg)); },
          "HMAC-SHA256 as the RPC relay computes it (for the tests).");
    m.def("has_rpc", [] {
#ifdef DYNGRAPH_HAVE_RPC
        return true;
#else
        return false;
#endif
    });
    m.def(
        "rpc_supports",
        [](const std::vector<std::string>& device_names, const py::bytes& query, const std::vector<int>& refused) {
            const std::vector<ggml_backend_dev_t> devs = served_devices(device_names);
            std::string q = query;
            std::string a;
            {
                py::gil_scoped_release release;
                a = remote::caps::answer(devs, q, refused);
            }
            return py::bytes(a);
        },
        py::arg("devices"), py::arg("query"), py::arg("refused"),
        "The worker's answer to a capability query (backend/rpc_caps.h); ValueError when it is malformed.");
    m.def("ggml_op_names", [] {
        std::vector<std::string> names;
        for (int i = 0; i < GGML_OP_COUNT; ++i) names.emplace_back(ggml_op_name(ggml_op(i)));
        return names;
    });
    m.def(
        "rpc_serve",
        [](const std::string& host, int port, int n_threads, const std::vector<std::string>& device_names) {
#ifdef DYNGRAPH_HAVE_RPC
            std::vector<ggml_backend_dev_t> devs = served_devices(device_names);
            const std::string endpoint = cat(host, ":", port);
            {
                py::gil_scoped_release release;
                // serves clients one after the other until the process ends; returns when it cannot listen
                ggml_backend_rpc_start_server(endpoint.c_str(), nullptr, size_t(n_threads), devs.size(), devs.data());
            }
            fail<DeviceError>("cannot serve on ", endpoint, " (is the address this machine's and the port free?)");
#else
            fail<DeviceError>("this build of ggml has no RPC backend (build ggml with GGML_RPC=ON)");
#endif
        },
        py::arg("host"), py::arg("port"), py::arg("n_threads"), py::arg("devices"));
    bindings::bind_partition(m);
}
