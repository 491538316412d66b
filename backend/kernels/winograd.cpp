#include "winograd.h"
#include "../gg.h"
#include "f32_matmul.h"
#include "thread_share.h"
#include "vector_clones.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace dg::kernels {

namespace {

constexpr int kXi = 16;  // transformed positions of a 4x4 window

// Transformed windows a task works on: about this many bytes (their product's columns, in L2), and
// at least kMinTiles windows (each product packs its U_xi once per task: this amortizes it).
constexpr int64_t kTransformedBytes = 512 << 10;
constexpr int64_t kMinTiles = 128;

// -- The weights: U = G g G^T --------------------------------------------------------------------------
//
// G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]. U follows the weights' order, so that both are read
// and written along rows: OIX weights give U[g][xi][Og][Ig], XIO ones U[g][xi][Ig][Og]; the products
// transpose it as they need.

// u[xi * ustep + i] = (G k_i G^T)[xi] for i < n, from the 3x3 kernels k_i given tap by tap:
// k[(kh * 3 + kw) * n + i]. In double, rounded once.
DG_VECTOR_BODY void transform_kernels_body(const float* __restrict k, int64_t n, float* __restrict u, int64_t ustep) {
    const float* r[9];  // tap j of every kernel
    for (int j = 0; j < 9; ++j) r[j] = k + j * n;
    float* o[kXi];  // U_xi of every kernel
    for (int xi = 0; xi < kXi; ++xi) o[xi] = u + xi * ustep;
#pragma GCC ivdep
    for (int64_t i = 0; i < n; ++i) {
        double t[4][3];
        for (int kw = 0; kw < 3; ++kw) {  // t = G k
            const double k0 = r[kw][i], k1 = r[3 + kw][i], k2 = r[6 + kw][i];
            t[0][kw] = k0;
            t[1][kw] = 0.5 * (k0 + k1 + k2);
            t[2][kw] = 0.5 * (k0 - k1 + k2);
            t[3][kw] = k2;
        }
        for (int a = 0; a < 4; ++a) {  // U = t G^T
            o[a * 4 + 0][i] = float(t[a][0]);
            o[a * 4 + 1][i] = float(0.5 * (t[a][0] + t[a][1] + t[a][2]));
            o[a * 4 + 2][i] = float(0.5 * (t[a][0] - t[a][1] + t[a][2]));
            o[a * 4 + 3][i] = float(t[a][2]);
        }
    }
}
DG_VECTORIZED(void, transform_kernels, (const float* __restrict k, int64_t n, float* __restrict u, int64_t ustep),
              (k, n, u, ustep))

// Rows [r0, r1) of U (OIX: output channels, each along Ig; XIO: (g, c), each along Og); each row's
// kernels are copied tap by tap (in chunks), then transformed along the row.
void transform_rows(const float* w, const ConvShape& s, float* u, int64_t r0, int64_t r1) {
    const int64_t G = s.groups, Ig = s.C / G, Og = s.O / G;
    const bool oix = s.channels_first_weights;
    constexpr int64_t kChunk = 256;
    float taps[9 * kChunk];
    const int64_t len = oix ? Ig : Og;
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t g = oix ? r / Og : r / Ig;
        float* row = oix ? u + (g * kXi * Og + r % Og) * Ig : u + (g * kXi * Ig + r % Ig) * Og;
        for (int64_t i0 = 0; i0 < len; i0 += kChunk) {
            const int64_t n = std::min(kChunk, len - i0);
            if (oix) {  // [O, Ig, 3, 3]: output channel r, input channels i0..
                const float* k = w + (r * Ig + i0) * 9;
                for (int64_t i = 0; i < n; ++i)
                    for (int j = 0; j < 9; ++j) taps[j * n + i] = k[i * 9 + j];
            } else {  // [3, 3, Ig, O]: input channel r % Ig of group g, its output channels i0..
                for (int j = 0; j < 9; ++j)
                    std::memcpy(taps + j * n, w + (j * Ig + r % Ig) * s.O + g * Og + i0, size_t(n) * sizeof(float));
            }
            transform_kernels(taps, n, row + i0, Og * Ig);
        }
    }
}

int64_t transform_row_count(const ConvShape& s) { return s.channels_first_weights ? s.O : s.C; }

// The weights' transform as an op of its own (weights that are not constant): the threads split U's rows.
void transform_weights(ggml_tensor* dst, int ith, int nth, void* ud) {
    const ConvShape& s = *static_cast<const ConvShape*>(ud);
    const auto [r0, r1] = thread_share(transform_row_count(s), ith, nth);
    transform_rows(static_cast<const float*>(dst->src[0]->data), s, static_cast<float*>(dst->data), r0, r1);
}

