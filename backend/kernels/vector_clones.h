// DG_VECTORIZED: a loop the compiler vectorizes, compiled for x86-64-v4
// (AVX-512), x86-64-v3 (AVX2, FMA) and the baseline, and run at the level
// vector_level() picks: the best this CPU has at or below kernel_isa(), so
// DYNGRAPH_KERNEL_ISA=generic|avx2 runs the lower variants on any machine (the
// tests run each). The library itself is built for the baseline, so without
// it such loops run in SSE2. Put it on small leaf functions (a row's loop),
// not on what calls them:
//
//   DG_VECTOR_BODY float row_sum_body(const float* x, int64_t n) { ... }
//   DG_VECTORIZED(float, row_sum, (const float* x, int64_t n), (x, n))
//
// defines row_sum(x, n); each variant is a copy of the body (always inlined)
// compiled for its level. Elsewhere (Clang, other CPUs): the body as it is.
#pragma once

namespace dg::kernels {

// 2: x86-64-v4 (AVX-512F/BW/CD/DQ/VL), 1: x86-64-v3 (AVX2, FMA, F16C, BMI2), 0: the baseline. The
// best the CPU has at or below kernel_isa() (isa.h): avx512 and above -> 2, avx2 -> 1.
int vector_level();

}  // namespace dg::kernels

// DG_VECTORIZED_512 is the same with the x86-64-v4 variant's loops in 512-bit vectors (GCC's
// default for that level is 256): for loops over 16 lanes that do not depend on each other.
//
// DG_VECTOR_LEVELS(v4, ret, name, params, args, at_v4, at_v3, at_base), under both: name(params)
// returning the expression at_v4 compiled for target v4 (an x86-64-v4 target string), at_v3 for
// x86-64-v3, at_base as built, picked by vector_level(); where the variants call different code (a
// template instantiated per level), each its own expression (parenthesized where it holds a comma).
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define DG_VECTOR_BODY static inline __attribute__((always_inline))
#define DG_VECTOR_LEVELS(v4, ret, name, params, args, at_v4, at_v3, at_base)        \
    __attribute__((target(v4))) static ret name##_v4 params { return at_v4; }               \
    __attribute__((target("arch=x86-64-v3"))) static ret name##_v3 params { return at_v3; } \
    ret name params {                                                                       \
        switch (::dg::kernels::vector_level()) {                                            \
            case 2: return name##_v4 args;                                                  \
            case 1: return name##_v3 args;                                                  \
            default: return at_base;                                                        \
        }                                                                                   \
    }
#else
#define DG_VECTOR_BODY static inline
#define DG_VECTOR_LEVELS(v4, ret, name, params, args, at_v4, at_v3, at_base) \
    ret name params { return at_base; }
#endif
#define DG_VECTORIZED_AT(v4, ret, name, params, args) \
    DG_VECTOR_LEVELS(v4, ret, name, params, args, name##_body args, name##_body args, name##_body args)
#define DG_VECTORIZED(ret, name, params, args) DG_VECTORIZED_AT("arch=x86-64-v4", ret, name, params, args)
#define DG_VECTORIZED_512(ret, name, params, args) \
    DG_VECTORIZED_AT("arch=x86-64-v4,prefer-vector-width=512", ret, name, params, args)
