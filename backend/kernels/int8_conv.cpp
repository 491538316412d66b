#include "int8_conv.h"

#include <algorithm>
#include <vector>

#include "../gg.h"
#include "conv_gather.h"
#include "vector_clones.h"

namespace dg::kernels {

namespace {

using conv_gather::madd_row;

constexpr int64_t kRowBlock = 64;  // output positions per int8_dot call
constexpr int64_t kColBlock = 32;  // output channels per int8_dot call

// a byte with its sign bit flipped (v + 128 or v - 128 in the other signedness)
struct Flip {
    char operator()(char v) const { return char(v ^ 0x80); }
};

inline int64_t dst_index(const ConvShape& s, int64_t n, int64_t o, int64_t p) {
    const int64_t P = s.OH * s.OW;
    return s.nxc ? (n * P + p) * s.O + o : (n * s.O + o) * P + p;
}

// -- depthwise: one input and one output channel per group, a direct loop over the taps ------------
//
// Computed in f32, exactly: every product (x - zp) (w - zw) is an integer of magnitude at most 255 * 255,
// so every partial sum of up to kExactTaps of them is an integer below 2^24, which f32 holds exactly (each
// product and each addition is exact, in any order, fused or not). Larger kernels: depthwise_wide.
constexpr int64_t kExactTaps = (int64_t(1) << 24) / (255 * 255);  // 258

// The weights as f32 [tap][C] with their zero points taken out.
void depthwise_weights(const Int8ConvParams& cp, const char* w, std::vector<float>& wt) {
    const int64_t C = cp.shape.C, taps = cp.shape.KH * cp.shape.KW;
    const Int8Params& p = cp.q;
    wt.resize(size_t(taps * C));
    for (int64_t c = 0; c < C; ++c) {
        const int32_t zw = p.w_zp.empty() ? 0 : p.w_zp[p.w_zp.size() > 1 ? size_t(c) : 0];
        for (int64_t k = 0; k < taps; ++k) {
            const char b = w[c * taps + k];
            wt[size_t(k * C + c)] = float((p.w_unsigned ? int32_t(uint8_t(b)) : int32_t(int8_t(b))) - zw);
        }
    }
}

// x - zp for n bytes, as f32
inline void centered(const char* x, bool x_unsigned, int32_t zp, int64_t n, float* out) {
    if (x_unsigned)
        for (int64_t i = 0; i < n; ++i) out[i] = float(int32_t(uint8_t(x[i])) - zp);
    else
        for (int64_t i = 0; i < n; ++i) out[i] = float(int32_t(int8_t(x[i])) - zp);
}

// One output row of NXC positions (all channels at once), finished into y at i0.
DG_VECTOR_BODY void depthwise_nxc_row_body(const Int8ConvParams& cp, const char* xn, int64_t oh, const float* wt,
                                           const float* bias, void* y, int64_t i0, float* xc, float* acc,
                                           int64_t* exact) {
    const ConvShape& s = cp.shape;
    const Int8Params& p = cp.q;
    const int64_t C = s.C;
    for (int64_t ow = 0; ow < s.OW; ++ow) {
        std::fill(acc, acc + C, 0.0f);
        for (int64_t kh = 0; kh < s.KH; ++kh) {
            const int64_t ih = oh * s.sh + kh * s.dh - s.ph;
            if (ih < 0 || ih >= s.H) continue;
            for (int64_t kw = 0; kw < s.KW; ++kw) {
                const int64_t iw = ow * s.sw + kw * s.dw - s.pw;
                if (iw < 0 || iw >= s.W) continue;
                centered(xn + (ih * s.W + iw) * C, p.a_unsigned, p.a_zp, C, xc);
                const float* wr = wt + (kh * s.KW + kw) * C;
                for (int64_t c = 0; c < C; ++c) acc[c] += xc[c] * wr[c];
            }
        }
        for (int64_t c = 0; c < C; ++c) exact[c] = int64_t(acc[c]);
        int8_finish_row(p, bias, 0, C, exact, y, i0 + ow * C, 1);
    }
}
DG_VECTORIZED(void, depthwise_nxc_row, (const Int8ConvParams& cp, const char* xn, int64_t oh, const float* wt,
                                        const float* bias, void* y, int64_t i0, float* xc, float* acc, int64_t* exact),
              (cp, xn, oh, wt, bias, y, i0, xc, acc, exact))

// NXC: tasks are output rows.
void depthwise_nxc(const Int8ConvParams& cp, const char* x, const char* w, const float* bias, void* y, int ith, int nth) {
    const ConvShape& s = cp.shape;
    thread_local std::vector<float> wt, xc, acc;
    thread_local std::vector<int64_t> exact;
    depthwise_weights(cp, w, wt);
    xc.resize(size_t(s.C));
    acc.resize(size_t(s.C));
    exact.resize(size_t(s.C));
    int64_t t0, t1;
    std::tie(t0, t1) = thread_share(s.N * s.OH, ith, nth);
    for (int64_t t = t0; t < t1; ++t) {
        const int64_t n = t / s.OH, oh = t % s.OH;
        depthwise_nxc_row(cp, x + n * s.H * s.W * s.C, oh, wt.data(), bias, y, dst_index(s, n, 0, oh * s.OW),
                          xc.data(), acc.data(), exact.data());
    }
}

// One NCX plane xp of channel c (wt: its weights, one per tap): each output row accumulates its taps while
// it is in L1; the plane is finished into y at i0.
DG_VECTOR_BODY void depthwise_plane_body(const Int8ConvParams& cp, const char* xp, const float* wt, int64_t c,
                                         const float* bias, void* y, int64_t i0, float* plane, float* acc,
                                         int64_t* exact) {
    const ConvShape& s = cp.shape;
    const Int8Params& p = cp.q;
    const int64_t P = s.OH * s.OW;
    centered(xp, p.a_unsigned, p.a_zp, s.H * s.W, plane);
    std::fill(acc, acc + P, 0.0f);
    for (int64_t oh = 0; oh < s.OH; ++oh) {
        float* row = acc + oh * s.OW;
        for (int64_t kh = 0; kh < s.KH; ++kh) {
            const int64_t ih = oh * s.sh + kh * s.dh - s.ph;
            if (ih < 0 || ih >= s.H) continue;
            for (int64_t kw = 0; kw < s.KW; ++kw) {
                const int64_t offw = kw * s.dw - s.pw;
                int64_t lo, hi;
                conv_gather::inside(offw, s.sw, s.W, s.OW, lo, hi);
                madd_row(row, plane + ih * s.W + offw, wt[kh * s.KW + kw], lo, hi, s.sw);
            }
        }
    }
    for (int64_t i = 0; i < P; ++i) exact[i] = int64_t(acc[i]);
    int8_finish_column(p, bias, c, P, exact, y, i0);
}
DG_VECTORIZED(void, depthwise_plane, (const Int8ConvParams& cp, const char* xp, const float* wt, int64_t c,
                                      const float* bias, void* y, int64_t i0, float* plane, float* acc, int64_t* exact),
              (cp, xp, wt, c, bias, y, i0, plane, acc, exact))

// NCX: tasks are channel planes.
void depthwise_ncx(const Int8ConvParams& cp, const char* x, const char* w, const float* bias, void* y, int ith, int nth) {
    const ConvShape& s = cp.shape;
    const int64_t C = s.C, taps = s.KH * s.KW;
    thread_local std::vector<float> wt, wc, plane, acc;
    thread_local std::vector<int64_t> exact;
    depthwise_weights(cp, w, wt);
    wc.resize(size_t(taps));
    plane.resize(size_t(s.H * s.W));
    acc.resize(size_t(s.OH * s.OW));
    exact.resize(size_t(s.OH * s.OW));
    int64_t t0, t1;
    std::tie(t0, t1) = thread_share(s.N * C, ith, nth);
    for (int64_t t = t0; t < t1; ++t) {
        const int64_t c = t % C;
        for (int64_t k = 0; k < taps; ++k) wc[size_t(k)] = wt[size_t(k * C + c)];
        depthwise_plane(cp, x + t * s.H * s.W, wc.data(), c, bias, y, t * s.OH * s.OW, plane.data(), acc.data(),
                        exact.data());
    }
}

// Kernels of more than kExactTaps taps: 64-bit integer sums, one output at a time.
void depthwise_wide(const Int8ConvParams& cp, const char* x, const char* w, const float* bias, void* y, int ith, int nth) {
    const ConvShape& s = cp.shape;
    const Int8Params& p = cp.q;
    const int64_t C = s.C, taps = s.KH * s.KW;
    thread_local std::vector<float> wt;
    depthwise_weights(cp, w, wt);
    auto at = [&](int64_t n, int64_t c, int64_t ih, int64_t iw) {
        const char b = cp.src_nxc ? x[((n * s.H + ih) * s.W + iw) * C + c] : x[((n * C + c) * s.H + ih) * s.W + iw];
        return (p.a_unsigned ? int64_t(uint8_t(b)) : int64_t(int8_t(b))) - p.a_zp;
    };
    int64_t t0, t1;
    std::tie(t0, t1) = thread_share(s.N * C, ith, nth);
    for (int64_t t = t0; t < t1; ++t) {
        const int64_t n = t / C, c = t % C;
        for (int64_t oh = 0; oh < s.OH; ++oh)
            for (int64_t ow = 0; ow < s.OW; ++ow) {
                int64_t sum = 0;
                for (int64_t k = 0; k < taps; ++k) {
                    const int64_t ih = oh * s.sh + (k / s.KW) * s.dh - s.ph, iw = ow * s.sw + (k % s.KW) * s.dw - s.pw;
                    if (ih >= 0 && ih < s.H && iw >= 0 && iw < s.W) sum += at(n, c, ih, iw) * int64_t(wt[size_t(k * C + c)]);
                }
                int8_finish_column(p, bias, c, 1, &sum, y, dst_index(s, n, c, oh * s.OW + ow));
            }
    }
}

// -- everything else: gathered windows through int8_dot ------------------------------------------------

// Tasks (batch element, group, tile of output positions): the tile's windows gathered as rows of K bytes
// (flipped as int8_dot takes them, the padding the zero point), then blocks of kRowBlock positions x
// kColBlock output channels through int8_dot, the zero points taken out with the sums. NXC dst: rows of
// positions times weight rows, stored by position; NCX dst: weight rows times rows of positions, stored
// by channel (each a run of positions).
void general(const Int8ConvParams& cp, const char* x, const char* w, const float* bias, void* y, int ith, int nth) {
    const ConvShape& s = cp.shape;
    const Int8Params& p = cp.q;
    const int64_t G = s.groups, Ig = s.C / G, Og = s.O / G, P = s.OH * s.OW, K = Ig * s.KH * s.KW;
    const int64_t images = s.N * G;
    const int64_t tile = conv_gather::tile_positions(P, K, images, nth);
    const int64_t tiles = (P + tile - 1) / tile;
    const Int8Act act = int8_act(p);
    const bool a_unsigned = !p.w_unsigned;  // the signedness int8_dot reads
    const char pad = char(act.zp);
    thread_local std::vector<char> cols;
    thread_local std::vector<int64_t> row_sums, col_sums;
    cols.resize(size_t(K * tile));
    row_sums.assign(size_t(tile), 0);
    col_sums.assign(size_t(s.O), 0);
    if (act.zp != 0)
        for (int64_t o = 0; o < s.O; ++o) col_sums[size_t(o)] = int8_sum(w + o * K, K, p.w_unsigned);
    int64_t tot[kRowBlock * kColBlock];
    int64_t t0, t1;
    std::tie(t0, t1) = thread_share(images * tiles, ith, nth);
    for (int64_t t = t0; t < t1; ++t) {
        const int64_t n = t / (G * tiles), g = (t / tiles) % G, p0 = (t % tiles) * tile, p1 = std::min(P, p0 + tile);
        const int64_t pt = p1 - p0;
        const char* xn = x + n * s.H * s.W * s.C;
        if (act.flip) conv_gather::gather_nxc(xn, s, g * Ig, Ig, p0, p1, cols.data(), Flip{}, pad);
        else conv_gather::gather_nxc(xn, s, g * Ig, Ig, p0, p1, cols.data(), conv_gather::Same{}, pad);
        if (!p.w_zp.empty())
            for (int64_t r = 0; r < pt; ++r) row_sums[size_t(r)] = int8_sum(cols.data() + r * K, K, a_unsigned);
        for (int64_t j0 = 0; j0 < Og; j0 += kColBlock) {
            const int64_t nb = std::min(kColBlock, Og - j0), o0 = g * Og + j0;
            for (int64_t m0 = 0; m0 < pt; m0 += kRowBlock) {
                const int64_t mb = std::min(kRowBlock, pt - m0);
                const char* rows = cols.data() + m0 * K;
                if (s.nxc) {
                    int8_dot(rows, K, mb, K, w + o0 * K, K, nb, p.w_unsigned, tot, kColBlock);
                    for (int64_t m = 0; m < mb; ++m) {
                        int64_t* acc = tot + m * kColBlock;
                        int8_correct_row(p, act, K, row_sums[size_t(m0 + m)], col_sums.data() + o0, o0, nb, acc);
                        int8_finish_row(p, bias, o0, nb, acc, y, dst_index(s, n, o0, p0 + m0 + m), 1);
                    }
                } else {  // (int8_dot's operands swapped: the weights are its rows, of the other signedness)
                    int8_dot(w + o0 * K, K, nb, K, rows, K, mb, a_unsigned, tot, kRowBlock);
                    for (int64_t j = 0; j < nb; ++j) {
                        int64_t* acc = tot + j * kRowBlock;
                        int8_correct_column(p, act, K, row_sums.data() + m0, col_sums[size_t(o0 + j)], o0 + j, mb, acc);
                        int8_finish_column(p, bias, o0 + j, mb, acc, y, dst_index(s, n, o0 + j, p0 + m0));
                    }
                }
            }
        }
    }
}

void int8_conv_kernel(ggml_tensor* dst, int ith, int nth, void* ud) {
    const auto& cp = *static_cast<const Int8ConvParams*>(ud);
    const ConvShape& s = cp.shape;
    const char* x = static_cast<const char*>(dst->src[0]->data);
    const char* w = static_cast<const char*>(dst->src[1]->data);
    const float* bias = dst->src[2] ? static_cast<const float*>(dst->src[2]->data) : nullptr;
    if (s.C == s.groups && s.O == s.groups) {
        if (s.KH * s.KW > kExactTaps) return depthwise_wide(cp, x, w, bias, dst->data, ith, nth);
        if (cp.src_nxc) return depthwise_nxc(cp, x, w, bias, dst->data, ith, nth);
        return depthwise_ncx(cp, x, w, bias, dst->data, ith, nth);
    }
    general(cp, x, w, bias, dst->data, ith, nth);
}

// -- NCX -> NXC, bytes ----------------------------------------------------------------------------------

constexpr int64_t kPosBlock = 64, kChanBlock = 16;

// Tasks: (image, block of kPosBlock positions); each block of kChanBlock channel rows is read once.
void to_nxc_kernel(ggml_tensor* dst, int ith, int nth, void* ud) {
    const ggml_tensor* src = dst->src[0];
    const int64_t C = dst->ne[0], P = dst->ne[1] * dst->ne[2], N = dst->ne[3];
    const int64_t blocks = (P + kPosBlock - 1) / kPosBlock;
    const char* x = static_cast<const char*>(src->data);
    char* y = static_cast<char*>(dst->data);
    int64_t t0, t1;
    std::tie(t0, t1) = thread_share(N * blocks, ith, nth);
    for (int64_t t = t0; t < t1; ++t) {
        const int64_t n = t / blocks, q0 = (t % blocks) * kPosBlock, q1 = std::min(P, q0 + kPosBlock);
        const char* xn = x + n * C * P;
        char* yn = y + n * P * C;
        for (int64_t c0 = 0; c0 < C; c0 += kChanBlock) {
            const int64_t c1 = std::min(C, c0 + kChanBlock);
            for (int64_t q = q0; q < q1; ++q)
                for (int64_t c = c0; c < c1; ++c) yn[q * C + c] = xn[c * P + q];
        }
    }
}

}  // namespace

ggml_tensor* int8_ncx_to_nxc(ggml_context* ctx, ggml_tensor* src, int64_t N, int64_t C, int64_t H, int64_t W) {
    if (src->type != GGML_TYPE_I8 || !ggml_is_contiguous(src) || ggml_nelements(src) != N * C * H * W)
        fail<gg::Violation>("int8_ncx_to_nxc: src ", gg::describe(src), " must be a dense I8 tensor of ", N, "x", C,
                            "x", H, "x", W);
    ggml_tensor* args[1] = {src};
    return gg::custom_4d(ctx, GGML_TYPE_I8, C, W, H, N, args, 1, to_nxc_kernel, GGML_N_TASKS_MAX, nullptr);
}

ggml_tensor* int8_conv2d(ggml_context* ctx, ggml_tensor* src, ggml_tensor* weights, ggml_tensor* bias,
                         const Int8ConvParams* p, const int64_t dst_ne[4]) {
    const ConvShape& s = p->shape;
    const bool dense = src->type == GGML_TYPE_I8 && weights->type == GGML_TYPE_I8 && ggml_is_contiguous(src) &&
                       ggml_is_contiguous(weights);
    const bool depthwise = s.C == s.groups && s.O == s.groups;
    if (!dense || s.channels_first_weights || s.groups < 1 || s.C % s.groups || s.O % s.groups ||
        (!p->src_nxc && !depthwise) || (depthwise && p->src_nxc != s.nxc) || ggml_nelements(src) != s.N * s.H * s.W * s.C ||
        ggml_nelements(weights) != s.O * s.KH * s.KW * (s.C / s.groups) ||
        dst_ne[0] * dst_ne[1] * dst_ne[2] * dst_ne[3] != s.N * s.O * s.OH * s.OW)
        fail<gg::Violation>("int8_conv2d: src ", gg::describe(src), " and weights ", gg::describe(weights),
                            " must be dense I8 tensors of the convolution's sizes and layouts");
    if (bias && (bias->type != GGML_TYPE_F32 || ggml_nelements(bias) != s.O || !ggml_is_contiguous(bias)))
        fail<gg::Violation>("int8_conv2d: bias ", gg::describe(bias), " must be F32 [", s.O, "]");
    if (!p->q.fits(size_t(s.O)))
        fail<gg::Violation>("int8_conv2d: ", p->q.scale.size(), " scales and ", p->q.w_zp.size(),
                            " zero points for ", s.O, " output channels");
    ggml_tensor* args[3] = {src, weights, bias};
    return gg::custom_4d(ctx, p->q.quantize_out ? GGML_TYPE_I8 : GGML_TYPE_F32, dst_ne[0], dst_ne[1], dst_ne[2],
                         dst_ne[3], args, bias ? 3 : 2, int8_conv_kernel, GGML_N_TASKS_MAX,
                         const_cast<Int8ConvParams*>(p));
}

}  // namespace dg::kernels
