"""Lowerings that make fewer ggml nodes than ops, on the host CPU and on every device this process
has (an RPC device serving its CPU, which CI runs, and each GPU of the build): silu(g) * u as one
ggml_swiglu_split, a broadcast sum or product without a repeated copy, and on a device transposes
handed on as views to readers that copy what they need themselves. Each is checked against numpy or
the host CPU at several dynamic sizes, and by the node count of the graph it builds (what a GPU
launches per call: a decoder's MLP was four kernels where ggml-cuda fuses one)."""

from __future__ import annotations

import numpy as np
import pytest

import dyngraph as dg
from deviceutil import DEVICES, device_engine
from oputil import run
from rpcutil import one_server

K = dg.OpKind


@pytest.fixture(scope="module")
def server():
    yield from one_server()


@pytest.fixture(params=["cpu"] + DEVICES)
def engine(request, server):
    """(engine, relative tolerance of elementwise f32 results against numpy, of single sums and
    products: 0, IEEE-exact on every device)"""
    if request.param == "cpu":
        return dg.Engine("cpu", num_threads=1), 2e-6, 0.0
    # (a GPU's silu may take a fast exp: a few ulps more; not yet run on one with these bounds)
    return device_engine(request.param, server.endpoint, timeout=30), 2e-6 if request.param == "rpc" else 1e-5, 0.0


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def silu(x):
    return x / (1.0 + np.exp(-x.astype(np.float64)))


def nodes(cp, *inputs) -> int:
    run(cp, *inputs)
    return cp.cache_info().last_graph_nodes


def close(got, want, rtol):
    return np.abs(got - want).max() <= rtol * max(np.abs(want).max(), 1.0)


@pytest.mark.parametrize("silu_first", [True, False])
def test_silu_times_a_tensor_is_one_op(engine, rng, silu_first):
    eng, rtol, _ = engine
    b = dg.GraphBuilder()
    s = dg.Dim("s")
    g, u = b.input("g", dg.f32, [s, 24]), b.input("u", dg.f32, [s, 24])
    a = b.op(K.SiLU, [g])
    b.output(b.op(K.Multiply, [a, u] if silu_first else [u, a]))
    cp = b.compile(eng)
    alone = dg.GraphBuilder()
    alone.output(alone.op(K.SiLU, [alone.input("g", dg.f32, [dg.Dim("s"), 24])]))
    silu_alone = alone.compile(eng)
    for n in (1, 5, 17):
        gv, uv = f32(rng, n, 24) * 4, f32(rng, n, 24)
        (y,) = run(cp, gv, uv)
        assert close(y, silu(gv) * uv, rtol)
        # the product costs no node of its own: one swiglu, as the SiLU alone is one node
        assert nodes(cp, gv, uv) == nodes(silu_alone, gv)


def test_a_silu_read_elsewhere_or_broadcast_is_not_fused(engine, rng):
    """A SiLU that is also a partition output stays computed; a product that broadcasts takes the
    plain path. Either way the values are the same."""
    eng, rtol, _ = engine
    b = dg.GraphBuilder()
    s = dg.Dim("s")
    g, u, w = b.input("g", dg.f32, [s, 8]), b.input("u", dg.f32, [s, 8]), b.input("w", dg.f32, [8])
    a = b.op(K.SiLU, [g])
    p = b.op(K.Multiply, [a, u])
    b.output(p, a, b.op(K.Multiply, [b.op(K.SiLU, [p]), w]))
    cp = b.compile(eng)
    for n in (1, 6):
        gv, uv, wv = f32(rng, n, 8), f32(rng, n, 8), f32(rng, 8)
        prod, act, bcast = run(cp, gv, uv, wv)
        assert close(act, silu(gv), rtol) and close(prod, silu(gv) * uv, rtol)
        assert close(bcast, silu(prod) * wv, rtol)


@pytest.mark.parametrize("kind,fn", [(K.Add, np.add), (K.Multiply, np.multiply)])
def test_a_broadcast_sum_or_product_copies_nothing(engine, rng, kind, fn):
    """An RMSNorm's weight times its rows: the smaller operand first (as models write it) is read
    broadcast, not repeated to the rows' shape by a copy first. Sums and products are exact either
    way round."""
    eng, _, exact = engine
    b = dg.GraphBuilder()
    w, x = b.input("w", dg.f32, [32]), b.input("x", dg.f32, [dg.Dim("s"), 32])
    b.output(b.op(kind, [w, x]))
    cp = b.compile(eng)
    sub = dg.GraphBuilder()  # (a difference does not commute: its broadcast first operand is repeated)
    sub.output(sub.op(K.Subtract, [sub.input("w", dg.f32, [32]), sub.input("x", dg.f32, [dg.Dim("s"), 32])]))
    csub = sub.compile(eng)
    for n in (1, 3, 9):
        wv, xv = f32(rng, 32), f32(rng, n, 32)
        (y,) = run(cp, wv, xv)
        assert close(y, fn(wv, xv), exact)
        (d,) = run(csub, wv, xv)
        assert close(d, wv - xv, exact)
        assert nodes(cp, wv, xv) == 1 and nodes(csub, wv, xv) == (2 if n > 1 else 1)


ROPE = {"mode": "neox", "base": 10000.0}


def rope_graph(transposed: bool) -> dg.GraphBuilder:
    """x [1, s, 4, 64] rotated; `transposed`: as a model rotates [b, h, s, d], between two transposes
    (the PyTorch front end's RoPE takes [b, s, h, d]), then read by attention as [b, h, s, d]."""
    b = dg.GraphBuilder()
    s = dg.Dim("s")
    x, pos = b.input("x", dg.f32, [1, s, 4, 64]), b.input("positions", dg.i64, [1, s])
    swap = {"order": [0, 2, 1, 3]}
    if transposed:
        x = b.op(K.StaticTranspose, [b.op(K.StaticTranspose, [x], swap)], swap)
    r = b.op(K.RoPE, [x, pos], ROPE)
    q = b.op(K.StaticTranspose, [r], swap)
    o = b.op(K.ScaledDotProductAttention, [q, q, q], {"is_causal": True})
    b.output(b.op(K.StaticReshape, [b.op(K.StaticTranspose, [o], swap)], {"shape": [1, s, 256]}))
    return b


@pytest.mark.skipif(not DEVICES, reason="no device in this build")
@pytest.mark.parametrize("name", DEVICES)
def test_transposes_on_a_device_are_views_for_readers_that_copy(name, server, rng):
    """On a device, a transpose read by a RoPE, an attention, a cache write or another transpose stays
    a view (they copy what they need, once), and attention's [b, h, s, d] output read by the merge of
    its heads is flash attention's own rows: the two transposes around the RoPE add two views, no copy."""
    eng = device_engine(name, server.endpoint, timeout=30)
    rtol = 2e-5 if name == "rpc" else 2e-3
    plain, wrapped = rope_graph(False), rope_graph(True)
    dev, cpu = wrapped.compile(eng), wrapped.compile(dg.Engine("cpu", num_threads=1))
    bare = plain.compile(eng)
    for n in (1, 7):
        ins = [f32(rng, 1, n, 4, 64), rng.integers(0, 50, (1, n))]
        (w,), (g,) = run(cpu, *ins), run(dev, *ins)
        assert close(g, w, rtol)
        assert nodes(dev, *ins) == nodes(bare, *ins) + 2
    assert dev.cache_info().host_fallback_ops == 0
