"""What a convolution's kernel applies to each block of dst it writes (kernels/conv.h:
ConvShape::residual and ::act; lower/conv.cpp decides): the residual that an Add reading dst alone
adds to it (ResNet's block output), then the ReLU or GELU (erf) that alone reads dst or that sum.

A fused graph must give the very bits of the same ops as nodes of their own (the partition compiled
with dst also an output, which keeps them apart) on every path of the kernel: im2col in NCX and NXC,
the 1x1 product read in place, depthwise in NCX and NXC, Winograd in NCX and NXC, groups; at 1 and 2
threads, with and without a bias, at dynamic sizes, with NaN in the residual. And it
must be one node fewer per op absorbed. Where an Add cannot be absorbed (a broadcast residual, one
computed after the convolution, a second reader of dst), the values are those of the ops apart.
"""

import math

import numpy as np
import pytest

import dyngraph as dg
from oputil import run
from dyngraph.reference import spatial_numpy as ref

K = dg.OpKind
D = dg.DYNAMIC_DIM

# (input channels, output channels, kernel, stride, padding, groups)
PATHS = {
    "im2col": (8, 12, 3, 2, 1, 1),
    "1x1": (16, 24, 1, 1, 0, 1),
    "depthwise": (8, 8, 3, 1, 1, 8),
    "winograd": (16, 16, 3, 1, 1, 1),  # 16 channels and >= 32 outputs (weights held): Winograd
    "grouped": (8, 12, 3, 1, 1, 2),
}
SIZES = [(1, 12, 10), (2, 9, 11), (1, 3, 4)]  # (1, 3, 4): too few outputs for Winograd


def out_size(n, k, s, p):
    return (n + 2 * p - k) // s + 1


def layout(fmt, n, c, h, w):
    return (n, c, h, w) if fmt == "NCX" else (n, h, w, c)


