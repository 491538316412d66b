// Whether this process may run the AMX int8 products (quant_amx.h): a capability of its own,
// not a level of kernel_isa() (isa.h), because the tiles work only after the OS has enabled them
// for the process. The rule is a pure function of what the probe reads, so that every case can be
// tested on a machine without AMX (tests/ops/test_amx.py):
// - the CPU: CPUID.(EAX=7,ECX=0):EDX bit 24 (AMX-TILE) and bit 25 (AMX-INT8);
// - the OS: CPUID.1:ECX bit 27 (OSXSAVE) and XCR0 (XGETBV 0) bits 17 (XTILECFG) and 18 (XTILEDATA);
// - Linux's permission for this process: arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)
//   returned 0 (requested only when everything else says yes);
// - the kernel level: avx512vnni (every AMX CPU has it); DYNGRAPH_KERNEL_ISA asking for a lower
//   one switches AMX off with the rest;
// - DYNGRAPH_AMX=1 asks for it: off by default (any other value, or none), because on the AMX
//   machine it has run on (2026-12-02) the tile products took 3.6-6.2x the time of the VNNI panels
//   (docs/design/gemm-choices.md); the default flips when they beat them.
// The tile code needs GCC >= 11 or Clang >= 12 on x86-64 Linux; elsewhere it is compiled out and the
// answer is no.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "isa.h"

#if defined(__x86_64__) && defined(__linux__) && !defined(__APPLE__) && \
    ((defined(__clang__) && __clang_major__ >= 12) || (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 11))
#define DG_AMX_COMPILED 1  // the tile code (quant_amx.cpp's real variant) is built
#endif

namespace dg::kernels {

// What the probe reads, once per process.
struct AmxInputs {
    uint32_t leaf7_edx = 0;  // CPUID.(EAX=7,ECX=0):EDX; 0 where the CPU has no leaf 7
    uint32_t leaf1_ecx = 0;  // CPUID.1:ECX
    uint64_t xcr0 = 0;       // XGETBV(0); read only where OSXSAVE is set, else 0
    bool permitted = false;  // the permission request returned 0
    Isa isa = Isa::generic;  // kernel_isa()
    std::optional<std::string> env;  // DYNGRAPH_AMX, where it is set
};

// The rule: true when every input says yes.
bool amx_int8_rule(const AmxInputs& in);

// Whether the tile code is compiled into this build (x86-64 Linux, GCC >= 11 or Clang >= 12).
bool amx_compiled();

// The inputs the probe read in this process, and whether it requested the permission (it does
// only where the rule with the permission granted says yes).
struct AmxProbe {
    AmxInputs inputs;
    bool requested = false;
};
const AmxProbe& amx_probe();

// This process's answer: amx_compiled() and the rule on amx_probe()'s inputs. Probed at the first call.
bool amx_int8();

}  // namespace dg::kernels
