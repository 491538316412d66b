// DYNGRAPH_VERBOSE: one comma-separated line per event on stderr, in the
// spirit of ONEDNN_VERBOSE. Off by default; DYNGRAPH_VERBOSE=1 (read once,
// when the module loads) turns it on. Off, each hook costs one load of a
// global int and a branch. The lines (README, "Verbose mode"):
//
//   dyngraph_verbose,info,<what>,<value>
//   dyngraph_verbose,compile,<partition>,<ops>,<inputs>,<outputs>,<symbols>,<constant bytes>,<ms>
//   dyngraph_verbose,build,<partition>,<binding>,<nodes>,<ms>
//   dyngraph_verbose,evict,<partition>,<binding>,<graphs left>
//   dyngraph_verbose,exec,<partition>,<binding>,<hit|miss>,<input shapes>,<ms>
//
// <partition> is cp<N>, numbered in the order compiled partitions are made
// in the process; a binding is name=value;name=value (or "-" without
// symbols); input shapes are 2x7x64;7 ("-" for a scalar).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dg {

struct Binding;
struct HostTensor;
struct Program;

namespace verbose {

extern int level;  // 0: off

inline bool on() { return level > 0; }

void set_level(int l);
void init_from_env();

inline double now_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// `cp` identifies the compiled partition (its address); compile() numbers it.
void compile(const void* cp, const Program& prog, size_t constant_bytes, double ms);
void build(const void* cp, const Program& prog, const Binding& b, int nodes, double ms);
void evict(const void* cp, const Program& prog, const std::vector<int64_t>& key, size_t left);
void exec(const void* cp, const Program& prog, const Binding& b, bool miss, const HostTensor* const* in, size_t n_in,
          double ms);

}  // namespace verbose
}  // namespace dg
