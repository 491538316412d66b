"""oneDNN's op kinds and attributes mapped to dyngraph's: computed as oneDNN
defines them (checked against numpy written from oneDNN's operation pages,
not against dyngraph's reference), and what dyngraph lacks refused by name."""

import math

import numpy as np
import pytest

import dyngraph as dg
from dyngraph import onednn
from dyngraph.onednn import import_graph
from dyngraph.onednn.options import Overrides

from .jsoncase import attr, doc, lt, op, run_json, unary

_erf = np.vectorize(math.erf)


def softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("mode", [None, "gelu_erf", "gelu_tanh"])
def test_gelu_modes(mode, rng):
    d = unary("GELU", (3, 17), **({"mode": mode} if mode else {}))
    x = rng.standard_normal((3, 17)).astype(np.float32) * 3
    (y,) = run_json(d, {0: x}).values()
    if mode == "gelu_tanh":
        want = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x.astype(np.float64) ** 3)))
    else:  # oneDNN's default is the exact (erf) form
        want = 0.5 * x * (1 + _erf(x.astype(np.float64) / math.sqrt(2)))
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)


def test_softmax_axis_defaults_to_1_as_in_onednn(rng):
    d = unary("SoftMax", (2, 5, 3))
    x = rng.standard_normal((2, 5, 3)).astype(np.float32)
    (y,) = run_json(d, {0: x}).values()
    np.testing.assert_allclose(y, softmax(x.astype(np.float64), 1), rtol=1e-5, atol=1e-7)


def _inf_rows(rng):
    x = rng.standard_normal((2, 3, 6)).astype(np.float32)
    x[0, 1, :] = -np.inf          # a whole row masked
    x[1, 2, :3] = -np.inf         # part of a row masked
    return x


def test_softmax_inf_as_zero_gives_zeros_for_a_row_of_minus_inf(rng):
    d = unary("SoftMax", (2, 3, 6), axis=-1, mode="inf_as_zero")
    x = _inf_rows(rng)
    (y,) = run_json(d, {0: x}).values()
    with np.errstate(invalid="ignore"):
        want = softmax(x.astype(np.float64), -1)
    want[np.isneginf(x).all(axis=-1)] = 0.0
    assert not np.isnan(y).any()
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-7)


def test_softmax_mode_none_keeps_the_nan_of_a_row_of_minus_inf(rng):
    d = unary("SoftMax", (2, 3, 6), axis=-1, mode="none")
    (y,) = run_json(d, {0: _inf_rows(rng)}).values()
    assert np.isnan(y[0, 1]).all() and not np.isnan(y[1]).any()


@pytest.mark.parametrize("axis", [1.5, "1", True])
def test_softmax_decompositions_refuse_an_axis_that_is_not_an_integer(axis):
    """mode=inf_as_zero and the stats output are decomposed before the op's attributes are checked:
    a hostile file's axis is a typed error there too (it was a TypeError)."""
    d = unary("SoftMax", (2, 3), axis=axis, mode="inf_as_zero")
    with pytest.raises(dg.GraphError, match="'axis' must be an integer"):
        import_graph(d, Overrides())


def test_softmax_inf_as_zero_is_refused_by_name_without_decomposition():
    d = unary("SoftMax", (2, 3), axis=-1, mode="inf_as_zero")
    with pytest.raises(dg.UnsupportedError) as e:
        import_graph(d, Overrides(), decompose=False)
    assert e.value.features == ("SoftMax mode=inf_as_zero",)


def test_layernorm_defaults_are_onednns(rng):
    x = rng.standard_normal((4, 6)).astype(np.float32)
    g = rng.standard_normal(6).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    d = doc(op(0, "LayerNorm", [lt(0, [4, 6]), lt(1, [6]), lt(2, [6])], [lt(3, [4, 6])]))
    (y,) = run_json(d, {0: x, 1: g, 2: b}).values()
    x64 = x.astype(np.float64)
    want = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-5) * g + b
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


def test_rmsnorm_epsilon_defaults_to_onednns_1e_5(rng):
    x = (rng.standard_normal((3, 8)) * 2e-3).astype(np.float32)  # mean(x^2) ~ 4e-6: epsilon matters
    d = doc(op(0, "RMSNorm", [lt(0, [3, 8]), lt(1, [8])], [lt(2, [3, 8])]))
    (y,) = run_json(d, {0: x, 1: np.ones(8, np.float32)}).values()
    x64 = x.astype(np.float64)
    want = x64 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(y, want, rtol=1e-5)
    assert not np.allclose(y, x64 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + 1e-6), rtol=1e-3)


