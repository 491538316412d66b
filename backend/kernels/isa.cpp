#include "isa.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <initializer_list>

#include "vector_clones.h"

#if defined(__GNUC__) && defined(__x86_64__)
#include <cpuid.h>
#endif

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

namespace {

// DYNGRAPH_VECTOR_UNITS, when it is one of the widths it takes, else 0
int units_asked() {
    const char* v = std::getenv("DYNGRAPH_VECTOR_UNITS");
    if (!v) return 0;
    for (int w : {128, 256, 512})
        if (std::strcmp(v, std::to_string(w).c_str()) == 0) return w;
    return 0;
}

}  // namespace

bool half_width_units() {
    static const bool half = [] {
        if (const int w = units_asked()) return w == 128;
#if defined(__GNUC__) && defined(__x86_64__)
        unsigned eax, ebx, ecx, edx;
        if (__get_cpuid(0x80000000u, &eax, &ebx, &ecx, &edx) && eax >= 0x8000001Au &&
            __get_cpuid(0x8000001Au, &eax, &ebx, &ecx, &edx) && (eax & 5u) != 0)
            return (eax & 1u) != 0 && (eax & 4u) == 0;  // FP128 set, FP256 not
        // the leaf hidden or zeroed (a hypervisor may): by family and model, AMD's family 17h below
        // model 30h (Zen, Zen+) and Hygon's family 18h (Dhyana, a Zen)
        if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx)) return false;
        const bool amd = ebx == 0x68747541u && edx == 0x69746e65u && ecx == 0x444d4163u;    // "AuthenticAMD"
        const bool hygon = ebx == 0x6f677948u && edx == 0x6e65476eu && ecx == 0x656e6975u;  // "HygonGenuine"
        if (!(amd || hygon) || !__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
        const unsigned family = ((eax >> 8) & 0xFu) + ((eax >> 20) & 0xFFu);
        const unsigned model = ((eax >> 4) & 0xFu) | ((eax >> 12) & 0xF0u);
        return (amd && family == 0x17 && model < 0x30) || (hygon && family == 0x18);
#endif
        return false;
    }();
    return half;
}

bool split_512_units() {
    static const bool split = [] {
        if (const int w = units_asked()) return w < 512;
        if (half_width_units()) return true;
#if defined(__GNUC__) && defined(__x86_64__)
        unsigned eax, ebx, ecx, edx;
        if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx)) return false;
        const bool amd = ebx == 0x68747541u && edx == 0x69746e65u && ecx == 0x444d4163u;  // "AuthenticAMD"
        if (!amd || !__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
        return ((eax >> 8) & 0xFu) + ((eax >> 20) & 0xFFu) == 0x19;  // Zen 3 and Zen 4: only Zen 4 has AVX-512
#endif
        return false;
    }();
    return split;
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
