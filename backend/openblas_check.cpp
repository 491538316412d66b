#include "openblas_check.h"

#include <cblas.h>
#include <strings.h>

#include <cstdlib>

#include "errors.h"

namespace dg {

std::string openblas_core_problem(const char* core, const char* coretype) {
    if (!core || strcasecmp(core, "armv9sme") != 0 || coretype) return "";
    return "OpenBLAS runs its armv9sme kernels, whose f32 products are wrong (docs/guide/cpu-numerics.md, "
           "\"aarch64\"): set OPENBLAS_CORETYPE=ARMV8SVE (or NEOVERSEN1 on a CPU without SVE) before the "
           "process starts, or import dyngraph before anything that loads scipy_openblas32";
}

std::string openblas_core() { return scipy_openblas_get_corename(); }

void require_sound_openblas() {
    static const std::string problem = openblas_core_problem(scipy_openblas_get_corename(), std::getenv("OPENBLAS_CORETYPE"));
    if (!problem.empty()) fail<ExecutionError>(problem);
}

}  // namespace dg
