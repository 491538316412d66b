"""One case per op family on every device this process has: an RPC device (a
`dyngraph rpc-server` on 127.0.0.1 serving its CPU: runs in CI) and each GPU of
the build. The same one-op partition compiled for the device and for the
host CPU, run at several dynamic sizes, agree within the device's tolerance
(the host CPU's results are checked against numpy by tests/ops). Ops whose
lowering the device cannot run go to the host CPU by themselves
(placement "auto"): the results are the same either way, and the test says
which ran where.

Families with a portable lowering (ggml's own ops where the host CPU runs one
of our kernels) run on the RPC device with no op on the host: a regression
that sends one back fails here. HOST_ONLY lists the cases that still fall
back, with the reason (docs/guide/devices.md says the same)."""

from __future__ import annotations

import numpy as np
import pytest

import dyngraph as dg
from oputil import compile_op, run
from deviceutil import DEVICES, device_engine
from rpcutil import one_server

K = dg.OpKind
D = dg.DYNAMIC_DIM


def conv_attrs(**extra):
    return {**dict(strides=[1, 1], dilations=[1, 1], pads_begin=[1, 1], pads_end=[1, 1], groups=1, data_format="NCX",
                   weights_format="OIX"), **extra}


def pool_attrs(**extra):
    return {**dict(kernel=[2, 2], strides=[2, 2], pads_begin=[0, 0], pads_end=[0, 0], data_format="NCX"), **extra}


def f32(rng, *shape, scale=1.0):
    return (scale * rng.standard_normal(shape)).astype(np.float32)


def specials(rng, *shape, share=0.3):
    """f32 with NaN, +-inf and +-0 at about `share` of the places."""
    x = f32(rng, *shape)
    where = rng.random(shape) < share
    x[where] = rng.choice(np.array([np.nan, np.inf, -np.inf, 0.0, -0.0], np.float32), int(where.sum()))
    return x


def pool_input(rng, n):
    """max-pool input with a window of -inf only and NaN in some windows."""
    x = specials(rng, n, 3, 4 + 2 * n, 6, share=0.1)
    x[:, 1, :2, :2] = -np.inf
    return [x]


def one_nan_per_row(rng, n, length):
    x = f32(rng, n, length)
    x[::2, 2] = np.nan
    return x


