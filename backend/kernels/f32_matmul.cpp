#include "f32_matmul.h"
#include "../gg.h"

#include <cblas.h>

#include "ggml-cpu.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <vector>

#include "amx.h"
#include "dequantize.h"
#include "f32_gemm.h"
#include "f32_matvec.h"
#include "f32_panels.h"
#include "quant_panels.h"
#include "isa.h"
#include "kernels.h"
#include "quant_gemm.h"
#include "quant_rows.h"
#include "small_gemm.h"
#include "vector_clones.h"

namespace dg::kernels {

namespace {

const int kPanelsMark = 0;  // the address x->extra points to for weights in panels (mark_panels)

// Column blocks handed to one thread are multiples of this (whole cache lines of C).
constexpr int64_t kColumnAlign = 16;

// Weight rows dequantized at a time by one thread: about this many bytes of
// f32 (in L2 while sgemm reads them), in multiples of kColumnAlign rows.
constexpr int64_t kDequantBlockBytes = 256 << 10;

// C[M, n] = A[M, K] . W[n, K]^T for a quantized W of n rows (row stride ldw
// bytes): blocks of W's rows dequantized into a per-thread buffer, then sgemm.
void dequant_sgemm(ggml_type type, int64_t M, int64_t n, int64_t K, const float* A, int lda, const char* W, size_t ldw,
                   float* C, int ldc, float beta) {
    thread_local std::vector<float> rows;  // grows to the largest block this thread dequantized
    const int64_t block = std::max<int64_t>(kColumnAlign, kDequantBlockBytes / (K * int64_t(sizeof(float))) /
                                                              kColumnAlign * kColumnAlign);
    const int64_t nb = std::min(block, n);
    if (rows.size() < std::size_t(nb * K)) rows.resize(std::size_t(nb * K));
    for (int64_t c = 0; c < n; c += block) {
        const int64_t nc = std::min(block, n - c);
        for (int64_t r = 0; r < nc; ++r) dequantize_row(type, W + size_t(c + r) * ldw, rows.data() + r * K, K);
        scipy_cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(M), int(nc), int(K), 1.0f, A, lda, rows.data(),
                          int(K), beta, C + c, ldc);
    }
}

// f32_gemm's products (f32 weights, or dequantized in chunks) are those of fewer activation rows than this.
int64_t f32_gemm_max_rows() {
    const Isa isa = kernel_isa();
    return isa == Isa::generic ? 0 : isa == Isa::avx2 ? kF32GemmMaxRowsAvx2 : kF32GemmMaxRows;
}

// C[m, j] = bias[j] for rows m < M, columns j < n: what sgemm then adds its product to (beta 1), in
// place of the zeros it would write first (the bias costs no pass of its own).
void fill_bias(int64_t M, int64_t n, const float* bias, float* C, int ldc) {
    for (int64_t m = 0; m < M; ++m) std::copy(bias, bias + n, C + m * ldc);
}

// C[m, j] += bias[j]: after the kernels that write C themselves, on a block still in cache.
DG_VECTOR_BODY void add_bias_body(int64_t M, int64_t n, const float* bias, float* C, int ldc) {
    for (int64_t m = 0; m < M; ++m) {
        float* c = C + m * ldc;
        for (int64_t j = 0; j < n; ++j) c[j] += bias[j];
    }
}
DG_VECTORIZED(void, add_bias, (int64_t M, int64_t n, const float* bias, float* C, int ldc), (M, n, bias, C, ldc))

// Rows each thread takes where the threads share a product of weights in f32/f16/bf16 panels by rows
// (each all the columns) rather than by columns (each all the rows); 0 where by columns. Columns go
// by whole panels (`align`), and where those do not share out evenly (N = 256 on 2 threads: 144 and
// 112 columns) a thread's share of the rows (multiples of a tile's) is the smaller work, as long as
// each thread has rows enough (kMinRows) to pay for reading all the weights. The sums do not depend
// on the split: each output is one tile's, over k in order either way.
int64_t panel_rows_each(int64_t M, int64_t N, int64_t align, int nth) {
    constexpr int64_t kRowAlign = 8, kMinRows = 64;
    const int64_t cols = std::min(N, ((N + nth - 1) / nth + align - 1) / align * align);
    const int64_t rows = ((M + nth - 1) / nth + kRowAlign - 1) / kRowAlign * kRowAlign;
    return nth > 1 && rows >= kMinRows && rows * N < cols * M ? rows : 0;
}

// The custom op's userdata: a pointer to one of these (static, so a graph keeps no side storage).
constexpr Activation kActivations[] = {Activation::None, Activation::Relu, Activation::GeluErf};

void f32_matmul_kernel(ggml_tensor* dst, int ith, int nth, void* userdata) {
    const Activation act = *static_cast<const Activation*>(userdata);
    const ggml_tensor* x = dst->src[0];
    const ggml_tensor* y = dst->src[1];
    // a bias of N values added to every row (bias_fuses), or none
    const float* bias = dst->src[2] ? static_cast<const float*>(dst->src[2]->data) : nullptr;
    const int64_t K = x->ne[0], N = x->ne[1], M = y->ne[1];
    const int64_t batches = dst->ne[2] * dst->ne[3];
    const int64_t r2 = y->ne[2] / x->ne[2], r3 = y->ne[3] / x->ne[3];
    // (a matrix of one row: its stride is never stepped, and a dense view may hold any value there,
    // which sgemm would refuse as a leading dimension below K)
    const int lda = int(M == 1 ? K : y->nb[1] / sizeof(float)), ldb = int(N == 1 ? K : x->nb[1] / sizeof(float));
    const int ldc = int(dst->nb[1] / sizeof(float));

    // weights in panels (f32_panels.h, quant_panels.h): a thread's columns are whole panels
    const bool panels = in_panels(x);
    const bool half = x->type == GGML_TYPE_F16 || x->type == GGML_TYPE_BF16;
    const bool float_panels = panels && (x->type == GGML_TYPE_F32 || half);
    const int64_t align = !panels ? kColumnAlign : float_panels ? kPanelWidth : kQuantPanelWidth;
    // whole batches per thread when there are enough of them, else a share of every batch's columns
    const bool by_batch = batches >= nth;
    const int64_t rows_each = !by_batch && float_panels ? panel_rows_each(M, N, align, nth) : 0;
    int64_t n0 = 0, n1 = N, m0 = 0;
    if (rows_each > 0) {
        m0 = std::min(M, rows_each * ith);
        if (m0 >= M) return;
    } else if (!by_batch) {
        const int64_t per = ((N + nth - 1) / nth + align - 1) / align * align;
        n0 = std::min(N, per * ith);
        n1 = std::min(N, n0 + per);
        if (n0 >= n1) return;
    }
    for (int64_t b = by_batch ? ith : 0; b < batches; b += by_batch ? nth : 1) {
        const int64_t i2 = b % dst->ne[2], i3 = b / dst->ne[2];
        const auto* A = reinterpret_cast<const float*>(static_cast<const char*>(y->data) + i2 * y->nb[2] + i3 * y->nb[3]);
        const char* W = static_cast<const char*>(x->data) + (i2 / r2) * x->nb[2] + (i3 / r3) * x->nb[3] + n0 * x->nb[1];
        auto* C = reinterpret_cast<float*>(static_cast<char*>(dst->data) + i2 * dst->nb[2] + i3 * dst->nb[3]);
        // C[M, N] = A[M, K] . B[N, K]^T (+ bias), row-major
        const int64_t n = n1 - n0;
        bool bias_added = false;  // sgemm adds the product to the bias written first
        if (float_panels) {  // (the bias and the activation tile by tile, in cache)
            const PanelEpilogue epi{bias ? bias + n0 : nullptr, act};
            // (rows m0 on: a share of the rows, rows_each > 0)
            const int64_t rows = rows_each > 0 ? std::min(rows_each, M - m0) : M;
            const float* a = A + m0 * lda;
            float* c = C + m0 * ldc + n0;
            if (half)
                half_gemm_panels(x->type, rows, N, K, n0, n1, a, lda, reinterpret_cast<const uint16_t*>(W - n0 * x->nb[1]),
                                 c, ldc, epi);
            else
                f32_gemm_panels(rows, N, K, n0, n1, a, lda, reinterpret_cast<const float*>(W - n0 * x->nb[1]), c, ldc,
                                epi);
            continue;
        } else if (panels) {
            quant_gemm_panels(x->type, M, N, K, n0, n1, A, lda, reinterpret_cast<const uint8_t*>(W - n0 * x->nb[1]), C + n0, ldc);
        } else if (x->type != GGML_TYPE_F32 && M <= kQuantRowsMax && quant_rows_supports(x->type)) {
            quant_rows_nt(x->type, int(M), n, K, A, lda, W, x->nb[1], C + n0, ldc);
        } else if (x->type != GGML_TYPE_F32 && quant_gemm_supports(x->type)) {
            quant_gemm_nt(x->type, M, n, K, A, lda, W, x->nb[1], C + n0, ldc);
        } else if (x->type != GGML_TYPE_F32 && (M < f32_gemm_max_rows() || kernel_isa() == Isa::avx2)) {
            // (with AVX2 at every row count: on a Zen 1 29-34 GFLOP/s at 256-2048 rows, where
            // dequant_sgemm ran 13-21 in a process that had run only such products and 32-35 after
            // f32 products had run; the same code and sizes, not understood: a buffer's placement?)
            f32_gemm_nt_dequant(x->type, M, n, K, A, lda, W, x->nb[1], C + n0, ldc);
        } else if (x->type != GGML_TYPE_F32) {
            if (bias) fill_bias(M, n, bias + n0, C + n0, ldc);
            dequant_sgemm(x->type, M, n, K, A, lda, W, x->nb[1], C + n0, ldc, bias ? 1.0f : 0.0f);
            bias_added = true;
        } else if (M == 1 && kernel_isa() >= Isa::avx512) {
            f32_matvec_nt(n, K, A, reinterpret_cast<const float*>(W), ldb, C + n0);
        } else if (M == 1 && kernel_isa() == Isa::avx2) {
            f32_matvec_nt_avx2(n, K, A, reinterpret_cast<const float*>(W), ldb, C + n0);
        } else if (M <= kSmallGemmMaxRows) {
            small_gemm_nt(int(M), n, K, A, lda, reinterpret_cast<const float*>(W), ldb, C + n0, ldc);
        } else if (M < f32_gemm_max_rows()) {
            f32_gemm_nt(M, n, K, A, lda, reinterpret_cast<const float*>(W), ldb, C + n0, ldc);
        } else {
            if (bias) fill_bias(M, n, bias + n0, C + n0, ldc);
            scipy_cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(M), int(n), int(K), 1.0f, A, lda,
                              reinterpret_cast<const float*>(W), ldb, bias ? 1.0f : 0.0f, C + n0, ldc);
            bias_added = true;
        }
        if (bias && !bias_added) add_bias(M, n, bias + n0, C + n0, ldc);
        activate(act, M, n, C + n0, ldc);
    }
}