class Case:
    """act(Convolution(x, w) + bias [+ r]) built as a graph, with `r` a partition input (or computed
    from one by an op before the convolution, `r_first`, or after it, `r_after`)."""

    def __init__(self, path, fmt="NCX", act="relu", residual=True, bias=True, rng=None, conv_at=0):
        self.path, self.fmt, self.act, self.residual, self.conv_at = path, fmt, act, residual, conv_at
        c, o, k, s, p, g = PATHS[path]
        self.c, self.o, self.k, self.s, self.p = c, o, k, s, p
        self.w = rng.standard_normal((o, c // g, k, k)).astype(np.float32)
        self.b = rng.standard_normal(o).astype(np.float32) if bias else None
        self.attrs = dict(strides=[s, s], dilations=[1, 1], pads_begin=[p, p], pads_end=[p, p], groups=g,
                          data_format=fmt, weights_format="OIX")

    def compile(self, threads=1, also_conv=False, r_shape=None, r_op=None, also_added=False):
        g = dg.GraphBuilder()
        x = g.input("x", dg.f32, list(layout(self.fmt, D, self.c, D, D)))
        r = None
        if self.residual:
            r = g.input("r", dg.f32, r_shape or [D, D, D, D])
            if r_op == "first":
                r = g.op(K.Abs, [r], {})
        ins = [x, g.constant("w", self.w)] + ([g.constant("b", self.b)] if self.b is not None else [])
        conv = g.op(K.Convolution, ins, self.attrs)
        y = conv
        if self.residual:
            if r_op == "after":
                r = g.op(K.Abs, [r], {})
            y = g.op(K.Add, [conv, r] if self.conv_at == 0 else [r, conv], {})
        if self.act:
            kind, attrs = (K.ReLU, {}) if self.act == "relu" else (K.GELU, {"mode": self.act})
            y = g.op(kind, [y], attrs)
        outs = [y] + ([conv] if also_conv else []) + ([g.op(K.Add, [conv, conv], {})] if also_added else [])
        g.output(*outs)
        return g.compile(dg.Engine(dg.Engine.CPU, num_threads=threads))

    def inputs(self, rng, n, h, w, r_shape=None):
        x = rng.standard_normal(layout(self.fmt, n, self.c, h, w)).astype(np.float32)
        oh, ow = out_size(h, self.k, self.s, self.p), out_size(w, self.k, self.s, self.p)
        if not self.residual:
            return [x]
        r = rng.standard_normal(r_shape or layout(self.fmt, n, self.o, oh, ow)).astype(np.float32)
        r.reshape(-1)[r.size // 2] = np.nan
        return [x, r]

    def reference(self, x, r, r_op=None):
        """float64: act(conv(x) + bias + r)."""
        y = ref.conv(x, self.w, self.b, strides=[self.s] * 2, dilations=[1, 1], pads_begin=[self.p] * 2,
                     pads_end=[self.p] * 2, groups=self.attrs["groups"], fmt=self.fmt, wfmt="OIX")
        if r is not None:
            y = y + (np.abs(r) if r_op else r).astype(np.float64)
        if self.act == "relu":
            return np.where(np.isnan(y), y, np.maximum(y, 0.0))
        if self.act == "erf":
            return y * 0.5 * (1.0 + np.vectorize(math.erf, otypes=[np.float64])(y / math.sqrt(2.0)))
        return y


def nodes(cp) -> int:
    return cp.cache_info().last_graph_nodes


def assert_near(y, want, x):
    """Within a sum's rounding of the float64 reference (a wrong index or a lost residual is O(1))."""
    assert y.shape == want.shape
    np.testing.assert_array_equal(np.isnan(y), np.isnan(want))
    keep = ~np.isnan(want)
    scale = np.nanmax(np.abs(x)) * 50.0 + 10.0
    assert np.abs(y[keep] - want[keep]).max() <= 1e-5 * scale


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("fmt", ["NCX", "NXC"])
@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("residual,act", [(True, "relu"), (False, "relu"), (True, None)])
def test_the_fused_ops_have_the_bits_of_their_own_nodes(path, fmt, residual, act, threads, rng):
    case = Case(path, fmt, act, residual, rng=rng)
    fused, apart = case.compile(threads), case.compile(threads, also_conv=True)
    for n, h, w in SIZES:
        ins = case.inputs(rng, n, h, w)
        (y,) = run(fused, *ins)
        y_apart, _ = run(apart, *ins)
        assert nodes(fused) == nodes(apart) - int(residual) - int(act is not None), (n, h, w)
        np.testing.assert_array_equal(y, y_apart, err_msg=f"{path} {fmt} {n}x{h}x{w}")
        assert_near(y, case.reference(*ins, *([] if residual else [None])), ins[0])


@pytest.mark.parametrize("conv_at", [0, 1])
@pytest.mark.parametrize("bias", [True, False])
def test_either_operand_of_the_add_and_no_bias(conv_at, bias, rng):
    case = Case("winograd", "NCX", "relu", True, bias=bias, rng=rng, conv_at=conv_at)
    fused, apart = case.compile(2), case.compile(2, also_conv=True)
    for n, h, w in SIZES:
        ins = case.inputs(rng, n, h, w)
        (y,) = run(fused, *ins)
        np.testing.assert_array_equal(y, run(apart, *ins)[0])
        assert_near(y, case.reference(*ins), ins[0])


def test_gelu_and_a_residual_computed_first(rng):
    """GELU (erf) after the sum; the residual an op's output that precedes the convolution."""
    case = Case("im2col", "NXC", "erf", True, rng=rng)
    fused, apart = case.compile(2, r_op="first"), case.compile(2, r_op="first", also_conv=True)
    for n, h, w in SIZES:
        ins = case.inputs(rng, n, h, w)
        (y,) = run(fused, *ins)
        y_apart, _ = run(apart, *ins)
        assert nodes(fused) == nodes(apart) - 2
        np.testing.assert_array_equal(y, y_apart)
        assert_near(y, case.reference(*ins, r_op="first"), ins[0])


def test_a_residual_computed_after_the_convolution_is_added_apart(rng):
    """The Add's other input is made after the convolution in the program: not at hand when the
    convolution is lowered, so the Add (and the ReLU after it) stay nodes of their own."""
    case = Case("1x1", "NCX", "relu", True, rng=rng)
    cp, apart = case.compile(1, r_op="after"), case.compile(1, r_op="after", also_conv=True)
    ins = case.inputs(rng, 2, 6, 5)
    (y,) = run(cp, *ins)
    run(apart, *ins)
    assert nodes(cp) == nodes(apart)
    assert_near(y, case.reference(*ins, r_op="after"), ins[0])


def test_a_broadcast_residual_is_added_apart(rng):
    """r of [1, O, 1, 1] (one value per channel): not dst's shape, so the Add stays an op, and the ReLU
    with it; the values are the broadcast sum's."""
    case = Case("im2col", "NCX", "relu", True, rng=rng)
    cp, apart = case.compile(1, r_shape=[1, case.o, 1, 1]), case.compile(1, r_shape=[1, case.o, 1, 1], also_conv=True)
    x = rng.standard_normal((2, case.c, 9, 7)).astype(np.float32)
    r = rng.standard_normal((1, case.o, 1, 1)).astype(np.float32)
    (y,) = run(cp, x, r)
    run(apart, x, r)
    assert nodes(cp) == nodes(apart)
    assert_near(y, case.reference(x, r), x)


def test_a_second_reader_sees_the_convolution_as_it_is(rng):
    """dst read by the Add and by a second Add (dst + dst): nothing is absorbed; the second reader
    sees the convolution alone, the first output the whole sum."""
    case = Case("winograd", "NXC", "relu", True, rng=rng)
    cp = case.compile(2, also_added=True)
    ins = case.inputs(rng, 1, 12, 10)
    y, doubled = run(cp, *ins)
    _, conv = run(case.compile(2, also_conv=True), *ins)
    np.testing.assert_array_equal(doubled, conv + conv)
    assert_near(y, case.reference(*ins), ins[0])


def test_dynamic_sizes_alternate_between_winograd_and_im2col(rng):
    """Every graph built is lowered afresh: 12 outputs (im2col) and 120 (Winograd) in turn, one graph
    kept, both fused."""
    case = Case("winograd", "NCX", "relu", True, rng=rng)
    g = case.compile(2)
    for n, h, w in [(1, 3, 4), (1, 12, 10), (1, 3, 4), (1, 12, 10)]:
        ins = case.inputs(rng, n, h, w)
        (y,) = run(g, *ins)
        assert_near(y, case.reference(*ins), ins[0])


def test_a_sum_of_higher_rank_is_added_apart(rng):
    """dst [N, O, H, W] + r [1, N, O, H, W]: the same elements, but the sum has rank 5, not dst's; only a
    sum of dst's own shape is dst passed on, so this Add (and the ReLU after it) stay ops of their own."""
    case = Case("im2col", "NCX", "relu", True, rng=rng)
    cp, apart = case.compile(1, r_shape=[1, D, D, D, D]), case.compile(1, r_shape=[1, D, D, D, D], also_conv=True)
    for n, h, w in [(1, 9, 7), (2, 5, 6)]:
        x, r = case.inputs(rng, n, h, w)
        r = r[None]
        (y,) = run(cp, x, r)
        run(apart, x, r)
        assert y.shape == r.shape and nodes(cp) == nodes(apart)
        assert_near(y, case.reference(x, r), x)