# family -> (kind, input shapes, attrs, compile options, inputs at size n, f32 tolerance scale)
W8x16 = np.random.default_rng(1).standard_normal((8, 16)).astype(np.float32)
CONV_W = np.random.default_rng(2).standard_normal((4, 3, 3, 3)).astype(np.float32)
CONV_W_XIO = np.random.default_rng(3).standard_normal((3, 2, 2, 4)).astype(np.float32)
CONV_W_1D = np.random.default_rng(4).standard_normal((5, 3, 3)).astype(np.float32)
CONV_W_G2 = np.random.default_rng(5).standard_normal((4, 2, 3, 3)).astype(np.float32)
BIAS4 = np.random.default_rng(6).standard_normal(4).astype(np.float32)
FF4 = np.array([1.0, 1.5, 4.0, 8.0], np.float32)
CASES = {
    "matmul": (K.MatMul, [[D, 8], [8, 16]], {}, {"constants": {1: W8x16}}, lambda r, n: [f32(r, n, 8)]),
    "binary-broadcast": (K.Add, [[D, 6], [6]], {}, {}, lambda r, n: [f32(r, n, 6), f32(r, 6)]),
    "maximum": (K.Maximum, [[D, 6], [D, 6]], {}, {}, lambda r, n: [f32(r, n, 6), f32(r, n, 6)]),
    "gelu": (K.GELU, [[D, 9]], {}, {}, lambda r, n: [f32(r, n, 9)]),
    "softmax": (K.SoftMax, [[D, 12]], {"axis": 1}, {}, lambda r, n: [f32(r, n, 12, scale=3)]),
    "layer-norm": (K.LayerNorm, [[D, 10]], {"use_affine": False}, {}, lambda r, n: [f32(r, n, 10)]),
    "rms-norm": (K.RMSNorm, [[D, 10]], {}, {}, lambda r, n: [f32(r, n, 10)]),
    "reduce": (K.ReduceSum, [[D, 7]], {"axes": [1]}, {}, lambda r, n: [f32(r, n, 7)]),
    "concat": (K.Concat, [[D, 3], [D, 3]], {"axis": 0}, {}, lambda r, n: [f32(r, n, 3), f32(r, n + 1, 3)]),
    "transpose": (K.StaticTranspose, [[D, 3, 5]], {"order": [2, 0, 1]}, {}, lambda r, n: [f32(r, n, 3, 5)]),
    "gather": (K.Gather, [[10, 4], [D]], {"axis": 0}, {"in_dtypes": [dg.f32, dg.i32]},
               lambda r, n: [f32(r, 10, 4), r.integers(0, 10, n).astype(np.int32)]),
    "type-cast": (K.TypeCast, [[D, 5]], {}, {"in_dtypes": dg.f32, "out_dtypes": dg.f16}, lambda r, n: [f32(r, n, 5)]),
    "cast-to-bool": (K.TypeCast, [[D, 5]], {}, {"in_dtypes": dg.f32, "out_dtypes": dg.boolean},
                     lambda r, n: [np.where(r.random((n, 5)) < 0.5, 0, f32(r, n, 5))]),
    "convolution": (K.Convolution, [[D, 3, D, D], [4, 3, 3, 3]], conv_attrs(), {"constants": {1: CONV_W}},
                    lambda r, n: [f32(r, n, 3, 5 + n, 6)]),
    "max-pool": (K.MaxPool, [[D, 3, D, D]], pool_attrs(), {}, lambda r, n: [f32(r, n, 3, 4 + 2 * n, 6)]),
    "attention-head-16": (K.ScaledDotProductAttention, [[1, 4, D, 16], [1, 2, D, 16], [1, 2, D, 16]],
                          {"is_causal": True}, {}, lambda r, n: [f32(r, 1, 4, n, 16), f32(r, 1, 2, n, 16),
                                                                   f32(r, 1, 2, n, 16)]),
    "rope": (K.RoPE, [[D, 2, 16], [D]], {"mode": "neox"}, {"in_dtypes": [dg.f32, dg.i32]},
             lambda r, n: [f32(r, n, 2, 16), r.integers(0, 4096, n).astype(np.int32)]),
    "rope-freq-factors": (K.RoPE, [[1, D, 2, 16], [D], [4]], {"mode": "normal", "base": 500.0, "rotary_dims": 8,
                                                               "attention_factor": 1.5},
                          {"in_dtypes": [dg.f32, dg.i64, dg.f32], "constants": {2: FF4}},
                          lambda r, n: [f32(r, 1, n, 2, 16), r.integers(0, 4096, n)]),
    "top-k": (K.TopK, [[D, 8]], {"k": 3, "axis": 1, "largest": True},
              {"out_dtypes": [dg.f32, dg.i64], "n_outputs": 2}, lambda r, n: [f32(r, n, 8)]),
    "quantize": (K.Quantize, [[D, 16]], {"scales": [0.05]}, {"in_dtypes": dg.f32, "out_dtypes": dg.s8},
                 lambda r, n: [f32(r, n, 16)]),
    # the portable lowerings' other forms, and the values where ggml's ops and our kernels part
    "maximum-specials": (K.Maximum, [[D, 6], [6]], {}, {}, lambda r, n: [specials(r, n, 6), specials(r, 6)]),
    "minimum-f16": (K.Minimum, [[D, 6], [D, 6]], {}, {"in_dtypes": dg.f16},
                    lambda r, n: [specials(r, n, 6).astype(np.float16), specials(r, n, 6).astype(np.float16)]),
    "gelu-tanh": (K.GELU, [[D, 9]], {"mode": "tanh"}, {}, lambda r, n: [f32(r, n, 9, scale=3)]),
    "cast-specials-to-bool": (K.TypeCast, [[D, 5]], {}, {"in_dtypes": dg.f32, "out_dtypes": dg.boolean},
                              lambda r, n: [specials(r, n, 5, share=0.6)]),
    "cast-i32-to-bool": (K.TypeCast, [[D, 5]], {}, {"in_dtypes": dg.i32, "out_dtypes": dg.boolean},
                         lambda r, n: [r.integers(-2, 3, (n, 5)).astype(np.int32)]),
    "conv-nxc-xio-bias": (K.Convolution, [[D, D, 7, 2], [3, 2, 2, 4], [4]],
                          dict(strides=[2, 1], dilations=[1, 2], pads_begin=[1, 2], pads_end=[0, 1], groups=1,
                               data_format="NXC", weights_format="XIO"),
                          {"constants": {1: CONV_W_XIO, 2: BIAS4}}, lambda r, n: [f32(r, n, 3 + n, 7, 2)]),
    "conv-1d": (K.Convolution, [[D, 3, D], [5, 3, 3]],
                dict(strides=[1], dilations=[1], pads_begin=[1], pads_end=[1], groups=1, data_format="NCX",
                     weights_format="OIX"), {"constants": {1: CONV_W_1D}}, lambda r, n: [f32(r, n, 3, 4 + n)]),
    "max-pool-specials": (K.MaxPool, [[D, 3, D, 6]], pool_attrs(), {}, pool_input),
    "max-pool-padded-nxc": (K.MaxPool, [[D, D, 7, 3]],
                            pool_attrs(kernel=[3, 3], strides=[2, 2], pads_begin=[1, 1], pads_end=[1, 0],
                                       data_format="NXC"), {}, lambda r, n: [f32(r, n, 3 + 2 * n, 7, 3)]),
    "avg-pool": (K.AvgPool, [[D, 3, D, 7]],
                 pool_attrs(kernel=[3, 3], strides=[1, 2], pads_begin=[1, 1], pads_end=[1, 1], exclude_pad=False),
                 {}, lambda r, n: [f32(r, n, 3, 2 + n, 7)]),
    "avg-pool-1d": (K.AvgPool, [[D, 2, D]], pool_attrs(kernel=[2], strides=[2], pads_begin=[0], pads_end=[0],
                                                       exclude_pad=True), {}, lambda r, n: [f32(r, n, 2, 2 * n + 2)]),
    "top-k-nan": (K.TopK, [[D, 8]], {"k": 4, "axis": 1, "largest": False},
                  {"out_dtypes": [dg.f32, dg.i64], "n_outputs": 2}, lambda r, n: [one_nan_per_row(r, n, 8)]),
    "argsort-axis-0": (K.ArgSort, [[D, 5]], {"axis": 0, "descending": True}, {"out_dtypes": dg.i64},
                       lambda r, n: [f32(r, n, 5)]),
    "logical-and": (K.LogicalAnd, [[D, 6], [6]], {}, {"in_dtypes": dg.boolean, "out_dtypes": dg.boolean},
                    lambda r, n: [r.random((n, 6)) < 0.5, r.random(6) < 0.5]),
    "logical-or": (K.LogicalOr, [[D, 1], [1, 6]], {}, {"in_dtypes": dg.boolean, "out_dtypes": dg.boolean},
                   lambda r, n: [r.random((n, 1)) < 0.5, r.random((1, 6)) < 0.5]),
    "logical-not": (K.LogicalNot, [[D, 6]], {}, {"in_dtypes": dg.boolean, "out_dtypes": dg.boolean},
                    lambda r, n: [r.random((n, 6)) < 0.5]),
    "select": (K.Select, [[D, 1], [D, 6], [6]], {}, {"in_dtypes": [dg.boolean, dg.f32, dg.f32]},
               lambda r, n: [r.random((n, 1)) < 0.5, specials(r, n, 6), specials(r, 6)]),
    "select-f16": (K.Select, [[D, 6], [D, 6], [D, 6]], {}, {"in_dtypes": [dg.boolean, dg.f16, dg.f16]},
                   lambda r, n: [r.random((n, 6)) < 0.5, specials(r, n, 6).astype(np.float16),
                                 f32(r, n, 6).astype(np.float16)]),
    # cases the portable lowerings leave to the host CPU (HOST_ONLY)
    "select-i32": (K.Select, [[D, 6], [D, 6], [D, 6]], {}, {"in_dtypes": [dg.boolean, dg.i32, dg.i32]},
                   lambda r, n: [r.random((n, 6)) < 0.5, r.integers(-2**30, 2**30, (n, 6)).astype(np.int32),
                                 r.integers(-2**30, 2**30, (n, 6)).astype(np.int32)]),
    "conv-groups": (K.Convolution, [[D, 4, D, D], [4, 2, 3, 3]], conv_attrs(groups=2), {"constants": {1: CONV_W_G2}},
                    lambda r, n: [f32(r, n, 4, 4 + n, 5)]),
    "max-pool-dilated": (K.MaxPool, [[D, 3, D, D]], pool_attrs(dilations=[2, 2]), {},
                         lambda r, n: [f32(r, n, 3, 5 + 2 * n, 6)]),
    "top-k-i32": (K.TopK, [[D, 8]], {"k": 3, "axis": 1}, {"in_dtypes": dg.i32, "out_dtypes": [dg.i32, dg.i64],
                                                           "n_outputs": 2},
                  lambda r, n: [r.permuted(np.tile(np.arange(8, dtype=np.int32), (n, 1)), axis=1)]),
}

