// Helpers of the spatial lowerings (conv, pool, channel_norm, interpolate):
// oneDNN Graph's layouts NCX / NXC of rank 3 (1-D) or 4 (2-D) seen as 2-D
// with H = 1 (rank 5, 3-D: Layout3), and f32 operands for our kernels.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "../gg.h"
#include "../lowering.h"

namespace dg::spatial {

// The largest size, stride, dilation, padding or group count the spatial kernels take (ops/spatial.py MAX_WINDOW).
constexpr int64_t kMaxWindow = (int64_t(1) << 31) - 1;
// The deepest kernel of a convolution over 3 spatial axes: its lowering joins one view of src per
// kernel depth (ops/spatial.py MAX_KERNEL_DEPTH).
constexpr int64_t kMaxKernelDepth = 4096;

// Sizes of a rank-3/4 tensor in NCX or NXC, 1-D as H = 1.
struct Layout {
    int64_t N = 1, C = 1, H = 1, W = 1;
};

inline Layout layout_of(const LowerCtx& c, const Dims& d, bool nxc, const char* what) {
    if (d.rank != 3 && d.rank != 4) c.unsupported(cat(what, " ", d.str(), " must have rank 3 or 4"));
    Layout l;
    l.N = d[0];
    l.C = nxc ? d[d.rank - 1] : d[1];
    const int first = nxc ? 1 : 2;
    if (d.rank == 4) l.H = d[first];
    l.W = d[first + d.rank - 3];
    return l;
}

// The entries of a per-spatial-axis attribute as (H, W) values; 1-D ops fill H with `h_default`.
inline void per_axis(const LowerCtx& c, const std::vector<int64_t>& v, int n_spatial, int64_t h_default, int64_t& h,
                     int64_t& w, const char* name) {
    if (int(v.size()) != n_spatial) c.unsupported(cat(name, " has ", v.size(), " entries for ", n_spatial, " spatial axes"));
    h = n_spatial == 2 ? v[0] : h_default;
    w = v[size_t(n_spatial - 1)];
}

// An attribute of expressions (evaluated for this binding), each in [lo, kMaxWindow] (end paddings
// may be negative: oneDNN crops the input's end).
inline std::vector<int64_t> eval_exprs(const LowerCtx& c, const std::vector<int32_t>& v, const char* name,
                                       int64_t lo = 0) {
    std::vector<int64_t> vals;
    for (int32_t e : v) {
        vals.push_back(c.eval(e));
        if (vals.back() < lo || vals.back() > kMaxWindow)
            c.unsupported(cat(name, " entry ", vals.back(), " must lie in [", lo, ", ", kMaxWindow, "]"));
    }
    return vals;
}

// The same as (H, W) values.
inline void per_axis_exprs(const LowerCtx& c, const std::vector<int32_t>& v, int n_spatial, int64_t& h, int64_t& w,
                           const char* name, int64_t lo = 0) {
    per_axis(c, eval_exprs(c, v, name, lo), n_spatial, 0, h, w, name);
}

// Rank 5 (3 spatial axes): NCX [N, C, D, H, W] or NXC [N, D, H, W, C].
struct Layout3 {
    int64_t N = 1, C = 1, D = 1, H = 1, W = 1;
};

inline Layout3 layout3_of(const LowerCtx& c, const Dims& d, bool nxc, const char* what) {
    if (d.rank != 5) c.unsupported(cat(what, " ", d.str(), " must have rank 5"));
    const int first = nxc ? 1 : 2;
    return {d[0], nxc ? d[4] : d[1], d[first], d[first + 1], d[first + 2]};
}

// The 3 entries of a per-spatial-axis attribute (`fill` on every axis when it is empty and fill > 0).
inline std::array<int64_t, 3> per_axis3(const LowerCtx& c, const std::vector<int64_t>& v, const char* name,
                                        int64_t fill = 0) {
    if (v.empty() && fill > 0) return {fill, fill, fill};
    if (v.size() != 3) c.unsupported(cat(name, " has ", v.size(), " entries for 3 spatial axes"));
    return {v[0], v[1], v[2]};
}

// `t` as dense f32 (a copy or conversion only when needed).
inline ggml_tensor* dense_f32(const LowerCtx& c, ggml_tensor* t) { return c.cast(c.cont(t), GGML_TYPE_F32); }

// Sizes our kernels hand to BLAS (int) and index with.
inline void require_int_sizes(const LowerCtx& c, std::initializer_list<int64_t> sizes) {
    for (int64_t s : sizes)
        if (s < 1 || s > kMaxWindow) c.unsupported(cat("a size of ", s, " is outside the kernels' range"));
}

// Floor division by a positive divisor (C++'s `/` truncates negative quotients towards 0).
inline int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// One spatial axis of a sliding window. Sizes, kernel sizes, strides and dilations lie in
// [1, kMaxWindow] (require_int_sizes) and paddings in [0, kMaxWindow] (per_axis_exprs): every
// quantity the kernels compute from them (o * stride - pad + k * dilation) is below 2^63.
struct WindowAxis {
    int64_t L, n, k, stride, dilation, pad_begin, pad_end;  // input size, output size, kernel...
    int64_t extent() const { return dilation * (k - 1) + 1; }
    // (L + pads - extent) // stride + 1: the outputs of a window that stays inside the padded input
    int64_t floor_outputs() const { return floor_div(L + pad_begin + pad_end - extent(), stride) + 1; }
};

// A logical NXC tensor of rank 3/4 as NCX (a view), and back.
inline ggml_tensor* nxc_to_ncx(const LowerCtx& c, ggml_tensor* t, int rank) {
    const int perm4[4] = {0, 3, 1, 2}, perm3[3] = {0, 2, 1};
    return c.permute(t, rank, rank == 4 ? perm4 : perm3);
}
inline ggml_tensor* ncx_to_nxc(const LowerCtx& c, ggml_tensor* t, int rank) {
    const int perm4[4] = {0, 2, 3, 1}, perm3[3] = {0, 2, 1};
    return c.permute(t, rank, rank == 4 ? perm4 : perm3);
}

}  // namespace dg::spatial
