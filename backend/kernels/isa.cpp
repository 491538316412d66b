#include "isa.h"

#include <cstdlib>
#include <cstring>

namespace dg::kernels {

namespace {

Isa pick_isa() {
    Isa best = Isa::generic;
#if defined(__GNUC__) && defined(__x86_64__)
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")) {
        best = Isa::avx2;
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl")) best = Isa::avx512;
    }
#endif
    const char* v = std::getenv("DYNGRAPH_KERNEL_ISA");
    if (v && std::strcmp(v, "generic") == 0) return Isa::generic;
    if (v && std::strcmp(v, "avx2") == 0 && best == Isa::avx512) return Isa::avx2;
    return best;
}

}  // namespace

Isa kernel_isa() {
    static const Isa picked = pick_isa();
    return picked;
}

const char* isa_name(Isa isa) { return isa == Isa::avx512 ? "avx512" : isa == Isa::avx2 ? "avx2" : "generic"; }

}  // namespace dg::kernels