// -- The data: V = B^T d B, Y = A^T M A -----------------------------------------------------------------
//
// B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], A^T = [1 1 1 0; 0 1 -1 -1]. Tile (th, tw) reads the
// window of rows 2 th - ph .. +3 and columns 2 tw - pw .. +3 (zeros outside the input) and writes outputs
// 2 th .. +1, 2 tw .. +1 (those inside dst). A task is a block of tile rows counted over the whole batch
// (row r: image r / TH, tile row r % TH), so small images still give long products.

// Output channels of a share (below): a multiple of this.
constexpr int64_t kChannelAlign = 16;

struct Tiles {
    int64_t TH, TW;  // tile rows and columns of an image
    int64_t blocks;  // tasks per group: block b is tile rows [R b / blocks, R (b + 1) / blocks) of R = N TH
    int64_t rows;    // tile rows of the largest block
};

Tiles plan(const ConvShape& s, int nth) {
    Tiles t;
    t.TH = (s.OH + 1) / 2, t.TW = (s.OW + 1) / 2;
    const int64_t R = s.N * t.TH, G = s.groups, Ig = s.C / G, Og = s.O / G;
    // at most kWinogradMaxRowBytes of windows (and of products) a task, whatever the channels
    const int64_t per_tile = kXi * int64_t(sizeof(float)) * std::max(Ig, Og);
    const int64_t tiles = std::min(std::max(kMinTiles, kTransformedBytes / per_tile), kWinogradMaxRowBytes / per_tile);
    const int64_t rows = std::clamp<int64_t>(tiles / t.TW, 1, R);  // one row at least: winograd_fits bounds its bytes
    // the tasks (G x blocks) a multiple of the threads where there are rows enough, so that each thread
    // gets as many rows as another (14 tile rows in two blocks of 9 and 5 kept one of two threads idle a
    // third of the time); more blocks only make each smaller
    const int64_t per_thread = (G * ((R + rows - 1) / rows) + nth - 1) / nth;
    t.blocks = std::min(R, (per_thread * nth + G - 1) / G);
    t.rows = (R + t.blocks - 1) / t.blocks;
    return t;
}

// The transforms of 4 rows of n values, elementwise: B^T (4 rows from 4) and A^T (2 rows from 4, plus
// `bias` (n values) when given).
DG_VECTOR_BODY void bt_rows_body(const float* __restrict x0, const float* __restrict x1, const float* __restrict x2,
                                 const float* __restrict x3, float* __restrict y0, float* __restrict y1,
                                 float* __restrict y2, float* __restrict y3, int64_t n) {
    for (int64_t k = 0; k < n; ++k) {
        y0[k] = x0[k] - x2[k];
        y1[k] = x1[k] + x2[k];
        y2[k] = x2[k] - x1[k];
        y3[k] = x1[k] - x3[k];
    }
}
DG_VECTORIZED(void, bt_rows, (const float* __restrict x0, const float* __restrict x1, const float* __restrict x2,
                              const float* __restrict x3, float* __restrict y0, float* __restrict y1,
                              float* __restrict y2, float* __restrict y3, int64_t n),
              (x0, x1, x2, x3, y0, y1, y2, y3, n))

DG_VECTOR_BODY void at_rows_body(const float* __restrict x0, const float* __restrict x1, const float* __restrict x2,
                                 const float* __restrict x3, const float* __restrict bias, float* __restrict y0,
                                 float* __restrict y1, int64_t n) {
    if (!bias) {
        for (int64_t k = 0; k < n; ++k) {
            y0[k] = x0[k] + x1[k] + x2[k];
            y1[k] = x1[k] - x2[k] - x3[k];
        }
        return;
    }
    for (int64_t k = 0; k < n; ++k) {
        y0[k] = x0[k] + x1[k] + x2[k] + bias[k];
        y1[k] = x1[k] - x2[k] - x3[k] + bias[k];
    }
}
DG_VECTORIZED(void, at_rows, (const float* __restrict x0, const float* __restrict x1, const float* __restrict x2,
                              const float* __restrict x3, const float* __restrict bias, float* __restrict y0,
                              float* __restrict y1, int64_t n),
              (x0, x1, x2, x3, bias, y0, y1, n))

