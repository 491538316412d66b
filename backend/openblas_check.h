// OpenBLAS's armv9sme kernels: the scipy-openblas32 wheel (0.3.34) picks them on an Arm CPU with
// SME, and their sgemm gives wrong products (docs/guide/cpu-numerics.md, "aarch64"). Python's
// import loads OpenBLAS with another core type there (dyngraph/_loader.py); an engine refuses to
// run on those kernels, which a C program or an OpenBLAS loaded before dyngraph would get, unless
// the user chose the core with OPENBLAS_CORETYPE.
#pragma once

#include <string>

namespace dg {

// Why an engine must not run with OpenBLAS's core `core` and OPENBLAS_CORETYPE `coretype` (null:
// not set), or "" if it may: a pure function of the two (tested from Python).
std::string openblas_core_problem(const char* core, const char* coretype);

// The core whose kernels this process's OpenBLAS runs, as OpenBLAS picked it or OPENBLAS_CORETYPE
// named it ("Haswell": AVX2; "SkylakeX", "Cooperlake": AVX-512; "Zen" runs Haswell's kernels).
std::string openblas_core();

// Throws ExecutionError with that reason for this process's OpenBLAS (checked once).
void require_sound_openblas();

}  // namespace dg
