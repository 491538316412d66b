"""3x3 convolutions of stride 1 by Winograd's F(2x2, 3x3) (backend/kernels/winograd.h) against float64
numpy, with the error bound of that algorithm, and the rule that picks it.

Error bound. The kernel computes V = B^T d B per 4x4 window and input channel (sums of 4 inputs, 2
roundings), U = G g G^T per channel pair (double, rounded once), M = sum over the Ig input channels of
U * V (sgemm: Ig roundings at most per term), Y = A^T M A + bias (sums of 9 values of M, then the bias:
5 roundings). To first order in U = 2^-24 every error is at most (Ig + 10) * U times the same sums taken
over magnitudes: |A^T| (sum_c |U_c| * |B^T| |d_c| |B|) |A| + |bias| (winograd_magnitude below, from the
definition of the transforms, not from the kernel). A wrong index or a wrong transform entry gives O(1)
errors, thousands of times that bound.
"""

import numpy as np
import pytest

import dyngraph as dg
from oputil import compile_op, run
from dyngraph.reference import spatial_numpy as ref

K = dg.OpKind
D = dg.DYNAMIC_DIM
U = 2.0**-24

BT = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float64)
G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], np.float64)
AT = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.float64)


def winograd_magnitude(x, w, b, pads_begin, pads_end, groups, fmt, wfmt):
    """|A^T| (sum_c |G g G^T| * |B^T| |d| |B|) |A| + |b| for every output (NCX or NXC, as dst)."""
    x = ref.to_ncx(x.astype(np.float64), fmt)
    w = ref.weights_to_oix(w.astype(np.float64), wfmt)
    N, C, H, W = x.shape
    O, Ig = w.shape[:2]
    ph, pw = pads_begin
    OH, OW = ref.out_size(H, 3, 1, 1, ph, pads_end[0]), ref.out_size(W, 3, 1, 1, pw, pads_end[1])
    TH, TW = (OH + 1) // 2, (OW + 1) // 2
    # the input under every tile's 4x4 window, zeros outside
    xp = np.zeros((N, C, 2 * TH + 2, 2 * TW + 2))
    h, wd = min(H, 2 * TH + 2 - ph), min(W, 2 * TW + 2 - pw)
    xp[:, :, ph:ph + h, pw:pw + wd] = x[:, :, :h, :wd]
    rows = np.arange(TH)[:, None] * 2 + np.arange(4)[None, :]  # [TH, 4]
    cols = np.arange(TW)[:, None] * 2 + np.arange(4)[None, :]
    d = xp[:, :, rows[:, None, :, None], cols[None, :, None, :]]  # [N, C, TH, TW, 4, 4]
    v = np.einsum("ai,nctsij,bj->nctsab", np.abs(BT), np.abs(d), np.abs(BT))
    u = np.abs(np.einsum("ai,ocij,bj->ocab", G, w, G))  # [O, Ig, 4, 4]
    Og = O // groups
    s = np.concatenate([np.einsum("ocab,nctsab->notsab", u[g * Og:(g + 1) * Og], v[:, g * Ig:(g + 1) * Ig])
                        for g in range(groups)], axis=1)
    y = np.einsum("ia,notsab,jb->notisj", np.abs(AT), s, np.abs(AT)).reshape(N, O, 2 * TH, 2 * TW)[:, :, :OH, :OW]
    if b is not None:
        y = y + np.abs(b.astype(np.float64))[None, :, None, None]
    return y if fmt == "NCX" else np.moveaxis(y, 1, -1)


def assert_winograd_close(y, x, w, b, pads_begin, pads_end, groups, fmt, wfmt):
    want = ref.conv(x, w, b, strides=[1, 1], dilations=[1, 1], pads_begin=pads_begin, pads_end=pads_end,
                    groups=groups, fmt=fmt, wfmt=wfmt)
    assert y.shape == want.shape, (y.shape, want.shape)
    Ig = x.shape[1 if fmt == "NCX" else -1] // groups
    bound = (Ig + 10) * U * winograd_magnitude(x, w, b, pads_begin, pads_end, groups, fmt, wfmt) + 1e-30
    err = np.abs(y.astype(np.float64) - want)
    worst = np.unravel_index(np.argmax(err / bound), err.shape)
    assert (err <= bound).all(), f"error {err[worst]} above the bound {bound[worst]} at {worst}"
    return err.max() / np.abs(want).max()


def shape_of(fmt, n, c, h, w):
    return [n, c, h, w] if fmt == "NCX" else [n, h, w, c]


