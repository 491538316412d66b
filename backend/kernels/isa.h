// The instruction set our hand-vectorized kernels (small_gemm, dequantize)
// run with in this process: the best the CPU has, or a lower one asked for
// with DYNGRAPH_KERNEL_ISA=generic|avx2 (the tests run every variant that way).
// avx2 means AVX2 + FMA + F16C (every AVX2 CPU has the other two); avx512
// adds AVX-512F + VL.
#pragma once

namespace dg::kernels {

enum class Isa { generic, avx2, avx512 };

// Chosen once per process.
Isa kernel_isa();

// "generic", "avx2" or "avx512".
const char* isa_name(Isa isa);

}  // namespace dg::kernels