// The same along a row, for n tiles of 2 columns: B^T of the windows e[2 j .. 2 j + 3] (e: 2 n + 2
// values) into v0..v3[j]; A^T of q0..q3[j] (plus b) into y[2 j] and y[2 j + 1].
DG_VECTOR_BODY void bt_columns_body(const float* __restrict e, float* __restrict v0, float* __restrict v1,
                                    float* __restrict v2, float* __restrict v3, int64_t n) {
    for (int64_t j = 0; j < n; ++j) {
        const float e0 = e[2 * j], e1 = e[2 * j + 1], e2 = e[2 * j + 2], e3 = e[2 * j + 3];
        v0[j] = e0 - e2;
        v1[j] = e1 + e2;
        v2[j] = e2 - e1;
        v3[j] = e1 - e3;
    }
}
DG_VECTORIZED(void, bt_columns, (const float* __restrict e, float* __restrict v0, float* __restrict v1,
                                 float* __restrict v2, float* __restrict v3, int64_t n),
              (e, v0, v1, v2, v3, n))

DG_VECTOR_BODY void at_columns_body(const float* __restrict q0, const float* __restrict q1, const float* __restrict q2,
                                    const float* __restrict q3, float b, float* __restrict y, int64_t n) {
    for (int64_t j = 0; j < n; ++j) {
        y[2 * j] = q0[j] + q1[j] + q2[j] + b;
        y[2 * j + 1] = q1[j] - q2[j] - q3[j] + b;
    }
}
DG_VECTORIZED(void, at_columns, (const float* __restrict q0, const float* __restrict q1, const float* __restrict q2,
                                 const float* __restrict q3, float b, float* __restrict y, int64_t n),
              (q0, q1, q2, q3, b, y, n))

// The input rows a tile row reads, each as a row of 2 TW + 2 values (column j: input column j - pw), zeros
// outside the input. `plane` is one NCX channel plane (H x W).
void window_rows_ncx(const float* plane, const ConvShape& s, int64_t th, int64_t TW, float* rows) {
    const int64_t width = 2 * TW + 2;
    const int64_t lo = std::clamp<int64_t>(s.pw, 0, width), hi = std::clamp<int64_t>(s.pw + s.W, lo, width);
    for (int r = 0; r < 4; ++r) {
        float* out = rows + r * width;
        const int64_t ih = 2 * th - s.ph + r;
        if (ih < 0 || ih >= s.H) {
            std::fill(out, out + width, 0.0f);
            continue;
        }
        std::fill(out, out + lo, 0.0f);
        if (hi > lo) std::memcpy(out + lo, plane + ih * s.W + (lo - s.pw), size_t(hi - lo) * sizeof(float));
        std::fill(out + hi, out + width, 0.0f);
    }
}

// V[xi][c][tile] of the tiles of rows [r0, r1) (tiles in row-major order, TW a row), channels
// [c0, c0 + Ig) of NCX x.
void input_ncx(const float* x, const ConvShape& s, const Tiles& t, int64_t r0, int64_t r1, int64_t c0, int64_t Ig,
               float* V) {
    const int64_t tb = (r1 - r0) * t.TW, width = 2 * t.TW + 2;
    thread_local std::vector<float> buf;
    if (buf.size() < size_t(8 * width)) buf.resize(size_t(8 * width));
    float* rows = buf.data();
    float* col = rows + 4 * width;  // B^T d: 4 rows of `width`
    for (int64_t c = 0; c < Ig; ++c)
        for (int64_t r = r0; r < r1; ++r) {
            const int64_t n = r / t.TH, th = r % t.TH;
            window_rows_ncx(x + ((n * s.C + c0 + c) * s.H) * s.W, s, th, t.TW, rows);
            bt_rows(rows, rows + width, rows + 2 * width, rows + 3 * width, col, col + width, col + 2 * width,
                    col + 3 * width, width);
            const int64_t off = c * tb + (r - r0) * t.TW, step = Ig * tb;
            for (int a = 0; a < 4; ++a)
                bt_columns(col + a * width, V + (a * 4) * step + off, V + (a * 4 + 1) * step + off,
                           V + (a * 4 + 2) * step + off, V + (a * 4 + 3) * step + off, t.TW);
        }
}

