#include "conv.h"
#include "../gg.h"
#include "conv_gather.h"
#include "winograd.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

namespace dg::kernels {

namespace {

using conv_gather::gather_nxc;
using conv_gather::inside;
using conv_gather::madd_row;

void one_blas_thread() {
    // every call runs in one of ggml's threads: OpenBLAS must not start its own
    static std::once_flag once;
    std::call_once(once, [] { scipy_openblas_set_num_threads(1); });
}

inline void fill(float* p, int64_t n, float v) { std::fill(p, p + n, v); }

// -- Convolution -------------------------------------------------------------------------------

// The output rows a tile of positions [p0, p1) covers: row oh, its outputs [ow0, ow1), at column
// `at` of the tile. Computed once per tile; every row of the columns walks them.
struct Segment {
    int64_t oh, ow0, ow1, at;
};

void tile_segments(const ConvShape& s, int64_t p0, int64_t p1, std::vector<Segment>& segs) {
    segs.clear();
    for (int64_t p = p0; p < p1;) {
        const int64_t oh = p / s.OW, ow0 = p - oh * s.OW, ow1 = std::min(s.OW, ow0 + (p1 - p));
        segs.push_back({oh, ow0, ow1, p - p0});
        p += ow1 - ow0;
    }
}

// o[ow] = xr[ow * stride] for ow in [lo, hi); strides 1 and 2 as constants, which the compiler
// vectorizes (a copy; pairs of loads and a permute)
inline void take_every(float* __restrict o, const float* __restrict xr, int64_t lo, int64_t hi, int64_t stride) {
    if (stride == 1) std::memcpy(o + lo, xr + lo, size_t(hi - lo) * sizeof(float));
    else if (stride == 2)
        for (int64_t ow = lo; ow < hi; ++ow) o[ow] = xr[2 * ow];
    else
        for (int64_t ow = lo; ow < hi; ++ow) o[ow] = xr[ow * stride];
}

// Row (kh, kw) of the columns of one NCX channel plane `x` (H x W) over a tile's segments.
void gather_row_ncx(const float* x, const ConvShape& s, int64_t kh, int64_t kw, const std::vector<Segment>& segs,
                    float* out) {
    const int64_t offw = kw * s.dw - s.pw;
    int64_t lo_all, hi_all;
    inside(offw, s.sw, s.W, s.OW, lo_all, hi_all);
    for (const Segment& g : segs) {
        float* o = out + g.at - g.ow0;  // o[ow]
        const int64_t ih = g.oh * s.sh + kh * s.dh - s.ph;
        if (ih < 0 || ih >= s.H) {
            fill(o + g.ow0, g.ow1 - g.ow0, 0.0f);
        } else {
            const int64_t lo = std::clamp(lo_all, g.ow0, g.ow1), hi = std::clamp(hi_all, lo, g.ow1);
            fill(o + g.ow0, lo - g.ow0, 0.0f);
            take_every(o, x + ih * s.W + offw, lo, hi, s.sw);  // the input row from ow = 0 on
            fill(o + hi, g.ow1 - hi, 0.0f);
        }
    }
}

// Columns [K][p1 - p0] of the Ig channels from xg (NCX), rows in the weights' order:
// OIX (c, kh, kw), XIO (kh, kw, c).
void gather_ncx(const float* xg, const ConvShape& s, int64_t Ig, int64_t p0, int64_t p1, float* col) {
    const int64_t pt = p1 - p0, hw = s.H * s.W;
    thread_local std::vector<Segment> segs;
    tile_segments(s, p0, p1, segs);
    for (int64_t c = 0; c < Ig; ++c)
        for (int64_t kh = 0; kh < s.KH; ++kh)
            for (int64_t kw = 0; kw < s.KW; ++kw) {
                const int64_t r = s.channels_first_weights ? (c * s.KH + kh) * s.KW + kw : (kh * s.KW + kw) * Ig + c;
                gather_row_ncx(xg + c * hw, s, kh, kw, segs, col + r * pt);
            }
}

// One input and one output channel per group: a direct loop over the kernel taps.
void depthwise(const ConvShape& s, const float* x, const float* w, const ConvExtras& e, float* y, int ith, int nth) {
    const float* bias = e.bias;
    auto finish = [&](int64_t n, float* at) {  // the epilogue of n outputs from `at`
        epilogue(s.act, e.residual ? e.residual + (at - y) : nullptr, 1, n, at, n);
    };
    const int64_t C = s.C, P = s.OH * s.OW, taps = s.KH * s.KW;
    auto tap = [&](int64_t c, int64_t kh, int64_t kw) {
        return s.channels_first_weights ? w[c * taps + kh * s.KW + kw] : w[(kh * s.KW + kw) * C + c];
    };
    int64_t t0, t1;
    if (!s.nxc) {  // tasks: channel planes; each output row accumulates its taps while it is in L1
        std::tie(t0, t1) = thread_share(s.N * C, ith, nth);
        for (int64_t t = t0; t < t1; ++t) {
            const int64_t c = t % C;
            const float* xp = x + t * s.H * s.W;
            float* yp = y + t * P;
            fill(yp, P, bias ? bias[c] : 0.0f);
            for (int64_t oh = 0; oh < s.OH; ++oh) {
                float* yr = yp + oh * s.OW;
                for (int64_t kh = 0; kh < s.KH; ++kh) {
                    const int64_t ih = oh * s.sh + kh * s.dh - s.ph;
                    if (ih < 0 || ih >= s.H) continue;
                    for (int64_t kw = 0; kw < s.KW; ++kw) {
                        const int64_t offw = kw * s.dw - s.pw;
                        int64_t lo, hi;
                        inside(offw, s.sw, s.W, s.OW, lo, hi);
                        madd_row(yr, xp + ih * s.W + offw, tap(c, kh, kw), lo, hi, s.sw);
                    }
                }
                finish(s.OW, yr);
            }
        }
        return;
    }
    // NXC: tasks are output rows; the taps' weights as contiguous channel vectors
    thread_local std::vector<float> wt;
    if (wt.size() < size_t(taps * C)) wt.resize(size_t(taps * C));
    for (int64_t k = 0; k < taps; ++k)
        for (int64_t c = 0; c < C; ++c) wt[size_t(k * C + c)] = tap(c, k / s.KW, k % s.KW);
    std::tie(t0, t1) = thread_share(s.N * s.OH, ith, nth);
    for (int64_t t = t0; t < t1; ++t) {
        const int64_t n = t / s.OH, oh = t % s.OH;
        for (int64_t ow = 0; ow < s.OW; ++ow) {
            float* yr = y + ((n * s.OH + oh) * s.OW + ow) * C;
            if (bias) std::memcpy(yr, bias, size_t(C) * sizeof(float));
            else fill(yr, C, 0.0f);
            for (int64_t kh = 0; kh < s.KH; ++kh) {
                const int64_t ih = oh * s.sh + kh * s.dh - s.ph;
                if (ih < 0 || ih >= s.H) continue;
                for (int64_t kw = 0; kw < s.KW; ++kw) {
                    const int64_t iw = ow * s.sw + kw * s.dw - s.pw;
                    if (iw < 0 || iw >= s.W) continue;
                    const float* xr = x + ((n * s.H + ih) * s.W + iw) * C;
                    const float* wr = wt.data() + (kh * s.KW + kw) * C;
                    for (int64_t c = 0; c < C; ++c) yr[c] += wr[c] * xr[c];
                }
            }
        }
        finish(s.OW * C, y + (n * s.OH + oh) * s.OW * C);
    }
}

void conv_kernel(ggml_tensor* dst, int ith, int nth, void* ud) {
    const ConvShape& s = *static_cast<const ConvShape*>(ud);
    const auto* x = static_cast<const float*>(dst->src[0]->data);
    const auto* w = static_cast<const float*>(dst->src[1]->data);
    const ConvExtras e = conv_extras(dst, s);
    const float* bias = e.bias;
    auto* y = static_cast<float*>(dst->data);
    const int64_t G = s.groups, Ig = s.C / G, Og = s.O / G, P = s.OH * s.OW, hw = s.H * s.W;
    const int64_t K = Ig * s.KH * s.KW;
    if (Ig == 1 && Og == 1) return depthwise(s, x, w, e, y, ith, nth);
    auto residual = [&](const float* out) { return e.residual ? e.residual + (out - y) : nullptr; };

    // 1x1, stride 1, no padding: the input is its own column matrix
    const bool direct = s.KH == 1 && s.KW == 1 && s.sh == 1 && s.sw == 1 && s.ph == 0 && s.pw == 0 && s.OH == s.H &&
                        s.OW == s.W;
    const int64_t images = s.N * G;
    const int64_t tile = conv_gather::tile_positions(P, direct ? 0 : int64_t(sizeof(float)) * K, images, nth);
    const int64_t tiles = (P + tile - 1) / tile;
    thread_local std::vector<float> cols;
    if (!direct && cols.size() < size_t(K * tile)) cols.resize(size_t(K * tile));
    one_blas_thread();

    int64_t t0, t1;
    std::tie(t0, t1) = thread_share(images * tiles, ith, nth);
    for (int64_t t = t0; t < t1; ++t) {
        const int64_t n = t / (G * tiles), g = (t / tiles) % G, p0 = (t % tiles) * tile, p1 = std::min(P, p0 + tile);
        const int pt = int(p1 - p0);
        const float beta = bias ? 1.0f : 0.0f;
        if (!s.nxc) {
            const float* xg = x + (n * s.C + g * Ig) * hw;
            float* out = y + (n * s.O + g * Og) * P + p0;
            if (bias)
                for (int64_t o = 0; o < Og; ++o) fill(out + o * P, pt, bias[g * Og + o]);
            const float* B = xg + p0;
            int ldb = int(hw);
            if (!direct) {
                gather_ncx(xg, s, Ig, p0, p1, cols.data());
                B = cols.data();
                ldb = pt;
            }
            if (s.channels_first_weights)  // out[Og, pt] = W_g[Og, K] . cols[K, pt]
                scipy_cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(Og), pt, int(K), 1.0f, w + g * Og * K,
                                  int(K), B, ldb, beta, out, int(P));
            else  // W [K, O]: its group's columns, transposed
                scipy_cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(Og), pt, int(K), 1.0f, w + g * Og,
                                  int(s.O), B, ldb, beta, out, int(P));
            epilogue(s.act, residual(out), Og, pt, out, P);
        } else {
            const float* xn = x + n * hw * s.C;
            float* out = y + (n * P + p0) * s.O + g * Og;
            if (bias)
                for (int64_t p = 0; p < pt; ++p) std::memcpy(out + p * s.O, bias + g * Og, size_t(Og) * sizeof(float));
            const float* A = xn + p0 * s.C + g * Ig;
            int lda = int(s.C);
            if (!direct) {
                gather_nxc(xn, s, g * Ig, Ig, p0, p1, cols.data());
                A = cols.data();
                lda = int(K);
            }
            if (s.channels_first_weights)  // out[pt, Og] = cols[pt, K] . W_g[Og, K]^T
                scipy_cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, pt, int(Og), int(K), 1.0f, A, lda,
                                  w + g * Og * K, int(K), beta, out, int(s.O));
            else
                scipy_cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, pt, int(Og), int(K), 1.0f, A, lda,
                                  w + g * Og, int(s.O), beta, out, int(s.O));
            epilogue(s.act, residual(out), pt, Og, out, s.O);
        }
    }
}