// Elements contiguous in each row, rows apart by at least a row (one row: any stride, as a dense
// tensor of one row leaves it; the kernel does not read it then).
bool rows_contiguous(const ggml_tensor* t) {
    return t->nb[0] == ggml_type_size(t->type) &&
           (t->ne[1] == 1 || ((t->type != GGML_TYPE_F32 || t->nb[1] % sizeof(float) == 0) &&
                              t->nb[1] >= ggml_row_size(t->type, t->ne[0])));
}

}  // namespace

bool f32_panels_wanted() {
    static const bool wanted = [] {
        const char* v = std::getenv("DYNGRAPH_F32_PANELS");
        if (v && std::strcmp(v, "0") == 0) return false;
        if (v && std::strcmp(v, "1") == 0) return true;
        return kernel_isa() >= Isa::avx2;
    }();
    return wanted;
}

bool quant_panels_wanted() {
    static const bool wanted = [] {
        const char* v = std::getenv("DYNGRAPH_QUANT_PANELS");
        if (v && std::strcmp(v, "0") == 0) return false;
        if (v && std::strcmp(v, "1") == 0) return true;
        return quant_panels_rule(kernel_isa(), amx_int8());
    }();
    return wanted;
}

bool quant_panels_rule(Isa isa, bool amx) { return isa >= Isa::avx2 && !amx; }

