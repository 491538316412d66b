#include "verbose.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "binder.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "host_tensor.h"
#include "kernels/isa.h"
#include "program.h"

#ifndef DYNGRAPH_VERSION
#define DYNGRAPH_VERSION "unknown"
#endif

namespace dg {
namespace verbose {

int level = 0;

namespace {

std::mutex g_mu;  // one line at a time, and the partition numbers
std::unordered_map<const void*, int> g_ids;
int g_next = 0;

std::string id_of(const void* cp) {
    auto it = g_ids.find(cp);
    return it == g_ids.end() ? std::string("cp?") : "cp" + std::to_string(it->second);
}

std::string binding_text(const Program& prog, const std::vector<int64_t>& key) {
    if (prog.symbols.empty()) return "-";
    std::string s;
    for (size_t i = 0; i < prog.symbols.size() && i < key.size(); ++i) {
        if (i) s += ';';
        s += prog.symbols[i].name + "=" + std::to_string(key[i]);
    }
    return s;
}

std::string symbols_text(const Program& prog) {
    if (prog.symbols.empty()) return "-";
    std::string s;
    for (size_t i = 0; i < prog.symbols.size(); ++i) s += (i ? ";" : "") + prog.symbols[i].name;
    return s;
}

// The program's op kinds in the order they first appear, with their counts: "MatMul:1;ReLU:2".
std::string ops_text(const Program& prog) {
    std::vector<std::pair<uint16_t, int>> kinds;
    for (const OpDef& op : prog.ops) {
        bool found = false;
        for (auto& k : kinds)
            if (k.first == op.kind) {
                ++k.second;
                found = true;
                break;
            }
        if (!found) kinds.emplace_back(op.kind, 1);
    }
    if (kinds.empty()) return "-";
    std::string s;
    for (size_t i = 0; i < kinds.size(); ++i)
        s += (i ? ";" : "") + std::string(ops::kOpFacts[kinds[i].first].name) + ":" + std::to_string(kinds[i].second);
    return s;
}

std::string tensor_text(const char* io, size_t i, DType dt, const std::string& shape) {
    return std::string(io) + std::to_string(i) + ":" + dtype_name(dt) + ":strided:" + (shape.empty() ? "-" : shape);
}

std::string host_shape(const HostTensor& t) {
    std::string s;
    for (int d = 0; d < t.ndim; ++d) s += (d ? "x" : "") + std::to_string(t.shape[d]);
    return s;
}

// Shape of a program tensor: its dimensions' values under a binding, or (no
// binding) their expressions, spaces removed ("batch", "seq+1").
std::string def_shape(const Program& prog, const TensorDef& t, const Binding* b) {
    std::string s;
    for (size_t d = 0; d < t.shape.size(); ++d) {
        if (d) s += 'x';
        const int32_t node = t.shape[d];
        if (b != nullptr && size_t(node) < b->values.size()) {
            s += std::to_string(b->values[size_t(node)]);
        } else {
            for (char c : prog.expr_string(node))
                if (c != ' ') s += c;
        }
    }
    return s;
}

std::string defs_text(const Program& prog, const Binding* b) {
    std::string s;
    for (size_t i = 0; i < prog.inputs.size(); ++i) {
        const TensorDef& t = prog.tensors[size_t(prog.inputs[i])];
        s += (s.empty() ? "" : " ") + tensor_text("in", i, t.dtype, def_shape(prog, t, b));
    }
    for (size_t i = 0; i < prog.outputs.size(); ++i) {
        const TensorDef& t = prog.tensors[size_t(prog.outputs[i])];
        s += (s.empty() ? "" : " ") + tensor_text("out", i, t.dtype, def_shape(prog, t, b));
    }
    return s.empty() ? "-" : s;
}

std::string ms_text(double ms) {
    // to the nanosecond: a cache hit on a small partition can take well under a microsecond,
    // which three decimals printed as 0.000 (read as "not timed")
    char t[48];
    std::snprintf(t, sizeof t, "%.6f", ms);
    return t;
}

void emit(const std::string& line) { std::fprintf(stderr, "dyngraph_verbose,%s\n", line.c_str()); }

void event(const char* kind, const char* engine, const std::string& cp, const std::string& binding,
           const std::string& status, const std::string& ops, const std::string& tensors, double ms) {
    emit(std::string(kind) + "," + engine + "," + cp + "," + binding + "," + status + "," + ops + "," + tensors + "," +
         ms_text(ms));
}

std::string cpu_features() {
    struct F {
        const char* name;
        int (*has)();
    };
    static const F fs[] = {{"sse3", ggml_cpu_has_sse3},         {"ssse3", ggml_cpu_has_ssse3},
                           {"avx", ggml_cpu_has_avx},           {"avx2", ggml_cpu_has_avx2},
                           {"fma", ggml_cpu_has_fma},           {"f16c", ggml_cpu_has_f16c},
                           {"bmi2", ggml_cpu_has_bmi2},         {"avx_vnni", ggml_cpu_has_avx_vnni},
                           {"avx512", ggml_cpu_has_avx512},     {"avx512_vbmi", ggml_cpu_has_avx512_vbmi},
                           {"avx512_vnni", ggml_cpu_has_avx512_vnni}, {"avx512_bf16", ggml_cpu_has_avx512_bf16},
                           {"amx_int8", ggml_cpu_has_amx_int8}, {"neon", ggml_cpu_has_neon},
                           {"arm_fma", ggml_cpu_has_arm_fma},   {"dotprod", ggml_cpu_has_dotprod},
                           {"sve", ggml_cpu_has_sve}};
    std::string s;
    for (const F& f : fs)
        if (f.has()) s += (s.empty() ? "" : " ") + std::string(f.name);
    return s.empty() ? "none" : s;
}

void header() {
    emit(std::string("info,dyngraph,") + DYNGRAPH_VERSION);
    emit(std::string("info,ggml,") + ggml_version());
    emit(std::string("info,cpu,isa:") + kernels::isa_name(kernels::kernel_isa()) + ",features:" + cpu_features());
    emit("info,verbose,level:" + std::to_string(level));
    emit("info,template:event,engine,partition,binding,status,ops,tensors,time_ms");
}

}  // namespace

int parse_level(const char* v) {
    if (v == nullptr) return -1;
    if (!std::strcmp(v, "none")) return 0;
    if (!std::strcmp(v, "exec")) return 1;
    if (!std::strcmp(v, "all")) return 2;
    if (*v == '\0') return 0;  // set but empty: as unset
    long n = 0;
    for (const char* c = v; *c; ++c) {
        if (*c < '0' || *c > '9') return -1;
        n = n * 10 + (*c - '0');
        if (n > 1000) n = 1000;
    }
    return n > 2 ? 2 : int(n);
}

bool set_level(int l) {
    if (l < 0) return false;
    std::lock_guard<std::mutex> lock(g_mu);
    const int was = level;
    level = l > 2 ? 2 : l;
    if (level > 0 && level != was) header();
    return true;
}

std::string init_from_env() {
    const char* v = std::getenv("DYNGRAPH_VERBOSE");
    if (v == nullptr) return "";
    const int l = parse_level(v);
    if (l < 0)
        return std::string("DYNGRAPH_VERBOSE='") + v +
               "' is not a verbose level (0 or none, 1 or exec, 2 or all); verbose output stays off";
    set_level(l);
    return "";
}

void compile(const void* cp, const char* engine, const Program& prog, size_t constant_bytes, double ms) {
    std::lock_guard<std::mutex> lock(g_mu);
    g_ids[cp] = g_next++;  // numbered at every level: the numbers do not depend on the level
    if (level < 2) return;
    event("compile", engine, id_of(cp), symbols_text(prog), "constants:" + std::to_string(constant_bytes),
          ops_text(prog), defs_text(prog, nullptr), ms);
}

void build(const void* cp, const char* engine, const Program& prog, const Binding& b, int nodes, double ms) {
    if (level < 2) return;
    std::lock_guard<std::mutex> lock(g_mu);
    event("build", engine, id_of(cp), binding_text(prog, b.symbols), "nodes:" + std::to_string(nodes), ops_text(prog),
          defs_text(prog, &b), ms);
}

void evict(const void* cp, const char* engine, const Program& prog, const std::vector<int64_t>& key, size_t left) {
    if (level < 2) return;
    std::lock_guard<std::mutex> lock(g_mu);
    event("evict", engine, id_of(cp), binding_text(prog, key), "left:" + std::to_string(left), ops_text(prog), "-", 0.0);
}

void exec(const void* cp, const char* engine, const Program& prog, const Binding& b, bool miss,
          const HostTensor* const* in, size_t n_in, const HostTensor* const* out, size_t n_out, double ms) {
    std::string ts;
    for (size_t i = 0; i < n_in; ++i) ts += (ts.empty() ? "" : " ") + tensor_text("in", i, in[i]->dtype, host_shape(*in[i]));
    for (size_t i = 0; i < n_out; ++i)
        ts += (ts.empty() ? "" : " ") + tensor_text("out", i, out[i]->dtype, host_shape(*out[i]));
    std::lock_guard<std::mutex> lock(g_mu);
    event("exec", engine, id_of(cp), binding_text(prog, b.symbols), miss ? "miss" : "hit", ops_text(prog),
          ts.empty() ? "-" : ts, ms);
}

}  // namespace verbose
}  // namespace dg
