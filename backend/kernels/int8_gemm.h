// The int8 matrix product of QuantizedMatMul (ops/quantize.py), in exact
// integer arithmetic:
//
//   acc[m, n] = sum_k (a[m, k] - a_zp) * (w[n, k] - w_zp[n])     (int32 partial sums, int64 total)
//   y[m, n]   = f32(acc) * scale[n] (+ bias[n])                  (f32, each step rounded once)
//   out       = y, or quantize_value(y, out_inv, out_zp) for u8 / s8 outputs
//
// a and w are u8 or s8 (held as I8 bytes). The AVX2 kernel widens both to
// 16 bits (a - a_zp once per row) and multiplies with vpmaddwd: 16 products
// per instruction, summed in pairs into 32 bits without saturation (AVX2's
// 8-bit vpmaddubsw saturates at 2^15 for u8 x s8, so it cannot be exact).
// Tiles of 4 rows x 2 weight rows keep 8 accumulators in registers; a
// weight row is read once per 4 activation rows. w_zp enters as
// -w_zp[n] * sum_k (a[m, k] - a_zp), a per-row sum. Elsewhere (or with
// DYNGRAPH_KERNEL_ISA=generic) a scalar kernel computes the same integers.
// The ggml q8_0 kernels of quant_gemm.h / quant_rows.h do not apply: their
// blocks carry f16 scales per 32 values and symmetric activations; oneDNN's
// int8 has per-tensor zero points and f32 scales per column.
//
// This file is compiled with -ffp-contract=off (CMakeLists.txt).
#pragma once

#include <cstdint>
#include <vector>

#include "ggml.h"

namespace dg::kernels {

struct Int8GemmParams {
    bool a_unsigned = false, w_unsigned = false;
    int32_t a_zp = 0;
    std::vector<int32_t> w_zp;  // empty, one, or one per column
    std::vector<float> scale;   // f32(src_scale) * f32(wei_scale[n]): one, or one per column
    bool quantize_out = false, out_unsigned = false;
    float out_inv = 1.0f, out_zp = 0.0f;  // the requantization (1 / dst_scale rounded to f32)
};

// out [N, M] (ggml ne: N innermost) = the product of a [K, M] and w [K, N]
// (ggml ne; both I8, dense rows), plus bias (F32 [N], or null). out is F32,
// or I8 when p->quantize_out.
ggml_tensor* int8_matmul(ggml_context* ctx, ggml_tensor* a, ggml_tensor* w, ggml_tensor* bias, const Int8GemmParams* p);

}  // namespace dg::kernels
