// The ISA dispatch of our integer products with q8_0 / q4_0 / q4_1 weights: which weight types
// they take (quant_rows.cpp, 1-7 rows, and quant_gemm.cpp, 8 rows or more with VNNI), and for
// quant_rows the AVX-512 VNNI variant where the CPU has it (quant_vnni.h), else the activations
// rounded to 8 bits (quant_act.h) and the AVX2 kernel of the weight's type. x86-64 only:
// elsewhere no weight type is taken and ggml's product runs.
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "ggml.h"
#include "isa.h"
#include "quant_act.h"
#include "quant_blocks.h"

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define DG_QUANT_X86 1
#endif

namespace dg::kernels {

// Whether the AVX2 (or VNNI) products take weights of `type` on this CPU.
inline bool quant_product_supports(ggml_type type) {
#ifdef DG_QUANT_X86
    return kernel_isa() != Isa::generic &&
           (type == GGML_TYPE_Q8_0 || type == GGML_TYPE_Q4_0 || type == GGML_TYPE_Q4_1);
#else
    (void)type;
    return false;
#endif
}

// The weight type as a value a generic lambda can take a template argument from.
template <ggml_type T>
using QuantType = std::integral_constant<ggml_type, T>;

// The product of `rows` f32 activation rows (A, lda apart; K a multiple of 32) with weights of
// `type` (quant_product_supports): `vnni()` where the CPU has AVX-512 VNNI, else the rows rounded
// to blocks in this thread's buffer (it grows to the largest rows * K / 32 seen) and
// `avx2(QuantType<T>{}, act, nb)` for the weight type T (nb = K / 32 blocks a row).
template <class Vnni, class Avx2>
void quant_product(ggml_type type, int64_t rows, int64_t K, const float* A, int64_t lda, Vnni&& vnni, Avx2&& avx2) {
    if (kernel_isa() >= Isa::avx512vnni) return vnni();
    const int64_t nb = K / kQuantBlock;
    thread_local std::vector<ActBlock> act;
    if (act.size() < size_t(rows * nb)) act.resize(size_t(rows * nb));
    for (int64_t m = 0; m < rows; ++m) quantize_act_row(A + m * lda, nb, act.data() + m * nb);
    if (type == GGML_TYPE_Q8_0) return avx2(QuantType<GGML_TYPE_Q8_0>{}, act.data(), nb);
    if (type == GGML_TYPE_Q4_0) return avx2(QuantType<GGML_TYPE_Q4_0>{}, act.data(), nb);
    avx2(QuantType<GGML_TYPE_Q4_1>{}, act.data(), nb);
}

// Bytes of one block of weight type T.
template <ggml_type T>
constexpr size_t block_bytes() {
    return T == GGML_TYPE_Q8_0 ? sizeof(BlockQ8_0) : T == GGML_TYPE_Q4_0 ? sizeof(BlockQ4_0) : sizeof(BlockQ4_1);
}

#ifdef DG_QUANT_X86
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

// The sum of a vector's 8 lanes.
inline float hsum(__m256 v) {
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
}

#pragma GCC pop_options
#endif

}  // namespace dg::kernels
