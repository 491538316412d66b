// What the int8 kernels (int8_gemm.h: QuantizedMatMul, int8_conv.h:
// QuantizedConvolution) share: their parameters, exact integer dot products
// of activation rows with weight rows, and the f32 epilogue. The arithmetic
// (ops/quantize.py, QuantizedMatMul):
//
//   acc[m, n] = sum_k (a[m, k] - a_zp) * (w[n, k] - w_zp[n])     (exact: int32 partial sums, int64 total)
//   y[m, n]   = f32(acc) * scale[n] (+ bias[n])                  (f32, each step rounded once)
//   out       = y, or quantize_value(y, out_inv, out_zp) for u8 / s8 outputs
//
// int8_dot multiplies rows of bytes: activations of the signedness opposite
// to the weights' (u8 x s8, or s8 x u8), the form of AVX-512 VNNI's vpdpbusd
// (64 byte products per instruction, summed in fours into 32 bits exactly:
// no 16-bit intermediate, unlike AVX2's saturating vpmaddubsw). The caller
// hands over its activations so: as they are, or with the sign bit flipped
// (v + 128 or v - 128, the zero point moved alike; int8_act), and takes the
// zero points out afterwards, from the row and column sums (int8_correct_row):
//   sum_k (a - za) (w - zw) = sum_k a w - zw sum_k a - za sum_k w + K za zw.
// Without VNNI, AVX2 widens both to 16 bits and multiplies with vpmaddwd (16
// products per instruction, summed in pairs into 32 bits); elsewhere (or
// with DYNGRAPH_KERNEL_ISA=generic / avx2) a scalar kernel or the AVX2 one
// computes the same integers. The ggml q8_0 kernels of quant_gemm.h /
// quant_rows.h do not apply: their blocks carry f16 scales per 32 values and
// symmetric activations; oneDNN's int8 has per-tensor zero points and f32
// scales per column.
//
// The epilogue (int8_dot.cpp) is compiled with -ffp-contract=off
// (CMakeLists.txt): its product and sum round twice, never fuse.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace dg::kernels {

struct Int8Params {
    bool a_unsigned = false, w_unsigned = false;
    int32_t a_zp = 0;
    std::vector<int32_t> w_zp;  // empty, one, or one per column
    std::vector<float> scale;   // f32(src_scale) * f32(wei_scale[n]): one, or one per column
    bool quantize_out = false, out_unsigned = false;
    float out_inv = 1.0f, out_zp = 0.0f;  // the requantization (1 / dst_scale rounded to f32)

    // Whether the per-column lists fit n columns.
    bool fits(size_t n) const {
        return !scale.empty() && (scale.size() == 1 || scale.size() == n) && (w_zp.size() <= 1 || w_zp.size() == n);
    }
};

// How activations go to int8_dot: flipped (bytes XOR 0x80) when their signedness is the weights', and
// their zero point in those terms.
struct Int8Act {
    bool flip;
    int32_t zp;
};

inline Int8Act int8_act(const Int8Params& p) {
    const bool flip = p.a_unsigned == p.w_unsigned;
    return {flip, flip ? p.a_zp + (p.a_unsigned ? -128 : 128) : p.a_zp};
}

// tot[m * ldt + n] = sum_k a[m * lda + k] * w[n * ldw + k] for m < M, n < N, exactly: bytes of a are u8 and
// of w s8, or (w_unsigned) a's s8 and w's u8.
void int8_dot(const char* a, int64_t lda, int64_t M, int64_t K, const char* w, int64_t ldw, int64_t N, bool w_unsigned,
              int64_t* tot, int64_t ldt);

// sum_k of n bytes (u8 when is_unsigned, else s8).
int64_t int8_sum(const char* v, int64_t n, bool is_unsigned);

// acc[j] = sum_k (a - za) (w - zw) for columns n0 .. n0 + n - 1 of one activation row, in place of the
// row's int8_dot products acc[j] with those columns' weight rows, over K terms: from the row's sum row_sum
// (read when p has weight zero points) and the columns' sums col_sum[j] (read when act.zp is not 0):
//   sum_k (a - za) (w - zw) = sum_k a w - zw (sum_k a - K za) - za sum_k w.
void int8_correct_row(const Int8Params& p, const Int8Act& act, int64_t K, int64_t row_sum, const int64_t* col_sum,
                      int64_t n0, int64_t n, int64_t* acc);

// The same for n outputs of one column (channel) c, acc[j] the int8_dot products of its weight row with
// activation rows j, whose sums are row_sum[j] (read when p has weight zero points); col_sum: the
// column's weight sum (used when act.zp is not 0).
void int8_correct_column(const Int8Params& p, const Int8Act& act, int64_t K, const int64_t* row_sum, int64_t col_sum,
                         int64_t c, int64_t n, int64_t* acc);

// The outputs of one row for columns n0 .. n0 + n - 1 from their exact sums acc[j]: stored (F32, or bytes
// when p.quantize_out) at elements i0 + j * stride of out. Vectorized where the CPU allows.
void int8_finish_row(const Int8Params& p, const float* bias, int64_t n0, int64_t n, const int64_t* acc, void* out,
                     int64_t i0, int64_t stride);

// The same for n outputs of one column c, stored at elements i0 .. i0 + n - 1 of out.
void int8_finish_column(const Int8Params& p, const float* bias, int64_t c, int64_t n, const int64_t* acc, void* out,
                        int64_t i0);

}  // namespace dg::kernels
