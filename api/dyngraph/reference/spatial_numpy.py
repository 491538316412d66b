"""float64 numpy references of the spatial ops, written from their
definitions (oneDNN Graph's documents; PyTorch's for adaptive pooling and
the nearest index rules): convolution, transposed convolution, pooling,
batch / group normalization, interpolation. Data in NCX or NXC, 1-D or 2-D."""

from __future__ import annotations

import numpy as np


def to_ncx(x, fmt):
    return np.moveaxis(x, -1, 1) if fmt == "NXC" else x


def from_ncx(x, fmt):
    return np.moveaxis(x, 1, -1) if fmt == "NXC" else x


def weights_to_oix(w, wfmt):
    """OIX / IOX as they are; XIO -> OIX and XOI -> IOX ([K..., b, a] -> [a, b, K...])."""
    if wfmt in ("OIX", "IOX"):
        return w
    n = w.ndim - 2
    return np.transpose(w, (n + 1, n) + tuple(range(n)))


def out_size(L, k, s, d, pb, pe):
    return (L + pb + pe - d * (k - 1) - 1) // s + 1


def conv(x, w, b=None, strides=None, dilations=None, pads_begin=None, pads_end=None, groups=1, fmt="NCX", wfmt="OIX"):
    """dst[n, g*Og+o, y] = b + sum_{i, k} src[n, g*Ig+i, y*s + k*d - pb] * w[g*Og+o, i, k]."""
    x = to_ncx(x.astype(np.float64), fmt)
    w = weights_to_oix(w.astype(np.float64), wfmt)
    ns = x.ndim - 2
    strides = strides or [1] * ns
    dilations = dilations or [1] * ns
    pads_begin = pads_begin or [0] * ns
    pads_end = pads_end or [0] * ns
    N, C = x.shape[:2]
    O, Ig = w.shape[:2]
    ks = w.shape[2:]
    assert C == Ig * groups
    Og = O // groups
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pb, max(pe, 0)) for pb, pe in zip(pads_begin, pads_end)])  # pe < 0: cropped
    outs = [out_size(x.shape[2 + a], ks[a], strides[a], dilations[a], pads_begin[a], pads_end[a]) for a in range(ns)]
    y = np.zeros((N, O) + tuple(outs))
    for tap in np.ndindex(*ks):
        sl = tuple(slice(t * d, t * d + (o - 1) * s + 1, s) for t, d, o, s in zip(tap, dilations, outs, strides))
        xs = xp[(slice(None), slice(None)) + sl]  # [N, C, out...]
        for g in range(groups):
            wg = w[g * Og:(g + 1) * Og, :, *tap]  # [Og, Ig]
            y[:, g * Og:(g + 1) * Og] += np.einsum("oi,ni...->no...", wg, xs[:, g * Ig:(g + 1) * Ig])
    if b is not None:
        y += b.astype(np.float64).reshape((1, O) + (1,) * ns)
    return from_ncx(y, fmt)


def conv_magnitude(x, w, **kw):
    """sum |w * x| of each output (for error bounds)."""
    return conv(np.abs(x), np.abs(w), None, **kw)


def conv_transpose(x, w, b=None, strides=None, dilations=None, pads_begin=None, pads_end=None, output_padding=None,
                   groups=1, fmt="NCX", wfmt="IOX"):
    """Each src element adds src * w[i, o, k] at dst position y*s + k*d - pb."""
    x = to_ncx(x.astype(np.float64), fmt)
    w = weights_to_oix(w.astype(np.float64), wfmt)  # IOX: [C, Og, K...]
    ns = x.ndim - 2
    strides = strides or [1] * ns
    dilations = dilations or [1] * ns
    pads_begin = pads_begin or [0] * ns
    pads_end = pads_end or [0] * ns
    output_padding = output_padding or [0] * ns
    N, C = x.shape[:2]
    Og = w.shape[1]
    Ig = C // groups
    ks = w.shape[2:]
    full = [(x.shape[2 + a] - 1) * strides[a] + dilations[a] * (ks[a] - 1) + 1 + output_padding[a] for a in range(ns)]
    y = np.zeros((N, Og * groups) + tuple(full))
    for tap in np.ndindex(*ks):
        sl = tuple(slice(t * d, t * d + (L - 1) * s + 1, s)
                   for t, d, L, s in zip(tap, dilations, x.shape[2:], strides))
        for g in range(groups):
            wg = w[g * Ig:(g + 1) * Ig, :, *tap]  # [Ig, Og]
            y[(slice(None), slice(g * Og, (g + 1) * Og)) + sl] += np.einsum("io,ni...->no...", wg, x[:, g * Ig:(g + 1) * Ig])
    crop = tuple(slice(pb, f - pe) for pb, pe, f in zip(pads_begin, pads_end, full))
    y = y[(slice(None), slice(None)) + crop]
    if b is not None:
        y += b.astype(np.float64).reshape((1, -1) + (1,) * ns)
    return from_ncx(y, fmt)


def pool_out(L, k, s, d, pb, pe, ceil):
    span = L + pb + pe - d * (k - 1) - 1
    out = (span + (s - 1 if ceil else 0)) // s + 1
    if ceil and (out - 1) * s >= L + pb:
        out -= 1
    return out


