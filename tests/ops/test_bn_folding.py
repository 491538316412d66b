"""Compile-time folding of BatchNormInference into the Convolution before it
(dyngraph.passes.fold_batch_norm): the compiled program has no batch norm
left and computes what the two ops compute."""

import numpy as np
import pytest

import dyngraph as dg
from dyngraph.reference import spatial_numpy as ref

K = dg.OpKind
D = dg.DYNAMIC_DIM


def conv_bn_graph(rng, fmt="NCX", wfmt="OIX", bias=True, shared_weights=False, bn_output_too=False):
    """x -> Convolution -> BatchNormInference; with `shared_weights` plus a
    second Convolution of x with the same weights, with `bn_output_too` plus
    the first convolution's output (each added to the batch norm's)."""
    C, O = 3, 4
    w = rng.standard_normal([O, C, 3, 3] if wfmt == "OIX" else [3, 3, C, O]).astype(np.float32)
    b = rng.standard_normal(O).astype(np.float32)
    gamma, beta, mean = (rng.standard_normal(O).astype(np.float32) for _ in range(3))
    var = rng.uniform(0.5, 2.0, O).astype(np.float32)
    xs = [D, C, D, D] if fmt == "NCX" else [D, D, D, C]
    x = dg.LogicalTensor(0, dg.f32, xs, name="x")
    lw = dg.LogicalTensor(1, dg.f32, list(w.shape), property=dg.CONSTANT, name="w")
    params = [dg.LogicalTensor(10 + i, dg.f32, [O], property=dg.CONSTANT, name=n)
              for i, n in enumerate(["b", "gamma", "beta", "mean", "var"])]
    y = dg.LogicalTensor(20, dg.f32, None)
    z = dg.LogicalTensor(21, dg.f32, None)
    attrs = dict(strides=[1, 1], dilations=[1, 1], pads_begin=[1, 1], pads_end=[1, 1], data_format=fmt,
                 weights_format=wfmt)
    g = dg.Graph(dg.Engine.CPU)
    g.add_op(dg.Op(0, K.Convolution, [x, lw] + ([params[0]] if bias else []), [y], attrs))
    g.add_op(dg.Op(1, K.BatchNormInference, [y] + params[1:], [z], {"epsilon": 1e-3, "data_format": fmt}))
    outs = [z]
    if shared_weights or bn_output_too:
        other = y
        if shared_weights:
            other = dg.LogicalTensor(22, dg.f32, None)
            g.add_op(dg.Op(2, K.Convolution, [x, lw], [other], attrs))
        outs = [dg.LogicalTensor(23, dg.f32, None)]
        g.add_op(dg.Op(3, K.Add, [z, other], outs))
    g.finalize()
    (part,) = g.get_partitions()
    consts = {1: w, 10: b, 11: gamma, 12: beta, 13: mean, 14: var}
    if not bias:
        del consts[10]
    ins = [x, lw] + [p for p in params if p.id in consts]
    cp = part.compile(ins, outs, dg.Engine(dg.Engine.CPU, num_threads=1), constants=consts)

    def want(xv):
        kw = dict(pads_begin=[1, 1], pads_end=[1, 1], fmt=fmt, wfmt=wfmt)
        c = ref.conv(xv, w, b if bias else None, **kw)
        r = ref.batch_norm(c, gamma, beta, mean, var, 1e-3, fmt)
        if shared_weights:
            r = r + ref.conv(xv, w, None, **kw)
        if bn_output_too:
            r = r + c
        return r

    return cp, want


def kinds(cp):
    return [op.kind for op in cp.program.ops]


@pytest.mark.parametrize("fmt,wfmt", [("NCX", "OIX"), ("NXC", "XIO"), ("NCX", "XIO")])
@pytest.mark.parametrize("bias", [True, False])
def test_batch_norm_is_folded_into_the_convolution(fmt, wfmt, bias, rng):
    cp, want = conv_bn_graph(rng, fmt, wfmt, bias)
    assert kinds(cp) == [K.Convolution]
    for n, h in [(1, 3), (2, 8), (3, 13)]:
        x = rng.standard_normal([n, 3, h, h] if fmt == "NCX" else [n, h, h, 3]).astype(np.float32)
        (y,) = cp(x)
        np.testing.assert_allclose(y, want(x), rtol=1e-5, atol=1e-5)


def test_weights_another_op_reads_are_copied_not_changed(rng):
    cp, want = conv_bn_graph(rng, shared_weights=True)
    assert kinds(cp) == [K.Convolution, K.Convolution, K.Add]
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    (y,) = cp(x)
    np.testing.assert_allclose(y, want(x), rtol=1e-5, atol=1e-5)


def test_a_convolution_output_read_elsewhere_is_not_folded(rng):
    cp, want = conv_bn_graph(rng, bn_output_too=True)
    assert kinds(cp) == [K.Convolution, K.BatchNormInference, K.Add]
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    (y,) = cp(x)
    np.testing.assert_allclose(y, want(x), rtol=1e-5, atol=1e-5)