// -- ConvTranspose -----------------------------------------------------------------------------

void conv_transpose_kernel(ggml_tensor* dst, int ith, int nth, void* ud) {
    const ConvShape& s = *static_cast<const ConvShape*>(ud);
    const auto* x = static_cast<const float*>(dst->src[0]->data);
    const auto* w = static_cast<const float*>(dst->src[1]->data);
    const float* bias = dst->src[2] ? static_cast<const float*>(dst->src[2]->data) : nullptr;
    auto* y = static_cast<float*>(dst->data);
    const int64_t G = s.groups, Ig = s.C / G, Og = s.O / G, KK = s.KH * s.KW, R = Og * KK;
    const int64_t Pin = s.H * s.W, Pout = s.OH * s.OW;
    // row of the columns for (o, kh, kw): IOX (o, kh, kw), XOI (kh, kw, o)
    auto row = [&](int64_t o, int64_t kh, int64_t kw) {
        return s.channels_first_weights ? (o * s.KH + kh) * s.KW + kw : (kh * s.KW + kw) * Og + o;
    };
    // the columns of a tile of input positions: about kColumnBytes (one position at least)
    const int64_t tile = std::clamp<int64_t>(kColumnBytes / (int64_t(sizeof(float)) * R), 1, Pin);
    thread_local std::vector<float> cols;
    if (cols.size() < size_t(R * tile)) cols.resize(size_t(R * tile));
    float* col = cols.data();
    one_blas_thread();
    int64_t t0, t1;
    std::tie(t0, t1) = thread_share(s.N * G, ith, nth);
    for (int64_t t = t0; t < t1; ++t) {
        const int64_t n = t / G, g = t % G;
        // the columns: every input position times every (output channel, tap) of the group
        const float* Wg = s.channels_first_weights ? w + g * Ig * R : w + g * Ig;
        const int ldw = int(s.channels_first_weights ? R : s.C);
        if (!s.nxc) {  // col[R, pt]
            const float* xg = x + (n * s.C + g * Ig) * Pin;
            float* yg = y + (n * s.O + g * Og) * Pout;
            for (int64_t o = 0; o < Og; ++o) fill(yg + o * Pout, Pout, bias ? bias[g * Og + o] : 0.0f);
            for (int64_t p0 = 0; p0 < Pin; p0 += tile) {
                const int64_t pt = std::min(tile, Pin - p0);
                scipy_cblas_sgemm(CblasRowMajor, s.channels_first_weights ? CblasTrans : CblasNoTrans, CblasNoTrans,
                                  int(R), int(pt), int(Ig), 1.0f, Wg, ldw, xg + p0, int(Pin), 0.0f, col, int(pt));
                for (int64_t o = 0; o < Og; ++o)
                    for (int64_t kh = 0; kh < s.KH; ++kh)
                        for (int64_t kw = 0; kw < s.KW; ++kw) {
                            const float* cr = col + row(o, kh, kw) * pt;  // cr[p - p0]
                            for (int64_t p = p0; p < p0 + pt;) {  // the tile's part of each input row
                                const int64_t ih = p / s.W, iw0 = p - ih * s.W, iw1 = std::min(s.W, iw0 + p0 + pt - p);
                                const int64_t oh = ih * s.sh + kh * s.dh - s.ph;
                                if (oh >= 0 && oh < s.OH) {
                                    float* yr = yg + o * Pout + oh * s.OW;
                                    const float* c = cr + (p - p0);  // c[iw - iw0]
                                    for (int64_t iw = iw0; iw < iw1; ++iw) {
                                        const int64_t ow = iw * s.sw + kw * s.dw - s.pw;
                                        if (ow >= 0 && ow < s.OW) yr[ow] += c[iw - iw0];
                                    }
                                }
                                p += iw1 - iw0;
                            }
                        }
            }
        } else {  // col[pt, R]
            const float* xg = x + n * Pin * s.C + g * Ig;
            float* yn = y + n * Pout * s.O + g * Og;
            for (int64_t p = 0; p < Pout; ++p) {
                if (bias) std::memcpy(yn + p * s.O, bias + g * Og, size_t(Og) * sizeof(float));
                else fill(yn + p * s.O, Og, 0.0f);
            }
            for (int64_t p0 = 0; p0 < Pin; p0 += tile) {
                const int64_t pt = std::min(tile, Pin - p0);
                scipy_cblas_sgemm(CblasRowMajor, CblasNoTrans, s.channels_first_weights ? CblasNoTrans : CblasTrans,
                                  int(pt), int(R), int(Ig), 1.0f, xg + p0 * s.C, int(s.C), Wg, ldw, 0.0f, col, int(R));
                for (int64_t p = p0; p < p0 + pt; ++p) {
                    const int64_t ih = p / s.W, iw = p - ih * s.W;
                    const float* cr = col + (p - p0) * R;
                    for (int64_t kh = 0; kh < s.KH; ++kh) {
                        const int64_t oh = ih * s.sh + kh * s.dh - s.ph;
                        if (oh < 0 || oh >= s.OH) continue;
                        for (int64_t kw = 0; kw < s.KW; ++kw) {
                            const int64_t ow = iw * s.sw + kw * s.dw - s.pw;
                            if (ow < 0 || ow >= s.OW) continue;
                            float* yr = yn + (oh * s.OW + ow) * s.O;
                            for (int64_t o = 0; o < Og; ++o) yr[o] += cr[row(o, kh, kw)];
                        }
                    }
                }
            }
        }
    }
}

