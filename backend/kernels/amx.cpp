#include "amx.h"

#include <cstdlib>

#ifdef DG_AMX_COMPILED
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace dg::kernels {

namespace {

constexpr uint32_t kAmxTile = 1u << 24, kAmxInt8 = 1u << 25;  // CPUID.(7,0):EDX
constexpr uint32_t kOsxsave = 1u << 27;                        // CPUID.1:ECX
constexpr uint64_t kXtileState = (1ull << 17) | (1ull << 18);  // XCR0: XTILECFG, XTILEDATA

#ifdef DG_AMX_COMPILED
constexpr long kArchReqXcompPerm = 0x1023;  // Linux: arch_prctl(ARCH_REQ_XCOMP_PERM, feature)
constexpr long kXfeatureXtiledata = 18;

AmxProbe probe() {
    AmxProbe p;
    AmxInputs& in = p.inputs;
    unsigned a, b, c, d;
    if (__get_cpuid_max(0, nullptr) >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        in.leaf7_edx = d;
    }
    if (__get_cpuid(1, &a, &b, &c, &d)) in.leaf1_ecx = c;
    if (in.leaf1_ecx & kOsxsave) {
        uint32_t lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        in.xcr0 = (uint64_t(hi) << 32) | lo;
    }
    in.isa = kernel_isa();
    if (const char* v = std::getenv("DYNGRAPH_AMX")) in.env = v;
    // the request changes the process (larger signal frames): made only where it decides the answer
    in.permitted = true;
    if (amx_int8_rule(in)) {
        p.requested = true;
        in.permitted = syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
    } else {
        in.permitted = false;
    }
    return p;
}
#else
AmxProbe probe() {
    AmxProbe p;
    p.inputs.isa = kernel_isa();
    if (const char* v = std::getenv("DYNGRAPH_AMX")) p.inputs.env = v;
    return p;
}
#endif

}  // namespace

bool amx_int8_rule(const AmxInputs& in) {
    const bool cpu = (in.leaf7_edx & kAmxTile) && (in.leaf7_edx & kAmxInt8);
    const bool os = (in.leaf1_ecx & kOsxsave) && (in.xcr0 & kXtileState) == kXtileState;
    const bool asked = in.env && *in.env == "1";  // opt-in until the tiles have run on AMX hardware
    return cpu && os && in.permitted && in.isa >= Isa::avx512vnni && asked;
}

bool amx_compiled() {
#ifdef DG_AMX_COMPILED
    return true;
#else
    return false;
#endif
}

const AmxProbe& amx_probe() {
    static const AmxProbe p = probe();
    return p;
}

bool amx_int8() {
    static const bool yes = amx_compiled() && amx_int8_rule(amx_probe().inputs);
    return yes;
}

}  // namespace dg::kernels
