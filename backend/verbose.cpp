#include "verbose.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "binder.h"
#include "ggml.h"
#include "host_tensor.h"
#include "kernels/isa.h"
#include "program.h"

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

void emit(const std::string& line) { std::fprintf(stderr, "dyngraph_verbose,%s\n", line.c_str()); }

}  // namespace

void set_level(int l) {
    std::lock_guard<std::mutex> lock(g_mu);
    const bool was = level > 0;
    level = l < 0 ? 0 : l;
    if (!was && level > 0) {
        emit(std::string("info,ggml,") + ggml_version());
        emit(std::string("info,kernels,") + kernels::isa_name(kernels::kernel_isa()));
    }
}

void init_from_env() {
    const char* v = std::getenv("DYNGRAPH_VERBOSE");
    if (v != nullptr && *v) set_level(std::atoi(v));
}

void compile(const void* cp, const Program& prog, size_t constant_bytes, double ms) {
    std::lock_guard<std::mutex> lock(g_mu);
    g_ids[cp] = g_next++;
    std::string syms;
    for (size_t i = 0; i < prog.symbols.size(); ++i) syms += (i ? ";" : "") + prog.symbols[i].name;
    char t[32];
    std::snprintf(t, sizeof t, "%.3f", ms);
    emit("compile," + id_of(cp) + "," + std::to_string(prog.ops.size()) + "," + std::to_string(prog.inputs.size()) + "," +
         std::to_string(prog.outputs.size()) + "," + (syms.empty() ? "-" : syms) + "," + std::to_string(constant_bytes) +
         "," + t);
}

void build(const void* cp, const Program& prog, const Binding& b, int nodes, double ms) {
    std::lock_guard<std::mutex> lock(g_mu);
    char t[32];
    std::snprintf(t, sizeof t, "%.3f", ms);
    emit("build," + id_of(cp) + "," + binding_text(prog, b.symbols) + "," + std::to_string(nodes) + "," + t);
}

void evict(const void* cp, const Program& prog, const std::vector<int64_t>& key, size_t left) {
    std::lock_guard<std::mutex> lock(g_mu);
    emit("evict," + id_of(cp) + "," + binding_text(prog, key) + "," + std::to_string(left));
}

void exec(const void* cp, const Program& prog, const Binding& b, bool miss, const HostTensor* const* in, size_t n_in,
          double ms) {
    std::string shapes;
    for (size_t i = 0; i < n_in; ++i) {
        if (i) shapes += ';';
        if (in[i]->ndim == 0) shapes += '-';
        for (int d = 0; d < in[i]->ndim; ++d) shapes += (d ? "x" : "") + std::to_string(in[i]->shape[d]);
    }
    std::lock_guard<std::mutex> lock(g_mu);
    char t[32];
    std::snprintf(t, sizeof t, "%.3f", ms);
    emit("exec," + id_of(cp) + "," + binding_text(prog, b.symbols) + "," + (miss ? "miss" : "hit") + "," +
         (shapes.empty() ? "-" : shapes) + "," + t);
}

}  // namespace verbose
}  // namespace dg
