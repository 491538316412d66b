"""One case per op family on every device this process has: an RPC device (a
`dyngraph rpc-server` on 127.0.0.1 serving its CPU: runs in CI) and each GPU of
the build. The same one-op partition compiled for the device and for the
host CPU, run at several dynamic sizes, agree within the device's tolerance
(the host CPU's results are checked against numpy by tests/ops). Ops whose
lowering the device cannot run go to the host CPU by themselves
(placement "auto"): the results are the same either way, and the test says
which ran where."""

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
    return dict(strides=[1, 1], dilations=[1, 1], pads_begin=[1, 1], pads_end=[1, 1], groups=1, data_format="NCX",
                weights_format="OIX", **extra)


def pool_attrs(**extra):
    return dict(kernel=[2, 2], strides=[2, 2], pads_begin=[0, 0], pads_end=[0, 0], data_format="NCX", **extra)


def f32(rng, *shape, scale=1.0):
    return (scale * rng.standard_normal(shape)).astype(np.float32)


# family -> (kind, input shapes, attrs, compile options, inputs at size n, f32 tolerance scale)
W8x16 = np.random.default_rng(1).standard_normal((8, 16)).astype(np.float32)
CONV_W = np.random.default_rng(2).standard_normal((4, 3, 3, 3)).astype(np.float32)
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
    "top-k": (K.TopK, [[D, 8]], {"k": 3, "axis": 1, "largest": True},
              {"out_dtypes": [dg.f32, dg.i64], "n_outputs": 2}, lambda r, n: [f32(r, n, 8)]),
    "quantize": (K.Quantize, [[D, 16]], {"scales": [0.05]}, {"in_dtypes": dg.f32, "out_dtypes": dg.s8},
                 lambda r, n: [f32(r, n, 16)]),
}


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
            if np.issubdtype(w.dtype, np.floating):
                scale = np.abs(w.astype(np.float64)).max() + 1e-30
                assert np.abs(g.astype(np.float64) - w).max() <= rtol * scale + (1e-3 if w.dtype == np.float16 else 0)
            elif kind is K.Quantize:  # at most one step where the two sides round a .5 tie apart
                assert np.abs(g.astype(np.int32) - w.astype(np.int32)).max() <= 1
            else:
                np.testing.assert_array_equal(g, w)
    placed = dict((name, ops) for name, ops, _ in dev.placement())
    assert sum(placed.values()) == len(dev.program.ops)
    assert placed.get("CPU (host)", 0) == dev.cache_info().host_fallback_ops
