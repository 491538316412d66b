// dg_bench: dyngraph's C++ microbenchmarks in one program (one link of the runtime, which
// link-time optimization makes the slow part of building them).
//
//   dg_bench rebuild STACK.dgir [ITERATIONS]      build_graph against a graph built by hand
//   dg_bench matmul [ROWS] [REPS]                 which matrix product per weight type and shape
//   dg_bench capi MODEL.dg [ROUNDS] [BATCH...]    the C API's cost per execute against the C++ call
//   dg_bench dequant [REPS] [TYPES]               weight rows to f32: ggml's conversion against ours
#pragma once

#include <algorithm>
#include <vector>

namespace dg_bench {

inline double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n == 0 ? 0.0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Each takes the arguments after its name; argv[0] is "dg_bench NAME" (for usage lines).
int rebuild_main(int argc, char** argv);
int matmul_main(int argc, char** argv);
int capi_main(int argc, char** argv);
int dequant_main(int argc, char** argv);

}  // namespace dg_bench
