// The instruction set our hand-vectorized kernels (small_gemm, dequantize,
// the quantized products) run with in this process: the best the CPU has, or
// a lower one asked for with DYNGRAPH_KERNEL_ISA=generic|avx2|avx512 (the
// tests run every variant that way). The levels, each including the ones
// below it:
// - avx2: AVX2 + FMA + F16C (every AVX2 CPU has the other two): f32
//   products of 2-7 rows (small_gemm.h) and of 8-255 rows (f32_gemm.h),
//   products with q8_0 / q4_0 / q4_1 weights (quant_rows.h; in panels,
//   quant_panels.h);
// - avx512: adds AVX-512F + VL (wider variants of those, f32_gemm.h up to
//   63 rows, and one-row f32 products, f32_matvec.h);
// - avx512vnni: adds AVX-512BW, VNNI (vpdpbusd, 8-bit dot products) and VBMI
//   (byte permutes): Intel Ice Lake and later, AMD Zen 4 and later. The
//   products with q8_0 / q4_0 / q4_1 weights (quant_vnni.h) use it; at the
//   avx512 level they run their AVX2 variants.
#pragma once

namespace dg::kernels {

enum class Isa { generic, avx2, avx512, avx512vnni };  // in this order: a level includes those before it

// Chosen once per process (DYNGRAPH_KERNEL_ISA read at the first call).
Isa kernel_isa();

// Benchmarks only (tests/benchmarks/cpp): switch the variant for the calls that
// follow, to time two variants side by side in one process; capped at the best
// this CPU has. Returns the variant now in use. The int8 ops' dot products
// (int8_dot.h) pick their variant once per process and do not follow it.
Isa set_kernel_isa_for_benchmark(Isa isa);

// Whether the CPU issues a 256-bit vector operation as two 128-bit halves: AMD's CPUID leaf
// 0x8000001A says so (FP128; Zen 1, Zen+, Hygon Dhyana); Intel's CPUs and AMD's from Zen 2 on have
// 256-bit units (the leaf's FP256 bit, or no such leaf). Kernels whose 128-bit form needs fewer
// operations pick it there (quant_rows.cpp). DYNGRAPH_VECTOR_UNITS=128, or 256 or 512, read once,
// overrides it (the tests run both forms on any CPU).
bool half_width_units();

// Whether the CPU issues a 512-bit vector operation as two 256-bit halves (where it has AVX-512):
// AMD's Zen 4 (family 19h; its Zen 3 models have no AVX-512), and every CPU half_width_units()
// names. Intel's AVX-512 CPUs and AMD's Zen 5 server parts run them at full width; no CPUID bit is
// read for it, so Zen 5's mobile parts, which split them, count as full width too. Kernels
// whose tile shape was measured better for it pick that shape there (f32_gemm.cpp).
// DYNGRAPH_VECTOR_UNITS=128 or 256 makes it true, 512 false.
bool split_512_units();

// "generic", "avx2", "avx512" or "avx512vnni".
const char* isa_name(Isa isa);

}  // namespace dg::kernels