@pytest.mark.parametrize("mode", ["strict", "relaxed", "any", "f32"])
def test_matmul_with_transposes_and_an_f32_accumulation_mode(mode, rng):
    a = rng.standard_normal((2, 5, 3)).astype(np.float32)
    b = rng.standard_normal((2, 4, 3)).astype(np.float32)
    d = doc(op(0, "MatMul", [lt(0, [2, 5, 3]), lt(1, [2, 4, 3])], [lt(2, [2, 5, 4])],
               transpose_a=False, transpose_b=True, accumulation_mode=mode))
    (y,) = run_json(d, {0: a, 1: b}).values()
    np.testing.assert_allclose(y, a @ b.transpose(0, 2, 1), rtol=1e-5, atol=1e-6)


def test_biasadd_ncx_adds_along_axis_1(rng):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    bias = rng.standard_normal(3).astype(np.float32)
    d = doc(op(0, "BiasAdd", [lt(0, [2, 3, 4]), lt(1, [3])], [lt(2, [2, 3, 4])], data_format="NCX"))
    (y,) = run_json(d, {0: x, 1: bias}).values()
    np.testing.assert_allclose(y, x + bias[None, :, None], rtol=1e-6)


def test_reorder_copies_the_values(rng):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    (y,) = run_json(unary("Reorder", (3, 4)), {0: x}).values()
    np.testing.assert_array_equal(y, x)


def test_causal_mask_from_genindex_greaterequal_select(rng):
    s = [1, 2, 4, 4]
    d = doc(
        op(0, "GenIndex", [lt(0, s)], [lt(1, s, "s32")], axis=2),
        op(1, "GenIndex", [lt(0, s)], [lt(2, s, "s32")], axis=3),
        op(2, "GreaterEqual", [lt(1, s, "s32"), lt(2, s, "s32")], [lt(3, s, "boolean")]),
        op(3, "Select", [lt(3, s, "boolean"), lt(0, s), lt(4, [1])], [lt(5, s)]),
    )
    x = rng.standard_normal(s).astype(np.float32)
    low = np.float32(-1e9)
    (y,) = run_json(d, {0: x, 4: np.array([low], np.float32)}).values()
    i, j = np.meshgrid(np.arange(4), np.arange(4), indexing="ij")
    np.testing.assert_array_equal(y, np.where(i >= j, x, low))


def test_typecast_to_bf16_rounds_to_nearest_even():
    x = np.array([[1.0, 1.00390625, 1.01171875, -3.5]], np.float32)  # 1 + 2^-8 is a tie: rounds to 1
    (y,) = run_json(unary("TypeCast", (1, 4), "f32") | {"graph": [op(0, "TypeCast", [lt(0, [1, 4])],
                                                                         [lt(1, [1, 4], "bf16")])]}, {0: x}).values()
    back = _from_bf16(y)
    np.testing.assert_array_equal(back, [[1.0, 1.0, 1.015625, -3.5]])