def compile_conv(fmt, wfmt, C, O, groups, pb, pe, rng, bias=True, constant=True, engine=None):
    """A 3x3 convolution of stride 1 with a dynamic batch and dynamic spatial sizes."""
    w = rng.standard_normal([O, C // groups, 3, 3] if wfmt == "OIX" else [3, 3, C // groups, O]).astype(np.float32)
    b = rng.standard_normal(O).astype(np.float32) if bias else None
    shapes = [shape_of(fmt, D, C, D, D), list(w.shape)] + ([[O]] if bias else [])
    consts = ({1: w, **({2: b} if bias else {})}) if constant else {}
    attrs = dict(strides=[1, 1], dilations=[1, 1], pads_begin=pb, pads_end=pe, groups=groups, data_format=fmt,
                 weights_format=wfmt)
    return compile_op(K.Convolution, shapes, attrs=attrs, constants=consts, engine=engine), w, b


@pytest.mark.parametrize("fmt", ["NCX", "NXC"])
@pytest.mark.parametrize("wfmt", ["OIX", "XIO"])
@pytest.mark.parametrize("case", [
    dict(C=32, O=48, groups=1, pb=[1, 1], pe=[1, 1]),           # "same" padding, as in ResNet
    dict(C=16, O=16, groups=1, pb=[0, 0], pe=[0, 0]),           # no padding: outputs 2 fewer
    dict(C=64, O=32, groups=2, pb=[2, 1], pe=[0, 2]),           # groups, asymmetric and wide padding
    dict(C=24, O=40, groups=1, pb=[1, 1], pe=[1, 1], bias=False),
])
def test_winograd_matches_numpy_at_three_shapes(fmt, wfmt, case, rng):
    case = dict(case)
    cp, w, b = compile_conv(fmt, wfmt, case["C"], case["O"], case["groups"], case["pb"], case["pe"], rng,
                            bias=case.get("bias", True))
    # odd and even sizes (a last tile half outside dst), one tile row per image, several images
    for n, h, wd in [(1, 15, 17), (3, 4, 40), (2, 24, 9)]:
        x = rng.standard_normal(shape_of(fmt, n, case["C"], h, wd)).astype(np.float32)
        (y,) = run(cp, x)
        assert_winograd_close(y, x, w, b, case["pb"], case["pe"], case["groups"], fmt, wfmt)


def test_winograd_reads_runtime_weights_afresh_on_every_call(rng):
    """The weights' transform is part of every execution: new weights in the same buffer shape give their own
    result (nothing of the previous call's weights is kept)."""
    cp, _, _ = compile_conv("NCX", "OIX", 32, 32, 1, [1, 1], [1, 1], rng, constant=False)
    x = rng.standard_normal([2, 32, 14, 14]).astype(np.float32)
    for _ in range(3):
        w = rng.standard_normal([32, 32, 3, 3]).astype(np.float32)
        b = rng.standard_normal(32).astype(np.float32)
        (y,) = run(cp, x, w, b)
        assert_winograd_close(y, x, w, b, [1, 1], [1, 1], 1, "NCX", "OIX")


@pytest.mark.parametrize("threads", [2, 3, 5])
def test_winograd_on_several_threads(threads, rng):
    """Tasks are blocks of tile rows over the whole batch: with few rows they are cut smaller so every thread
    has one; each result is within the bound on any thread count."""
    for fmt in ("NCX", "NXC"):
        cp, w, b = compile_conv(fmt, "XIO", 16, 32, 1, [1, 1], [1, 1], rng, engine=dg.Engine(num_threads=threads))
        for n, h in [(1, 10), (4, 31)]:
            x = rng.standard_normal(shape_of(fmt, n, 16, h, h)).astype(np.float32)
            (y,) = run(cp, x)
            assert_winograd_close(y, x, w, b, [1, 1], [1, 1], 1, fmt, "XIO")


@pytest.mark.parametrize("threads", [2, 3, 5])
@pytest.mark.parametrize("fmt,wfmt,groups,C,O", [("NCX", "OIX", 1, 32, 176), ("NXC", "XIO", 1, 32, 176),
                                                 ("NCX", "XIO", 2, 32, 200), ("NXC", "OIX", 2, 32, 200),
                                                 ("NCX", "OIX", 1, 16, 65), ("NXC", "XIO", 1, 16, 97)])
def test_few_tiles_share_the_output_channels_among_the_threads(threads, fmt, wfmt, groups, C, O, rng):
    """Under 128 tiles over the batch (a 7 x 7 image at batch 1: 16), the threads take shares of each
    group's output channels (multiples of 16, the last one short: 176 over 3 threads is 64 + 64 + 48,
    100 per group over 2 is 64 + 36, 65 over 2 is 48 + 17) with every tile each, instead of shares of the
    tile rows; where a share would have fewer than 32 channels, the tile rows again. Each result within
    the bound, every channel computed."""
    cp, w, b = compile_conv(fmt, wfmt, C, O, groups, [1, 1], [1, 1], rng, engine=dg.Engine(num_threads=threads))
    for n, h, wd in [(1, 7, 7), (2, 5, 9), (1, 14, 14), (1, 16, 16)]:  # 16, 15, 49, 64 tiles
        x = rng.standard_normal(shape_of(fmt, n, C, h, wd)).astype(np.float32)
        (y,) = run(cp, x)
        assert_winograd_close(y, x, w, b, [1, 1], [1, 1], groups, fmt, wfmt)


def _nodes(cp, x, *weights):
    run(cp, x, *weights)
    return cp.cache_info().last_graph_nodes


def test_the_rule_takes_winograd_for_3x3_stride_1_with_enough_channels_and_outputs(rng):
    """Weights given at run time: Winograd adds one node to the graph (the weights' transform). It is taken
    at a 3x3 kernel of stride and dilation 1 with at least 16 input and output channels per group and at
    least 96 outputs over the batch (backend/kernels/winograd.h); elsewhere the im2col kernel runs, as one
    node."""
    cp, w, b = compile_conv("NCX", "OIX", 16, 16, 1, [1, 1], [1, 1], rng, constant=False)
    few = _nodes(cp, rng.standard_normal([1, 16, 9, 10]).astype(np.float32), w, b)    # 90 outputs
    many = _nodes(cp, rng.standard_normal([1, 16, 8, 12]).astype(np.float32), w, b)   # 96 outputs
    batch = _nodes(cp, rng.standard_normal([2, 16, 7, 7]).astype(np.float32), w, b)   # 98 over the batch
    assert (many, batch) == (few + 1, few + 1)
    x = rng.standard_normal([1, 16, 16, 16]).astype(np.float32)

    def conv(O, groups, strides, dilations):
        w = rng.standard_normal([O, 16 // groups, 3, 3]).astype(np.float32)
        cp = compile_op(K.Convolution, [[D, 16, D, D], list(w.shape)], attrs=dict(
            strides=strides, dilations=dilations, pads_begin=dilations, pads_end=dilations, groups=groups,
            data_format="NCX", weights_format="OIX"))
        return _nodes(cp, x, w)

    narrow = conv(30, 2, [1, 1], [1, 1])  # 15 output channels per group
    strided, dilated, taken = conv(16, 1, [2, 2], [1, 1]), conv(16, 1, [1, 1], [2, 2]), conv(32, 1, [1, 1], [1, 1])
    assert narrow == strided == dilated == taken - 1


@pytest.mark.parametrize("fmt,wfmt,groups", [("NCX", "OIX", 1), ("NXC", "XIO", 2), ("NCX", "XIO", 1)])
def test_constant_weights_are_transformed_once_per_partition(fmt, wfmt, groups, rng):
    """Constant weights: the partition transforms them at the first graph that takes Winograd (16 values
    per 9 weights, cache_info().derived_bytes) and every later graph reads them: no transform node, no
    second copy. With no transform per call, Winograd is taken from 32 outputs on (kWinogradMinOutputsHeld;
    96 for weights given at run time: im2col, whose sums round differently, below). Where both take it the
    result is the same bits as with the weights given at run time (transformed by the op, every call)."""
    held, w, b = compile_conv(fmt, wfmt, 32, 48, groups, [1, 1], [1, 1], rng)
    given = compile_conv(fmt, wfmt, 32, 48, groups, [1, 1], [1, 1], rng, constant=False)[0]
    small = rng.standard_normal(shape_of(fmt, 1, 32, 5, 6)).astype(np.float32)  # 30 outputs: im2col
    assert _nodes(held, small) == 1 and held.cache_info().derived_bytes == 0
    u_bytes = 16 * 48 * (32 // groups) * 4
    for n, h, wd in [(1, 4, 8), (2, 17, 9), (3, 8, 30)]:  # 32 outputs and more
        x = rng.standard_normal(shape_of(fmt, n, 32, h, wd)).astype(np.float32)
        both = n * h * wd >= 96  # the weights given at run time take Winograd too
        assert _nodes(held, x) == 1 and _nodes(given, x, w, b) == (2 if both else 1)
        assert held.cache_info().derived_bytes == u_bytes
        (y,) = run(held, x)
        assert np.array_equal(y, run(given, x, w, b)[0]) == both
        assert_winograd_close(y, x, w, b, [1, 1], [1, 1], groups, fmt, wfmt)
    assert held.cache_info().misses == 4


def test_the_rule_leaves_images_too_wide_for_one_task_to_im2col(rng):
    """A task holds a whole row of tiles: 16 transformed values of 4 bytes per tile and channel, at most
    16 MiB (kWinogradMaxRowBytes); 16 channels fill that at 16384 tiles, 32768 columns."""
    cp, w, b = compile_conv("NCX", "OIX", 16, 16, 1, [1, 1], [1, 1], rng, constant=False)
    x = rng.standard_normal([1, 16, 2, 32768]).astype(np.float32)
    at_limit = _nodes(cp, x, w, b)
    (y,) = run(cp, x, w, b)
    assert_winograd_close(y, x, w, b, [1, 1], [1, 1], 1, "NCX", "OIX")
    beyond = _nodes(cp, rng.standard_normal([1, 16, 2, 32770]).astype(np.float32), w, b)
    assert at_limit == beyond + 1
