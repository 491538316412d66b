// DG_VECTOR_CLONES: a loop the compiler vectorizes, compiled for x86-64-v4
// (AVX-512), x86-64-v3 (AVX2, FMA) and the baseline, the CPU's best picked at
// load time (GCC's target_clones). The library itself is built for the
// baseline, so without it such loops run in SSE2. Put it on small leaf
// functions (a row's loop), not on what calls them. Elsewhere: plain code.
#pragma once

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define DG_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define DG_VECTOR_CLONES
#endif
