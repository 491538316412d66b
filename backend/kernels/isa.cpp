#include "isa.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
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
    return std::strcmp(v, "128") == 0 ? 128 : std::strcmp(v, "256") == 0 ? 256 : std::strcmp(v, "512") == 0 ? 512 : 0;
}

// The CPU's vendor (AMD's and Hygon's only) and its family and model as CPUID leaf 1 gives them
struct CpuModel {
    bool amd = false, hygon = false;
    unsigned family = 0, model = 0;
};

CpuModel cpu_model() {
    CpuModel c;
#if defined(__GNUC__) && defined(__x86_64__)
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx)) return c;
    c.amd = ebx == 0x68747541u && edx == 0x69746e65u && ecx == 0x444d4163u;    // "AuthenticAMD"
    c.hygon = ebx == 0x6f677948u && edx == 0x6e65476eu && ecx == 0x656e6975u;  // "HygonGenuine"
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return c;
    c.family = ((eax >> 8) & 0xFu) + ((eax >> 20) & 0xFFu);
    c.model = ((eax >> 4) & 0xFu) | ((eax >> 12) & 0xF0u);
#endif
    return c;
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
#endif
        // the leaf hidden or zeroed (a hypervisor may), or not x86: by family and model, AMD's
        // family 17h below model 30h (Zen, Zen+) and Hygon's family 18h (Dhyana, a Zen)
        const CpuModel c = cpu_model();
        return (c.amd && c.family == 0x17 && c.model < 0x30) || (c.hygon && c.family == 0x18);
    }();
    return half;
}

bool split_512_units() {
    static const bool split = [] {
        if (const int w = units_asked()) return w < 512;
        const CpuModel c = cpu_model();
        return half_width_units() || (c.amd && c.family == 0x19);  // Zen 3 and Zen 4: only Zen 4 has AVX-512
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