// dst (NCX) from M[xi][o][tile] of rows [r0, r1), output channels [o0, o0 + Og), plus the bias, then
// the epilogue (residual, activation) on each row.
void output_ncx(const float* M, const ConvShape& s, const Tiles& t, int64_t r0, int64_t r1, int64_t o0, int64_t Og,
                const ConvExtras& e, float* y) {
    const float* bias = e.bias;
    const int64_t tb = (r1 - r0) * t.TW, TW = t.TW, step = Og * tb, pairs = s.OW / 2;  // pairs: tiles wholly in dst
    thread_local std::vector<float> buf;
    if (buf.size() < size_t(8 * TW)) buf.resize(size_t(8 * TW));
    float* q = buf.data();  // A^T M of a tile row: q[(i * 4 + k) * TW + tw], i the output row, k the column
    for (int64_t o = 0; o < Og; ++o) {
        const float b = bias ? bias[o0 + o] : 0.0f;
        for (int64_t r = r0; r < r1; ++r) {
            const int64_t n = r / t.TH, th = r % t.TH;
            const float* m = M + o * tb + (r - r0) * TW;  // M_xi of this tile row: m + xi * step
            for (int k = 0; k < 4; ++k)
                at_rows(m + k * step, m + (4 + k) * step, m + (8 + k) * step, m + (12 + k) * step, nullptr,
                        q + k * TW, q + (4 + k) * TW, TW);
            for (int i = 0; i < 2 && 2 * th + i < s.OH; ++i) {
                const float* qi = q + i * 4 * TW;
                float* yr = y + ((n * s.O + o0 + o) * s.OH + 2 * th + i) * s.OW;
                at_columns(qi, qi + TW, qi + 2 * TW, qi + 3 * TW, b, yr, pairs);
                if (s.OW % 2) yr[2 * pairs] = qi[pairs] + qi[TW + pairs] + qi[2 * TW + pairs] + b;
                epilogue(s.act, e.residual ? e.residual + (yr - y) : nullptr, 1, s.OW, yr, s.OW);
            }
        }
    }
}

// V[xi][tile][c] of the tiles of rows [r0, r1), channels [c0, c0 + Ig) of NXC x: each window's 16 channel
// vectors through B^T, then their 4 x 4 results through B^T again.
void input_nxc(const float* x, const ConvShape& s, const Tiles& t, int64_t r0, int64_t r1, int64_t c0, int64_t Ig,
               float* V) {
    const int64_t tb = (r1 - r0) * t.TW;
    thread_local std::vector<float> buf;
    if (buf.size() < size_t(17 * Ig)) buf.resize(size_t(17 * Ig));
    float* zeros = buf.data();
    std::fill(zeros, zeros + Ig, 0.0f);
    float* e = zeros + Ig;  // B^T d: e[(a * 4 + j) * Ig + c]
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t n = r / t.TH, th = r % t.TH;
        for (int64_t tw = 0; tw < t.TW; ++tw) {
            const float* d[4][4];
            for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 4; ++j) {
                    const int64_t ih = 2 * th - s.ph + i, iw = 2 * tw - s.pw + j;
                    d[i][j] = ih >= 0 && ih < s.H && iw >= 0 && iw < s.W ? x + ((n * s.H + ih) * s.W + iw) * s.C + c0
                                                                          : zeros;
                }
            for (int j = 0; j < 4; ++j)
                bt_rows(d[0][j], d[1][j], d[2][j], d[3][j], e + j * Ig, e + (4 + j) * Ig, e + (8 + j) * Ig,
                        e + (12 + j) * Ig, Ig);
            float* v = V + ((r - r0) * t.TW + tw) * Ig;  // V_xi of this tile: v + xi * tb * Ig
            const int64_t step = tb * Ig;
            for (int a = 0; a < 4; ++a)
                bt_rows(e + a * 4 * Ig, e + (a * 4 + 1) * Ig, e + (a * 4 + 2) * Ig, e + (a * 4 + 3) * Ig,
                        v + (a * 4) * step, v + (a * 4 + 1) * step, v + (a * 4 + 2) * step, v + (a * 4 + 3) * step, Ig);
        }
    }
}