ggml_tensor* custom(ggml_context* ctx, ggml_custom_op_t fn, ggml_tensor* src, ggml_tensor* weights, ggml_tensor* bias,
                    const ConvShape* shape, const int64_t ne[4], ggml_tensor* residual = nullptr) {
    ggml_tensor* args[4] = {src, weights};
    int n = 2;
    if (bias) args[n++] = bias;
    if (residual) args[n++] = residual;  // the last (conv_extras)
    return gg::custom_4d(ctx, GGML_TYPE_F32, ne[0], ne[1], ne[2], ne[3], args, n, fn, GGML_N_TASKS_MAX,
                         const_cast<ConvShape*>(shape));
}

}  // namespace

ggml_tensor* conv2d(ggml_context* ctx, ggml_tensor* src, ggml_tensor* weights, ggml_tensor* bias, const ConvShape* shape,
                    const int64_t dst_ne[4], ggml_tensor* winograd_weights, ggml_tensor* residual) {
    if (winograd_weights || winograd_fits(*shape))
        return winograd_conv3x3(ctx, src, weights, bias, shape, dst_ne, winograd_weights, residual);
    return custom(ctx, conv_kernel, src, weights, bias, shape, dst_ne, residual);
}

ggml_tensor* conv_transpose2d(ggml_context* ctx, ggml_tensor* src, ggml_tensor* weights, ggml_tensor* bias,
                              const ConvShape* shape, const int64_t dst_ne[4]) {
    return custom(ctx, conv_transpose_kernel, src, weights, bias, shape, dst_ne);
}

}  // namespace dg::kernels