void mark_panels(ggml_tensor* x) { x->extra = const_cast<int*>(&kPanelsMark); }

bool in_panels(const ggml_tensor* x) { return x->extra == &kPanelsMark; }

bool f32_matmul_applies(const ggml_tensor* x, const ggml_tensor* y, int64_t min_rows) {
    // weights of another type: dequantized on the fly, unless ggml repacked them
    // for its own kernels (a layout only those read; marked by `extra`)
    // (weights in panels: one matrix, dense)
    const bool panels = in_panels(x) && x->ne[2] == 1 && x->ne[3] == 1 && ggml_is_contiguous(x);
    const bool weights = (x->type == GGML_TYPE_F32 && (x->extra == nullptr || panels)) || ((x->type == GGML_TYPE_F16 || x->type == GGML_TYPE_BF16) && panels) ||
                         (dequantizable(x->type) && (x->extra == nullptr || (quant_panels_take(x->type) && panels)));
    return weights && y->type == GGML_TYPE_F32 && x->ne[0] == y->ne[0] && y->ne[1] >= min_rows &&
           y->ne[2] % x->ne[2] == 0 && y->ne[3] % x->ne[3] == 0 && rows_contiguous(x) && rows_contiguous(y) &&
           x->ne[0] < (int64_t(1) << 31) && x->ne[1] < (int64_t(1) << 31) && y->ne[1] < (int64_t(1) << 31);
}

