#include "quant_gemm.h"

#include "amx.h"
#include "isa.h"
#include "quant_amx.h"
#include "quant_dispatch.h"
#include "quant_vnni.h"

namespace dg::kernels {

#ifdef DG_QUANT_X86

void quant_gemm_nt(ggml_type type, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const char* W,
                   size_t ldw, float* C, int64_t ldc) {
    // prefill on AMX tiles where the OS enabled them and DYNGRAPH_AMX=1 asked (amx.h; kernel_isa()
    // checked again for set_kernel_isa_for_benchmark); tests/ops/test_amx.py runs the same algorithm
    // on emulated tiles, and compares the two where the machine has AMX.
    if (M >= amx::kMinRows && amx::supports(type) && amx_int8() && kernel_isa() >= Isa::avx512vnni)
        return amx::quant_gemm_nt(type, M, N, K, A, lda, W, ldw, C, ldc);
    vnni::quant_gemm_nt(type, M, N, K, A, lda, W, ldw, C, ldc);
}

#else  // not x86-64: never chosen (quant_gemm_supports)

void quant_gemm_nt(ggml_type, int64_t, int64_t, int64_t, const float*, int64_t, const char*, size_t, float*, int64_t) {}

#endif

bool quant_gemm_supports(ggml_type type) { return kernel_isa() >= Isa::avx512vnni && quant_product_supports(type); }

}  // namespace dg::kernels
