// What the convolution kernels (conv.cpp in f32, int8_conv.cpp in integers)
// share: which outputs of a row read inside the input, and the gathering of
// NXC columns (each output position's window as one row, in the weights'
// order). Their split into tasks is thread_share's, like every kernel's.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "conv.h"
#include "thread_share.h"

namespace dg::kernels::conv_gather {

// The outputs o in [lo, hi) (of n) whose input index i = o * stride + off lies in [0, size).
inline void inside(int64_t off, int64_t stride, int64_t size, int64_t n, int64_t& lo, int64_t& hi) {
    lo = off >= 0 ? 0 : (-off + stride - 1) / stride;
    hi = size - 1 - off < 0 ? 0 : (size - 1 - off) / stride + 1;
    lo = std::min(lo, n);
    hi = std::clamp(hi, lo, n);
}

// acc[o] += x[o * stride] * w for o in [lo, hi): a row of one channel plane (strides 1 and 2 as
// constants, which the compiler vectorizes)
inline void madd_row(float* __restrict acc, const float* __restrict x, float w, int64_t lo, int64_t hi,
                     int64_t stride) {
    if (stride == 1)
        for (int64_t o = lo; o < hi; ++o) acc[o] += x[o] * w;
    else if (stride == 2)
        for (int64_t o = lo; o < hi; ++o) acc[o] += x[2 * o] * w;
    else
        for (int64_t o = lo; o < hi; ++o) acc[o] += x[o * stride] * w;
}

// Output positions per task (of P): columns of about kColumnBytes (`bytes` per position; 0: all P), at
// least 16, and few enough that `images` (batch x groups) give every one of nth threads a task. The
// tasks are made a multiple of the threads where there are positions enough, and the tiles of an image
// equal but for the last's rounding: 784 positions in tiles of 227 (227, 227, 227, 103) gave one of two
// threads 454 positions and the other 330; four tiles of 196 give each 392.
inline int64_t tile_positions(int64_t P, int64_t bytes, int64_t images, int nth) {
    if (P <= 0 || images <= 0 || nth <= 0) return 1;
    const int64_t tile = bytes > 0 ? std::min(P, std::max<int64_t>(16, kColumnBytes / bytes)) : P;
    const int64_t per_thread = (images * ((P + tile - 1) / tile) + nth - 1) / nth;
    const int64_t tiles = std::clamp<int64_t>((per_thread * nth + images - 1) / images, 1, P);
    return std::max<int64_t>(1, (P + tiles - 1) / tiles);
}

// Copy n values, converted: a plain copy when the types and values are the same.
struct Same {
    template <class T>
    T operator()(T v) const { return v; }
};

template <class Out, class In, class Cvt>
inline void copy_run(Out* d, const In* s, int64_t n, Cvt cvt) {
    if constexpr (std::is_same_v<Out, In> && std::is_same_v<Cvt, Same>) std::memcpy(d, s, size_t(n) * sizeof(Out));
    else
        for (int64_t i = 0; i < n; ++i) d[i] = cvt(s[i]);
}

// Columns [p1 - p0][K] of channels [c0, c0 + Ig) of image xn (NXC), rows in the weights' order: OIX
// (c, kh, kw) when s.channels_first_weights, else (kh, kw, c) (XIO, OXI); cvt(v) of every value, `pad`
// in the padding.
template <class Out, class In, class Cvt = Same>
void gather_nxc(const In* xn, const ConvShape& s, int64_t c0, int64_t Ig, int64_t p0, int64_t p1, Out* col,
                Cvt cvt = {}, Out pad = Out(0)) {
    const int64_t K = Ig * s.KH * s.KW;
    for (int64_t p = p0; p < p1; ++p) {
        const int64_t oh = p / s.OW, ow = p - oh * s.OW;
        Out* row = col + (p - p0) * K;
        for (int64_t kh = 0; kh < s.KH; ++kh) {
            const int64_t ih = oh * s.sh + kh * s.dh - s.ph;
            for (int64_t kw = 0; kw < s.KW; ++kw) {
                const int64_t iw = ow * s.sw + kw * s.dw - s.pw;
                const bool in = ih >= 0 && ih < s.H && iw >= 0 && iw < s.W;
                const In* src = xn + (ih * s.W + iw) * s.C + c0;
                if (!s.channels_first_weights) {
                    Out* d = row + (kh * s.KW + kw) * Ig;
                    if (in) copy_run(d, src, Ig, cvt);
                    else std::fill(d, d + Ig, pad);
                } else {
                    for (int64_t c = 0; c < Ig; ++c) row[(c * s.KH + kh) * s.KW + kw] = in ? cvt(src[c]) : pad;
                }
            }
        }
    }
}

}  // namespace dg::kernels::conv_gather