// dst (NXC) from M[xi][tile][o] of rows [r0, r1), output channels [o0, o0 + Og), plus the bias: A^T over
// the rows, then over the columns, each a pass over the channel vectors; then the epilogue (residual,
// activation) on each output in dst.
void output_nxc(const float* M, const ConvShape& s, const Tiles& t, int64_t r0, int64_t r1, int64_t o0, int64_t Og,
                const ConvExtras& e, float* y) {
    const float* bias = e.bias;
    const int64_t tb = (r1 - r0) * t.TW, step = tb * Og;
    thread_local std::vector<float> buf;
    if (buf.size() < size_t(10 * Og)) buf.resize(size_t(10 * Og));
    float* q = buf.data();      // A^T M: q[(i * 4 + k) * Og + o]
    float* spill = q + 8 * Og;  // the outputs of a tile that lie outside dst (column j: spill + j * Og)
    const float* b = bias ? bias + o0 : nullptr;
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t n = r / t.TH, th = r % t.TH;
        for (int64_t tw = 0; tw < t.TW; ++tw) {
            const float* m = M + ((r - r0) * t.TW + tw) * Og;  // M_xi of this tile: m + xi * step
            for (int k = 0; k < 4; ++k)
                at_rows(m + k * step, m + (4 + k) * step, m + (8 + k) * step, m + (12 + k) * step, nullptr,
                        q + k * Og, q + (4 + k) * Og, Og);
            float* out[2][2];
            for (int i = 0; i < 2; ++i)
                for (int j = 0; j < 2; ++j)
                    out[i][j] = 2 * th + i < s.OH && 2 * tw + j < s.OW
                                    ? y + ((n * s.OH + 2 * th + i) * s.OW + 2 * tw + j) * s.O + o0
                                    : spill + j * Og;
            for (int i = 0; i < 2; ++i) {
                at_rows(q + i * 4 * Og, q + (i * 4 + 1) * Og, q + (i * 4 + 2) * Og, q + (i * 4 + 3) * Og, b, out[i][0],
                        out[i][1], Og);
                for (int j = 0; j < 2; ++j)
                    if (out[i][j] != spill + j * Og)
                        epilogue(s.act, e.residual ? e.residual + (out[i][j] - y) : nullptr, 1, Og, out[i][j], Og);
            }
        }
    }
}

// How many shares of a group's output channels the threads split its products into: nth where the
// batch has fewer than kMinTiles tiles (a share of the tile rows would be a product of a few columns
// that reads all of U, once per thread: ResNet-50's 7 x 7 x 512 layers at batch 1 took 2.04 ms on one
// thread and 1.71 on two), each share keeps at least 2 kChannelAlign channels, and a task's buffers
// (every tile, all Ig or Og channels) stay within kWinogradMaxRowBytes, as plan()'s do; else 1.
int64_t winograd_channel_parts(int64_t tiles, int64_t Ig, int64_t Og, int nth) {
    const int64_t per_tile = kXi * int64_t(sizeof(float)) * std::max(Ig, Og);
    return nth > 1 && tiles < kMinTiles && Og >= 2 * kChannelAlign * nth && tiles * per_tile <= kWinogradMaxRowBytes
               ? nth
               : 1;
}