def _bf16(rng, shape):
    """Values exact in bf16: (their f32 values, their bf16 bits)."""
    bits = (rng.standard_normal(shape).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return (bits.astype(np.uint32) << 16).view(np.float32), bits


def _from_bf16(y):
    """f32 values of a bf16 output: uint16 bits, or ml_dtypes' bfloat16 where it is installed."""
    return (np.asarray(y).view(np.uint16).astype(np.uint32) << 16).view(np.float32)


def test_bf16_matmul_writing_f32_accumulates_in_f32(rng):
    a, a_bits = _bf16(rng, (3, 4, 16))
    b, b_bits = _bf16(rng, (16, 5))
    d = doc(op(0, "MatMul", [lt(0, [3, 4, 16], "bf16"), lt(1, [16, 5], "bf16")], [lt(2, [3, 4, 5], "f32")]))
    (y,) = run_json(d, {0: a_bits, 1: b_bits}).values()
    assert y.dtype == np.float32  # not rounded to bf16 on the way
    np.testing.assert_allclose(y, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


def test_binary_ops_take_f32_with_bf16_as_onednn_does(rng):
    x = rng.standard_normal((2, 3)).astype(np.float32)
    w, w_bits = _bf16(rng, (3,))
    d = doc(op(0, "Multiply", [lt(0, [2, 3], "f32"), lt(1, [3], "bf16")], [lt(2, [2, 3], "f32")]))
    (y,) = run_json(d, {0: x, 1: w_bits}).values()
    np.testing.assert_allclose(y, x * w, rtol=1e-6)


def test_bf16_layernorm_with_f32_gamma_rounds_its_f32_result_once(rng):
    x, x_bits = _bf16(rng, (4, 8))
    gamma, beta = rng.standard_normal(8).astype(np.float32), rng.standard_normal(8).astype(np.float32)
    d = doc(op(0, "LayerNorm", [lt(0, [4, 8], "bf16"), lt(1, [8]), lt(2, [8])], [lt(3, [4, 8], "bf16")],
               keep_stats=False))
    (y,) = run_json(d, {0: x_bits, 1: gamma, 2: beta}).values()
    x64 = x.astype(np.float64)
    want = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-5) * gamma + beta
    np.testing.assert_allclose(_from_bf16(y), want, rtol=2 ** -8, atol=2 ** -8)


def _logsumexp(x, axis):
    m = x.max(axis=axis, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return m + np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def test_softmax_stats_output_is_the_logsumexp_of_the_row(rng):
    x = rng.standard_normal((2, 3, 6)).astype(np.float32) * 4
    d = doc(op(0, "SoftMax", [lt(0, [2, 3, 6])], [lt(1, [2, 3, 6]), lt(2, [2, 3, 1])], axis=-1))
    got = run_json(d, {0: x})
    np.testing.assert_allclose(got[1], softmax(x.astype(np.float64), -1), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(got[2], _logsumexp(x.astype(np.float64), -1), rtol=1e-5, atol=1e-6)


def test_softmax_stats_with_inf_as_zero_in_bf16_gives_minus_inf_for_a_row_of_minus_inf(rng):
    x = _inf_rows(rng)
    x_bits = (x.view(np.uint32) >> 16).astype(np.uint16)
    x = _from_bf16(x_bits)
    d = doc(op(0, "SoftMax", [lt(0, [2, 3, 6], "bf16")], [lt(1, [2, 3, 6], "bf16"), lt(2, [2, 3, 1], "f32")],
               axis=-1, mode="inf_as_zero"))
    got = run_json(d, {0: x_bits})
    with np.errstate(invalid="ignore"):
        want = softmax(x.astype(np.float64), -1)
    want[np.isneginf(x).all(axis=-1)] = 0.0
    np.testing.assert_allclose(_from_bf16(got[1]), want, rtol=2 ** -8, atol=1e-7)
    stats = _logsumexp(x.astype(np.float64), -1)
    stats[np.isneginf(x).all(axis=-1, keepdims=True)] = -np.inf  # log of an empty sum, not numpy's NaN
    assert np.isneginf(got[2][0, 1, 0]) and not np.isnan(got[2]).any()
    np.testing.assert_allclose(got[2], stats, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["ReduceL1", "ReduceL2"])
@pytest.mark.parametrize("keep_dims", [False, True])
def test_reduce_l1_and_l2_are_the_norms_of_onednns_page(kind, keep_dims, rng):
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    out_shape = [3, 1, 5] if keep_dims else [3, 5]
    d = doc(op(0, kind, [lt(0, [3, 4, 5])], [lt(1, out_shape)], axes=[1], keep_dims=keep_dims))
    (y,) = run_json(d, {0: x}).values()
    x64 = x.astype(np.float64)
    want = (np.abs(x64).sum(1, keepdims=keep_dims) if kind == "ReduceL1"
            else np.sqrt((x64 * x64).sum(1, keepdims=keep_dims)))
    np.testing.assert_allclose(y, want, rtol=1e-5)


def test_log_softmax_is_x_minus_the_logsumexp_of_its_row(rng):
    x = rng.standard_normal((2, 7)).astype(np.float32) * 10
    (y,) = run_json(doc(op(0, "LogSoftmax", [lt(0, [2, 7])], [lt(1, [2, 7])])), {0: x}).values()  # axis -1
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(y, x64 - _logsumexp(x64, -1), rtol=1e-5, atol=1e-5)


def test_composed_kinds_are_refused_by_name_without_decomposition():
    d = doc(op(0, "LogSoftmax", [lt(0, [2, 7])], [lt(1, [2, 7])]))
    with pytest.raises(dg.UnsupportedError) as e:
        import_graph(d, decompose=False)
    assert e.value.features == ("op kind LogSoftmax",)
    d = doc(op(0, "MatMul", [lt(0, [2, 3], "bf16"), lt(1, [3, 2], "bf16")], [lt(2, [2, 2], "f32")]))
    with pytest.raises(dg.UnsupportedError) as e:
        import_graph(d, decompose=False)
    assert e.value.features == ("mixed precision (MatMul)",)


# -- refusals ----------------------------------------------------------------------------------
def _refused(d):
    with pytest.raises(dg.UnsupportedError) as e:
        onednn.from_json(d)
    return e.value.features


def test_an_op_kind_dyngraph_lacks_is_named():
    d = doc(op(0, "SoftPlusBackward", [lt(0, [2, 3]), lt(1, [2, 3])], [lt(3, [2, 3])]))
    assert _refused(d) == ("op kind SoftPlusBackward (training)",)


def test_dropout_maps_to_dyngraphs_with_its_optional_mask():
    d = doc(op(0, "Dropout", [lt(0, [2, 3]), lt(1, [], "s64"), lt(2, [], "s64"), lt(3, [])],
               [lt(4, [2, 3]), lt(5, [2, 3], "u8")]))
    g = onednn.from_json(d)
    (o,) = g.get_ops()
    assert o.kind is dg.OpKind.Dropout and [lt.dtype for lt in o.outputs] == [dg.f32, dg.u8]


def test_training_kinds_and_a_dtype_dyngraph_lacks_say_so():
    assert _refused(unary("ReLUBackward")) == ("op kind ReLUBackward (training)",)
    # every oneDNN data type but f64 has a dyngraph one
    d = doc(op(0, "TypeCast", [lt(0, [2, 3], "f64")], [lt(1, [2, 3])]))
    assert _refused(d) == ("dtype f64",)


def test_every_gap_of_a_file_is_named_at_once():
    d = doc(
        op(0, "TypeCast", [lt(0, [2, 3], "f64")], [lt(1, [2, 3])]),
        op(1, "AbsBackward", [lt(1, [2, 3]), lt(8, [2, 3])], [lt(2, [2, 3])]),
        op(2, "MatMul", [lt(2, [2, 3]), lt(7, [3, 2])], [lt(3, [2, 2])], accumulation_mode="f16"),
    )
    assert set(_refused(d)) == {"dtype f64", "op kind AbsBackward (training)", "MatMul attribute accumulation_mode=f16"}


def test_layernorm_keep_stats_without_the_stats_outputs_is_named():
    d = doc(op(0, "LayerNorm", [lt(0, [2, 3])], [lt(1, [2, 3])], keep_stats=True, use_affine=False))
    assert _refused(d) == ("LayerNorm keep_stats",)


def test_an_attribute_value_dyngraph_lacks_is_named():
    d = doc(op(0, "MatMul", [lt(0, [2, 3]), lt(1, [3, 2])], [lt(2, [2, 2])], accumulation_mode="f16"))
    assert _refused(d) == ("MatMul attribute accumulation_mode=f16",)


def test_a_mixed_precision_the_mapping_lacks_is_named():
    d = doc(op(0, "BiasAdd", [lt(0, [2, 3], "bf16"), lt(1, [3], "f32")], [lt(2, [2, 3], "f32")]))
    assert _refused(d) == ("mixed precision (BiasAdd)",)


def test_a_rank_the_op_does_not_take_is_named():
    d = doc(op(0, "Dequantize", [lt(0, [1, 2, 1, 2, 2], "u8")], [lt(1, [1, 2, 1, 2, 2])], scales=[0.5]))
    assert _refused(d) == ("rank 5 tensors (Dequantize)",)
    d = doc(op(0, "MatMul", [lt(0, [1, 2, 1, 2, 2]), lt(1, [2, 3])], [lt(2, [1, 2, 1, 2, 3])]))  # MatMul takes rank 6
    assert onednn.from_json(d).get_ops()[0].kind is dg.OpKind.MatMul
    d = doc(op(0, "ReLU", [lt(0, [1, 2, 1, 2, 2, 1, 2])], [lt(1, [1, 2, 1, 2, 2, 1, 2])]))
    assert _refused(d) == ("rank 7 tensors",)
    d = doc(op(0, "ReLU", [lt(0, [1, 2, 1, 2, 2])], [lt(1, [1, 2, 1, 2, 2])]))  # elementwise kinds take rank 6
    assert onednn.from_json(d).get_ops()[0].kind is dg.OpKind.ReLU


def test_the_axes_input_of_a_reduction_is_named():
    d = doc(op(0, "ReduceSum", [lt(0, [2, 3]), lt(1, [1], "s32")], [lt(2, [2])]))
    assert _refused(d) == ("ReduceSum input axes",)


def test_with_wildcards_unsupported_ops_stay_in_the_graph_as_partitions_of_their_own():
    d = doc(
        op(0, "ReLU", [lt(0, [2, 3])], [lt(1, [2, 3])]),
        op(1, "AbsBackward", [lt(1, [2, 3]), lt(8, [2, 3])], [lt(2, [2, 3])]),
        op(2, "Exp", [lt(2, [2, 3])], [lt(3, [2, 3])]),
    )
    imp = import_graph(d, wildcards=True)
    parts = imp.graph.get_partitions()
    assert [p.is_supported() for p in parts] == [True, False, True]
    assert imp.onednn_kinds[1] == "AbsBackward"


def test_an_f32_attribute_keeps_its_value():
    d = unary("ReLU")
    d["graph"][0]["attrs"]["alpha"] = attr(0.1, "f32")  # ReLU has no alpha in either library
    assert _refused(d) == ("ReLU attribute alpha=0.1",)
