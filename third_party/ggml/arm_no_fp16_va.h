/* Forced into ggml-cpu's C and C++ sources on Arm (third_party/ggml/ggml.cmake): with FP16 vector
 * arithmetic (FEAT_FP16, in -mcpu=native from the Neoverse N1 on) ggml keeps f16 products' sums in
 * float16x8_t accumulators (its f16 vectors, llamafile's f16 tiles), the loss AVX512-FP16 brings on
 * x86. Undefining the feature macro on the command line is not enough: GCC's arm_neon.h restores
 * it (its target pragmas) in C. Included first, then undefined, it stays undefined, and ggml takes
 * its f32-accumulating paths; the intrinsics stay declared. */
#include <arm_neon.h>
#undef __ARM_FEATURE_FP16_VECTOR_ARITHMETIC