def pool(x, kind, kernel, strides, pads_begin=None, pads_end=None, dilations=None, ceil=False, exclude_pad=False,
         fmt="NCX"):
    """Max or average pooling window by window. Average: over the window's input
    elements (exclude_pad) or its positions inside [-pads_begin, L + pads_end)."""
    x = to_ncx(x.astype(np.float64), fmt)
    ns = x.ndim - 2
    pads_begin = pads_begin or [0] * ns
    pads_end = pads_end or [0] * ns
    dilations = dilations or [1] * ns
    Ls = x.shape[2:]
    outs = [pool_out(Ls[a], kernel[a], strides[a], dilations[a], pads_begin[a], pads_end[a], ceil) for a in range(ns)]
    y = np.empty(x.shape[:2] + tuple(outs))
    for o in np.ndindex(*outs):
        idx, count = [], 1
        for a in range(ns):
            start = o[a] * strides[a] - pads_begin[a]
            taps = start + dilations[a] * np.arange(kernel[a])
            inside = taps[(taps >= 0) & (taps < Ls[a])]
            idx.append(inside)
            if kind == "avg":
                count *= len(inside) if exclude_pad else min(kernel[a], Ls[a] + pads_end[a] - start)
        win = x[(slice(None), slice(None)) + np.ix_(*idx)].reshape(x.shape[:2] + (-1,))
        y[(slice(None), slice(None)) + o] = win.max(-1) if kind == "max" else win.sum(-1) / count
    return from_ncx(y, fmt)


def adaptive_avg_pool(x, sizes, fmt="NCX"):
    x = to_ncx(x.astype(np.float64), fmt)
    ns = x.ndim - 2
    Ls = x.shape[2:]
    y = np.empty(x.shape[:2] + tuple(sizes))
    for o in np.ndindex(*sizes):
        sl = tuple(slice(o[a] * Ls[a] // sizes[a], -(-(o[a] + 1) * Ls[a] // sizes[a])) for a in range(ns))
        y[(slice(None), slice(None)) + o] = x[(slice(None), slice(None)) + sl].mean(axis=tuple(range(2, 2 + ns)))
    return from_ncx(y, fmt)


def batch_norm(x, gamma, beta, mean, var, eps, fmt="NCX"):
    x = to_ncx(x.astype(np.float64), fmt)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    p = [np.asarray(v, np.float64).reshape(shape) for v in (gamma, beta, mean, var)]
    return from_ncx((x - p[2]) / np.sqrt(p[3] + eps) * p[0] + p[1], fmt)


def group_norm(x, groups, eps, gamma=None, beta=None, fmt="NCX"):
    x = to_ncx(x.astype(np.float64), fmt)
    N, C = x.shape[:2]
    xg = x.reshape(N, groups, -1)
    y = ((xg - xg.mean(-1, keepdims=True)) / np.sqrt(xg.var(-1, keepdims=True) + eps)).reshape(x.shape)
    if gamma is not None:
        shape = (1, C) + (1,) * (x.ndim - 2)
        y = y * gamma.astype(np.float64).reshape(shape) + beta.astype(np.float64).reshape(shape)
    return from_ncx(y, fmt)


def nearest_index(o, L, n, half_pixel):
    """PyTorch's float arithmetic: floor((o + 0.5) * (in / out)) or floor(o * (in / out))."""
    scale = np.float32(L) / np.float32(n)
    src = np.float32((o + 0.5) * np.float64(scale)) if half_pixel else np.float32(o) * scale
    return min(int(np.floor(src)), L - 1)


def linear_weights(n, L, align_corners):
    """(i0, i1, lambda) per output of an axis: PyTorch's source coordinate, clamped at 0."""
    out = []
    for o in range(n):
        if align_corners:
            src = o * (L - 1) / (n - 1) if n > 1 else 0.0
        else:
            src = max((o + 0.5) * L / n - 0.5, 0.0)
        i0 = min(int(np.floor(src)), L - 1)
        i1 = min(i0 + 1, L - 1)
        out.append((i0, i1, src - i0))
    return out


def cubic_weights(n, L, align_corners, a=-0.75):
    """(the 4 tap indices, their weights) per output of an axis: PyTorch's source
    coordinate (not clamped), Keys' cubic kernel, the taps clamped to [0, L)."""
    def near(t):  # |t| <= 1
        return ((a + 2) * t - (a + 3)) * t * t + 1

    def far(t):  # 1 < |t| < 2
        return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a

    out = []
    for o in range(n):
        if align_corners:
            src = o * (L - 1) / (n - 1) if n > 1 else 0.0
        else:
            src = (o + 0.5) * L / n - 0.5
        i = int(np.floor(src))
        t = src - i
        taps = [min(max(i + k, 0), L - 1) for k in (-1, 0, 1, 2)]
        out.append((taps, [far(t + 1), near(t), near(1 - t), far(2 - t)]))
    return out


def interpolate(x, sizes, mode, coord="half_pixel", fmt="NCX"):
    x = to_ncx(x.astype(np.float64), fmt)
    ns = x.ndim - 2
    y = x
    for a in range(ns):
        L, n = y.shape[2 + a], sizes[a]
        if mode == "nearest":
            idx = [nearest_index(o, L, n, coord == "half_pixel") for o in range(n)]
            y = np.take(y, idx, axis=2 + a)
        elif mode == "bicubic":
            m = np.zeros((n, L))  # the axis as a product: out[o] = sum_k m[o, k] in[k]
            for o, (taps, ws) in enumerate(cubic_weights(n, L, coord == "align_corners")):
                for k, w in zip(taps, ws):
                    m[o, k] += w
            y = np.moveaxis(np.tensordot(m, y, axes=([1], [2 + a])), 0, 2 + a)
        else:
            w = linear_weights(n, L, coord == "align_corners")
            lo = np.take(y, [i0 for i0, _, _ in w], axis=2 + a)
            hi = np.take(y, [i1 for _, i1, _ in w], axis=2 + a)
            lam = np.array([t for _, _, t in w]).reshape((n,) + (1,) * (ns - 1 - a))
            y = lo * (1 - lam) + hi * lam
    return from_ncx(y, fmt)