# case -> why its op runs on the host CPU when compiled for a device (placement "auto")
HOST_ONLY = {
    "quantize": "s8/u8 are ggml I8, which ggml-cuda cannot convert to; our kernel rounds and saturates",
    "conv-groups": "im2col + one product covers one group",
    "max-pool-dilated": "ggml_pool_2d has no dilation",
    "top-k-i32": "ggml's argsort sorts f32 only (and f32 holds integers exactly only up to 2^24)",
    "select-i32": "the portable selection moves values through f32, which holds integers exactly only up to 2^24",
}
# results that select input values (no arithmetic): equal to the host CPU's, NaN for NaN, on every device
EXACT = {"maximum", "maximum-specials", "minimum-f16", "max-pool", "max-pool-specials", "max-pool-padded-nxc",
         "top-k", "top-k-nan", "argsort-axis-0", "select", "select-f16"}


@pytest.fixture(scope="module")
def server():
    yield from one_server()


@pytest.fixture(params=DEVICES)
def device(request, server):
    """(engine, relative tolerance of f32 results against the host CPU's)"""
    # ggml-cuda's f32 products are TF32 (docs/design/gpu.md)
    return device_engine(request.param, server.endpoint, timeout=30), 2e-5 if request.param == "rpc" else 2e-3


@pytest.mark.parametrize("family", sorted(CASES))
def test_an_op_family_on_a_device_matches_the_host_cpu(family, device):
    kind, shapes, attrs, opts, make = CASES[family]
    eng, rtol = device
    opts = dict(opts)
    cpu = compile_op(kind, shapes, attrs=attrs, engine=dg.Engine("cpu", num_threads=1), **opts)
    dev = compile_op(kind, shapes, attrs=attrs, engine=eng, **opts)
    rng = np.random.default_rng(len(family))
    for n in (1, 3, 8):
        ins = make(rng, n)
        want, got = run(cpu, *ins), run(dev, *ins)
        for w, g in zip(want, got):
            assert g.dtype == w.dtype and g.shape == w.shape
            if family in EXACT:
                np.testing.assert_array_equal(g, w)
            elif np.issubdtype(w.dtype, np.floating):
                scale = np.abs(w.astype(np.float64)).max() + 1e-30
                assert np.abs(g.astype(np.float64) - w).max() <= rtol * scale + (1e-3 if w.dtype == np.float16 else 0)
            elif kind is K.Quantize:  # at most one step where the two sides round a .5 tie apart
                assert np.abs(g.astype(np.int32) - w.astype(np.int32)).max() <= 1
            else:
                np.testing.assert_array_equal(g, w)
    placed = dict((name, ops) for name, ops, _ in dev.placement())
    assert sum(placed.values()) == len(dev.program.ops)
    assert placed.get("CPU (host)", 0) == dev.cache_info().host_fallback_ops
    assert sum(d == "CPU (host)" for _, _, d in dev.op_placement()) == dev.cache_info().host_fallback_ops
    if eng.kind != dg.Engine.RPC:
        return  # (a GPU's ggml backend may refuse an op at some sizes: ggml-cuda's argsort above 1024 without CUB)
    if family in HOST_ONLY:
        assert dev.cache_info().host_fallback_ops == 1, f"{family} now runs on the device: update HOST_ONLY and docs"
    else:
        assert dev.cache_info().host_fallback_ops == 0, f"{family} fell back to the host CPU: {dev.placement()}"


