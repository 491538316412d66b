"""BatchNormForwardTraining, which the importer makes of several dyngraph ops,
against the formulas of oneDNN's page (float64 numpy): batch mean and biased
variance over every axis but the channel one, dst normalized with them, and
the running statistics as oneDNN's graph backend updates them (momentum *
given + (1 - momentum) * batch, momentum 0.5 where the file gives none)."""

import numpy as np
import pytest

from dyngraph.errors import GraphError, UnsupportedError
from dyngraph.onednn import import_graph

from .jsoncase import doc, lt, op, run_json


def bn_doc(shape, fmt, **attrs):
    c = shape[1] if fmt == "NCX" else shape[-1]
    ins = [lt(0, shape)] + [lt(i, [c]) for i in (1, 2, 3, 4)]
    outs = [lt(5, shape)] + [lt(i, [c]) for i in (6, 7, 8, 9)]
    return doc(op(0, "BatchNormForwardTraining", ins, outs, data_format=fmt, **attrs))


@pytest.mark.parametrize("shape,fmt,momentum", [((2, 3, 4, 5), "NCX", None), ((3, 5, 4), "NXC", 0.1),
                                               ((4, 6), "NCX", 0.9), ((2, 3, 3, 7), "NXC", None)])
def test_batch_norm_training_matches_onednns_formulas(shape, fmt, momentum, rng):
    extra = {} if momentum is None else {"momentum": momentum}
    d = bn_doc(shape, fmt, epsilon=0.0625, **extra)
    ch = 1 if fmt == "NCX" else len(shape) - 1
    c = shape[ch]
    x = (3 * rng.standard_normal(shape) + 1).astype(np.float32)
    mean, var, gamma, beta = (rng.standard_normal(c).astype(np.float32) for _ in range(4))
    var = np.abs(var)
    got = run_json(d, {0: x, 1: mean, 2: var, 3: gamma, 4: beta})
    axes = tuple(a for a in range(len(shape)) if a != ch)
    x64 = x.astype(np.float64)
    mu, sig2 = x64.mean(axes), x64.var(axes)
    at = [1] * len(shape)
    at[ch] = c
    want_y = (x64 - mu.reshape(at)) / np.sqrt(sig2.reshape(at) + 0.0625) * gamma.reshape(at) + beta.reshape(at)
    m = 0.5 if momentum is None else momentum
    np.testing.assert_allclose(got[5], want_y, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[8], mu, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[9], sig2, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[6], m * mean + (1 - m) * mu, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[7], m * var + (1 - m) * sig2, rtol=1e-5, atol=1e-6)


def test_batch_norm_training_without_gamma_and_beta_is_refused_by_name():
    shape = (2, 3, 4)
    d = doc(op(0, "BatchNormForwardTraining", [lt(0, shape), lt(1, [3]), lt(2, [3])],
               [lt(5, shape)] + [lt(i, [3]) for i in (6, 7, 8, 9)], data_format="NCX", epsilon=0.1))
    with pytest.raises(UnsupportedError, match="without gamma and beta"):
        import_graph(d).graph.get_partitions()


@pytest.mark.parametrize("bad,match", [({"data_format": "NHWC"}, "NCX or NXC"), ({}, "epsilon")])
def test_batch_norm_training_with_bad_attributes_is_a_graph_error(bad, match):
    attrs = {"data_format": "NCX", "epsilon": 0.1, **bad}
    if not bad:
        attrs.pop("epsilon")
    with pytest.raises(GraphError, match=match):
        import_graph(bn_doc((2, 3, 4), **{"fmt": attrs.pop("data_format")}, **attrs))
