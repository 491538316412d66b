// dyngraph._backend is bound in two files: module.cpp (the module, its errors, the process-wide
// functions, devices, the kernels' levels) and bind_partition.cpp (Engine, Tensor,
// CompiledPartition), so that the two compile in parallel. pybind11's templates made the one
// file of before the longest compile of the build, alone at its end (31 s of -O3, 74 s under
// the sanitizers on a Zen 1); four files cost twice the CPU time for nothing: each pays ~12 s
// (-O3) for pybind11 itself.
#pragma once

#include <pybind11/pybind11.h>

namespace dg::bindings {

void bind_partition(pybind11::module_& m);

}  // namespace dg::bindings