@pytest.mark.parametrize("batch", [1, 3])
def test_many_ropes_of_one_positions_input_are_one_split(batch, device, rng):
    """A decoder rotates q and k in every layer with one positions input, which the scheduler holds in
    host memory and copies to the device: every RoPE reads that one copy. (Each RoPE used to read a
    view of its own of the input, and past 30 such inputs the scheduler cut the graph into more splits,
    each a synchronization: SmolLM2's 60 RoPEs made 3 splits on a GPU, decode 15% slower.)"""
    eng, rtol = device
    n = 40
    b = dg.GraphBuilder()
    s = dg.Dim("s")
    pos = b.input("positions", dg.i64, [batch, s])
    ff = b.constant("ff", np.linspace(1.0, 4.0, 8).astype(np.float32))
    y = b.input("x", dg.f32, [batch, s, 2, 16])
    for _ in range(n):  # a chain: one partition
        y = b.op(K.RoPE, [y, pos, ff], {"mode": "neox", "base": 1.0, "attention_factor": 0.99})
    b.output(y)
    dev = b.compile(eng)
    cpu = b.compile(dg.Engine("cpu", num_threads=1))
    for length in (1, 5):
        # (positions below 100: forty rotations by angles of up to p radians, each rounded, part from
        # part by a GPU's powf / sincosf and the CPU's running product, drift apart by about 40 p ulps)
        ins = [rng.integers(0, 100, (batch, length)), f32(rng, batch, length, 2, 16)]
        (w,), (g,) = run(cpu, *ins), run(dev, *ins)
        assert np.abs(g - w).max() <= rtol * np.abs(w).max()
        info = dev.cache_info()
        assert info.host_fallback_ops == 0 and info.graph_splits == 1, info