void winograd_kernel(ggml_tensor* dst, int ith, int nth, void* ud) {
    const ConvShape& s = *static_cast<const ConvShape*>(ud);
    const auto* x = static_cast<const float*>(dst->src[0]->data);
    const auto* U = static_cast<const float*>(dst->src[1]->data);
    const ConvExtras e = conv_extras(dst, s);
    auto* y = static_cast<float*>(dst->data);
    const int64_t G = s.groups, Ig = s.C / G, Og = s.O / G;
    const bool oix = s.channels_first_weights;  // U[xi][Og][Ig], else U[xi][Ig][Og]
    const Tiles t = plan(s, nth);
    const int64_t R = s.N * t.TH;
    // few tiles (a small image at a small batch): the threads share the output channels instead, each
    // with every tile, so the transformed weights are read once rather than once per thread
    const int64_t parts = winograd_channel_parts(R * t.TW, Ig, Og, nth);
    const int64_t blocks = parts > 1 ? 1 : t.blocks, tb_max = (parts > 1 ? R : t.rows) * t.TW;
    const int64_t per_part = ((Og + parts - 1) / parts + kChannelAlign - 1) / kChannelAlign * kChannelAlign;
    thread_local std::vector<float> vbuf, mbuf;
    if (vbuf.size() < size_t(kXi * Ig * tb_max)) vbuf.resize(size_t(kXi * Ig * tb_max));
    if (mbuf.size() < size_t(kXi * Og * tb_max)) mbuf.resize(size_t(kXi * Og * tb_max));
    float *V = vbuf.data(), *M = mbuf.data();
    sgemm_in_ggml_threads();
    const auto [t0, t1] = thread_share(G * blocks * parts, ith, nth);
    for (int64_t task = t0; task < t1; ++task) {
        const int64_t g = task / (blocks * parts), b = task / parts % blocks, part = task % parts;
        const int64_t r0 = R * b / blocks, r1 = R * (b + 1) / blocks;
        // output channels [c0, c0 + oc) of the group
        const int64_t c0 = parts > 1 ? std::min(Og, part * per_part) : 0;
        const int64_t oc = parts > 1 ? std::min(Og, c0 + per_part) - c0 : Og;
        if (oc <= 0) continue;
        const int tb = int((r1 - r0) * t.TW);
        const float* Ug = U + g * kXi * Og * Ig;
        // U_xi's rows (OIX: [Og][Ig]) or columns (XIO: [Ig][Og]) of those channels
        auto u = [&](int xi) { return Ug + xi * Og * Ig + (oix ? c0 * Ig : c0); };
        if (!s.nxc) {
            input_ncx(x, s, t, r0, r1, g * Ig, Ig, V);
            for (int xi = 0; xi < kXi; ++xi)  // M_xi[oc, tb] = U_xi[oc, Ig] . V_xi[Ig, tb]
                scipy_cblas_sgemm(CblasRowMajor, oix ? CblasNoTrans : CblasTrans, CblasNoTrans, int(oc), tb, int(Ig),
                                  1.0f, u(xi), oix ? int(Ig) : int(Og), V + xi * Ig * tb, tb, 0.0f, M + xi * oc * tb, tb);
            output_ncx(M, s, t, r0, r1, g * Og + c0, oc, e, y);
        } else {
            input_nxc(x, s, t, r0, r1, g * Ig, Ig, V);
            for (int xi = 0; xi < kXi; ++xi)  // M_xi[tb, oc] = V_xi[tb, Ig] . U_xi^T[Ig, oc]
                scipy_cblas_sgemm(CblasRowMajor, CblasNoTrans, oix ? CblasTrans : CblasNoTrans, tb, int(oc), int(Ig),
                                  1.0f, V + xi * tb * Ig, int(Ig), u(xi), oix ? int(Ig) : int(Og), 0.0f,
                                  M + xi * tb * oc, int(oc));
            output_nxc(M, s, t, r0, r1, g * Og + c0, oc, e, y);
        }
    }
}

}  // namespace

bool winograd_fits(const ConvShape& s, bool weights_held) {
    const int64_t G = s.groups;
    if (!(s.KH == 3 && s.KW == 3 && s.sh == 1 && s.sw == 1 && s.dh == 1 && s.dw == 1 && G >= 1 && s.C % G == 0 &&
          s.O % G == 0))
        return false;
    const int64_t Ig = s.C / G, Og = s.O / G;
    // a task holds at least one tile row's transformed windows and products (kXi floats per tile and channel)
    const int64_t row_bytes = kXi * int64_t(sizeof(float)) * ((s.OW + 1) / 2) * std::max(Ig, Og);
    return Ig >= kWinogradMinChannels && Og >= kWinogradMinChannels && s.N * s.OH * s.OW >= (weights_held ? kWinogradMinOutputsHeld : kWinogradMinOutputs) &&
           row_bytes <= kWinogradMaxRowBytes;
}

std::array<int64_t, 4> winograd_weights_ne(const ConvShape& s) {
    const int64_t G = s.groups, Ig = s.C / G, Og = s.O / G;
    return {Ig * Og, kXi, G, 1};
}

void winograd_transform_weights(const float* weights, const ConvShape& s, float* u) {
    transform_rows(weights, s, u, 0, transform_row_count(s));
}

ggml_tensor* winograd_conv3x3(ggml_context* ctx, ggml_tensor* src, ggml_tensor* weights, ggml_tensor* bias,
                              const ConvShape* shape, const int64_t dst_ne[4], ggml_tensor* transformed,
                              ggml_tensor* residual) {
    ggml_tensor* u = transformed;
    if (!u) {
        const auto une = winograd_weights_ne(*shape);
        ggml_tensor* wargs[1] = {weights};
        u = gg::custom_4d(ctx, GGML_TYPE_F32, une[0], une[1], une[2], une[3], wargs, 1, transform_weights,
                          GGML_N_TASKS_MAX, const_cast<ConvShape*>(shape));
    }
    ggml_tensor* args[4] = {src, u};
    int n = 2;
    if (bias) args[n++] = bias;
    if (residual) args[n++] = residual;  // the last (conv_extras)
    return gg::custom_4d(ctx, GGML_TYPE_F32, dst_ne[0], dst_ne[1], dst_ne[2], dst_ne[3], args, n,
                         winograd_kernel, GGML_N_TASKS_MAX, const_cast<ConvShape*>(shape));
}

}  // namespace dg::kernels