void sgemm_in_ggml_threads() {
    static std::once_flag once;
    std::call_once(once, [] { scipy_openblas_set_num_threads(1); });
}

ggml_tensor* f32_mul_mat(ggml_context* ctx, ggml_tensor* x, ggml_tensor* y, ggml_tensor* bias, Activation act) {
    sgemm_in_ggml_threads();
    ggml_tensor* args[3] = {x, y, bias};
    void* userdata = const_cast<Activation*>(&kActivations[int(act)]);
    return gg::custom_4d(ctx, GGML_TYPE_F32, x->ne[1], y->ne[1], y->ne[2], y->ne[3], args, bias ? 3 : 2,
                         f32_matmul_kernel, GGML_N_TASKS_MAX, userdata);
}

bool prefer_ggml_repack(ggml_type type) {
    const bool ours = type == GGML_TYPE_Q8_0 || type == GGML_TYPE_Q4_0 || type == GGML_TYPE_Q4_1 ||  // (rows' kernels too)
                      type == GGML_TYPE_Q5_0 || type == GGML_TYPE_Q5_1;  // (ggml repacks neither)
    return !(ours && kernel_isa() >= Isa::avx2);
}

bool half_weights_to_ggml(ggml_type type) {
    static const bool llamafile = ggml_cpu_has_llamafile() != 0;
    return llamafile && (type == GGML_TYPE_F16 || type == GGML_TYPE_BF16);
}

bool computes(const ggml_tensor* x, const ggml_tensor* y) {
    if (half_weights_to_ggml(x->type) && !in_panels(x)) return false;
    const int64_t min_rows = in_panels(x)                 ? 1
                             : x->type == GGML_TYPE_F32     ? (kernel_isa() >= Isa::avx2 ? 1 : kF32KernelMinRows)
                             : quant_rows_supports(x->type) ? 1
                                                            : dequant_min_rows(x->type);
    return f32_matmul_applies(x, y, min_rows);
}

int64_t dequant_min_rows(ggml_type type) {
    switch (type) {
        case GGML_TYPE_Q5_0: return 20;
        case GGML_TYPE_Q6_K: return 12;
        case GGML_TYPE_Q3_K: return 64;
        case GGML_TYPE_Q2_K: return 128;
        case GGML_TYPE_IQ2_XXS: case GGML_TYPE_IQ2_XS: case GGML_TYPE_IQ2_S: return dequantize_vectorized(type) ? 4 : 80;
        case GGML_TYPE_IQ3_XXS: case GGML_TYPE_IQ3_S: return dequantize_vectorized(type) ? 4 : 40;
        case GGML_TYPE_IQ1_S: return dequantize_vectorized(type) ? 4 : 12;
        case GGML_TYPE_IQ1_M: return dequantize_vectorized(type) ? 4 : 20;
        case GGML_TYPE_TQ1_0: return 16;
        case GGML_TYPE_TQ2_0: return std::numeric_limits<int64_t>::max();  // (ggml's product ahead at 512 rows)
        case GGML_TYPE_MXFP4: return 40;
        default: return kDequantMinRows;
    }
}

bool bias_fuses(const ggml_tensor* x, const ggml_tensor* y, const ggml_tensor* bias) {
    return bias != nullptr && bias->type == GGML_TYPE_F32 && ggml_is_contiguous(bias) && bias->ne[0] == x->ne[1] &&
           ggml_nelements(bias) == bias->ne[0] && computes(x, y);
}

ggml_tensor* mul_mat(ggml_context* ctx, ggml_tensor* x, ggml_tensor* y) {
    if (computes(x, y)) return f32_mul_mat(ctx, x, y);
    // (ggml's product would read the panels as rows; with no rows it reads nothing)
    if (in_panels(x) && y->ne[1] > 0)
        fail<gg::Violation>("mul_mat: weights ", gg::describe(x), " are in panels (f32_panels.h, quant_panels.h), which a product with ",
                            gg::describe(y), " does not read");
    return gg::mul_mat(ctx, x, y);
}

}  // namespace dg::kernels
