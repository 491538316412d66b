#include "isa.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

#include "vector_clones.h"

namespace dg::kernels {

namespace {

Isa best_isa() {
#if defined(__GNUC__) && defined(__x86_64__)
    __builtin_cpu_init();
    if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")))
        return Isa::generic;
    if (!(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl"))) return Isa::avx2;
    if (!(__builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vnni") &&
          __builtin_cpu_supports("avx512vbmi")))
        return Isa::avx512;
    return Isa::avx512vnni;
#else
    return Isa::generic;
#endif
}

Isa pick_isa() {
    const Isa best = best_isa();
    const char* v = std::getenv("DYNGRAPH_KERNEL_ISA");
    if (!v) return best;
    for (Isa lower : {Isa::generic, Isa::avx2, Isa::avx512})
        if (std::strcmp(v, isa_name(lower)) == 0) return lower < best ? lower : best;
    return best;
}

std::atomic<int>& chosen() {
    static std::atomic<int> isa{int(pick_isa())};
    return isa;
}

}  // namespace

Isa kernel_isa() { return Isa(chosen().load(std::memory_order_relaxed)); }

Isa set_kernel_isa_for_benchmark(Isa isa) {
    const Isa best = best_isa();
    chosen().store(int(isa < best ? isa : best), std::memory_order_relaxed);
    return kernel_isa();
}

int vector_level() {
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
    static const bool v4 = (__builtin_cpu_init(), __builtin_cpu_supports("x86-64-v4") != 0);
    static const bool v3 = __builtin_cpu_supports("x86-64-v3") != 0;
    const Isa isa = kernel_isa();
    return isa >= Isa::avx512 && v4 ? 2 : isa >= Isa::avx2 && (v3 || v4) ? 1 : 0;
#else
    return 0;
#endif
}

const char* isa_name(Isa isa) {
    switch (isa) {
        case Isa::avx512vnni: return "avx512vnni";
        case Isa::avx512: return "avx512";
        case Isa::avx2: return "avx2";
        default: return "generic";
    }
}

}  // namespace dg::kernels
