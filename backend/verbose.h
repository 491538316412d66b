// DYNGRAPH_VERBOSE: one comma-separated line per event on stderr, in the
// spirit of ONEDNN_VERBOSE (docs/guide/verbose.md). Levels add detail:
//   0 (or none): off, the default
//   1 (or exec): a header, then one line per execute
//   2 (or all, and any larger number): + compile, graph build and eviction
// Any other value is warned about and leaves verbose off. Off, each hook
// costs one load of a global int and a branch.
//
// The header:
//   dyngraph_verbose,info,dyngraph,<version>
//   dyngraph_verbose,info,ggml,<version>
//   dyngraph_verbose,info,cpu,isa:<kernels' ISA>,features:<space-separated CPU features>
//   dyngraph_verbose,info,verbose,level:<n>
//   dyngraph_verbose,info,template:event,engine,partition,binding,status,ops,tensors,time_ms
// and every event line follows the template:
//   dyngraph_verbose,<event>,<engine>,<partition>,<binding>,<status>,<ops>,<tensors>,<ms>
//
// <partition> is cp<N>, numbered in the order compiled partitions are made
// in the process; a binding is name=value;name=value (or "-" without
// symbols); <ops> the op kinds as kind:count;...; <tensors> space-separated
// in<i>|out<i>:<dtype>:strided:<shape>, shapes 2x7x64 ("-" for a scalar).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dg {

struct Binding;
struct HostTensor;
struct Program;

namespace verbose {

extern int level;  // 0: off

inline bool on() { return level > 0; }
inline bool creation() { return level > 1; }  // compile, build and evict lines

// Levels below 0 are refused (returns false, level unchanged); above 2 mean 2.
bool set_level(int l);
// The level a DYNGRAPH_VERBOSE value names, or -1 when it names none.
int parse_level(const char* v);
// Reads DYNGRAPH_VERBOSE; returns a warning to show when its value is invalid
// (verbose then stays off), else "".
std::string init_from_env();

inline double now_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// `cp` identifies the compiled partition (its address); compile() numbers it.
// `engine` is "cpu", or the devices a partition runs on.
void compile(const void* cp, const char* engine, const Program& prog, size_t constant_bytes, double ms);
void build(const void* cp, const char* engine, const Program& prog, const Binding& b, int nodes, double ms);
void evict(const void* cp, const char* engine, const Program& prog, const std::vector<int64_t>& key, size_t left);
void exec(const void* cp, const char* engine, const Program& prog, const Binding& b, bool miss,
          const HostTensor* const* in, size_t n_in, const HostTensor* const* out, size_t n_out, double ms);

}  // namespace verbose
}  // namespace dg