@pytest.mark.parametrize("mask_dtype", [dg.boolean, dg.f32])
def test_attentions_reading_one_mask_share_its_conversion(mask_dtype, device, rng):
    """A decoder's layers read one mask: on a device it becomes the additive (and f16) mask once, not in
    every layer (a bool mask was a cast, a log and an f16 cast per layer: 90 kernels a token in a
    30-layer decoder; a causal f32 one, the triangle and its sum). Layers reading a mask each grow the
    graph by more than layers reading one."""
    eng, rtol = device

    def build(layers, shared):
        b = dg.GraphBuilder()
        s = dg.Dim("s")
        y = b.input("x", dg.f32, [1, 2, s, 16])
        masks = [b.input(f"m{i}", mask_dtype, [1, 1, s, s]) for i in range(1 if shared else layers)]
        for i in range(layers):
            y = b.op(K.ScaledDotProductAttention, [y, y, y, masks[0 if shared else i]], {"is_causal": True})
        b.output(y)
        return b

    def mask_of(n):
        keep = rng.random((1, 1, n, n)) < 0.7
        keep[..., 0] = True  # every query sees a key
        return keep if mask_dtype is dg.boolean else np.where(keep, 0.0, -np.inf).astype(np.float32)

    def nodes(layers, shared):
        cp = build(layers, shared).compile(eng)
        run(cp, f32(rng, 1, 2, 5, 16), *[mask_of(5) for _ in range(1 if shared else layers)])
        return cp.cache_info().last_graph_nodes

    assert nodes(6, True) - nodes(2, True) < nodes(6, False) - nodes(2, False)
    b = build(4, True)
    dev, cpu = b.compile(eng), b.compile(dg.Engine("cpu", num_threads=1))
    for n in (1, 6):
        ins = [f32(rng, 1, 2, n, 16), mask_of(n)]
        (w,), (g,) = run(cpu, *ins), run(dev, *ins)
        assert np.abs(g - w).max() <= max(rtol, 1e-3) * np.abs(w).max()
