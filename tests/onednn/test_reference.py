"""The numpy reference interpreter (dyngraph.reference): it covers every op
kind dyngraph has a rule for, and the backend agrees with it op by op, at
several shapes, dynamic ones included."""

import math

import numpy as np
import pytest

import dyngraph as dg
from dyngraph import onednn
from dyngraph import reference
from dyngraph.onednn import import_graph, make_overrides
from dyngraph.onednn.runner import run_case
from dyngraph.ops import registered_kinds
from dyngraph.reference.values import f32_to_bf16_bits, round_to

from .jsoncase import attr, doc, lt, op


def test_every_op_kind_with_a_rule_has_a_reference():
    missing = sorted(k.name for k in registered_kinds() - reference.supported_kinds())
    assert not missing, f"op kinds without a numpy reference (add them to dyngraph/reference): {missing}"


def _run(d, dynamic=None, bindings=()):
    imp = import_graph(d, make_overrides(dynamic=dynamic) if dynamic else None)
    res = run_case(imp, list(bindings))
    assert res.status == "pass", res.message
    return res


S = [3, 5]


@pytest.mark.parametrize("kind", ["ReLU", "SiLU", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Square", "Abs", "Neg",
                                  "Sin", "Cos"])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_unary(kind, dtype):
    _run(doc(op(0, kind, [lt(0, S, dtype)], [lt(1, S, dtype)])), "0:0:n", [{"n": 1}, {"n": 4}, {"n": 37}])


@pytest.mark.parametrize("mode", ["erf", "tanh"])
def test_gelu(mode):
    _run(doc(op(0, "GELU", [lt(0, S)], [lt(1, S)], mode=mode)), "0:0:n", [{"n": 2}, {"n": 64}])


@pytest.mark.parametrize("kind,dtype", [(k, t) for k in ("Add", "Subtract", "Multiply", "Divide", "Maximum", "Minimum")
                                        for t in ("f32", "bf16", "s32") if (k, t) != ("Divide", "s32")])
def test_binary_with_broadcasting(kind, dtype):  # (no integer division in dyngraph)
    d = doc(op(0, kind, [lt(0, [2, 3, 4], dtype), lt(1, [3, 1], dtype)], [lt(2, [2, 3, 4], dtype)]))
    _run(d, "0:0:b", [{"b": 1}, {"b": 5}])


def test_logical_binary_on_bool():
    for kind in ("Add", "Multiply", "LogicalAnd", "LogicalOr", "Equal", "NotEqual"):
        _run(doc(op(0, kind, [lt(0, S, "boolean"), lt(1, S, "boolean")], [lt(2, S, "boolean")])))


@pytest.mark.parametrize("kind", ["Equal", "NotEqual", "Greater", "GreaterEqual", "Less", "LessEqual"])
def test_comparisons(kind):
    _run(doc(op(0, kind, [lt(0, [4, 6]), lt(1, [1, 6])], [lt(2, [4, 6], "boolean")])), "0:0:n", [{"n": 9}])


def test_select_and_logical_not():
    _run(doc(op(0, "LogicalNot", [lt(0, S, "boolean")], [lt(1, S, "boolean")]),
             op(1, "Select", [lt(1, S, "boolean"), lt(2, S), lt(3, [1, 5])], [lt(4, S)])))


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True)])
def test_matmul_with_bias(ta, tb):
    a = [2, 6, 4] if ta else [2, 4, 6]
    b = [5, 6] if tb else [6, 5]
    d = doc(op(0, "MatMul", [lt(0, a), lt(1, b), lt(2, [5])], [lt(3, [2, 4, 5])], transpose_a=ta, transpose_b=tb))
    _run(d)


def test_softmax_layernorm_rmsnorm():
    _run(doc(op(0, "SoftMax", [lt(0, [2, 7, 3])], [lt(1, [2, 7, 3])], axis=1)), "0:0:b", [{"b": 1}, {"b": 6}])
    _run(doc(op(0, "LayerNorm", [lt(0, [2, 3, 8]), lt(1, [3, 8]), lt(2, [3, 8])], [lt(3, [2, 3, 8])],
                begin_norm_axis=1, epsilon=1e-3, keep_stats=False)))
    _run(doc(op(0, "LayerNorm", [lt(0, [4, 8])], [lt(1, [4, 8])], use_affine=False, keep_stats=False)))
    _run(doc(op(0, "RMSNorm", [lt(0, [4, 8]), lt(1, [8])], [lt(2, [4, 8])], epsilon=1e-6)), "0:0:n", [{"n": 3}])


@pytest.mark.parametrize("kind", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("keep", [False, True])
def test_reductions(kind, keep):
    _run(doc(op(0, kind, [lt(0, [2, 3, 4])], [lt(1, [2, 1, 4] if keep else [2, 4])], axes=[1], keep_dims=keep)))


def test_layout_ops():
    _run(doc(op(0, "StaticReshape", [lt(0, [2, 3, 4])], [lt(1, [6, 4])], shape=[-1, 4], special_zero=False),
             op(1, "StaticTranspose", [lt(1, [6, 4])], [lt(2, [4, 6])], order=[1, 0]),
             op(2, "Concat", [lt(2, [4, 6]), lt(3, [4, 2])], [lt(4, [4, 8])], axis=-1)))
    _run(doc(op(0, "Slice", [lt(0, [10, 6])], [lt(1, [3, 2])], begin=[-8, 1], end=[2**62, 5], steps=[3, 2])))


@pytest.mark.parametrize("dst", ["f16", "bf16", "s32", "boolean", "f32"])
def test_type_cast(dst):
    _run(doc(op(0, "TypeCast", [lt(0, [4, 6])], [lt(1, [4, 6], dst)])))


def test_indexing_ops():
    _run(doc(op(0, "Gather", [lt(0, [10, 4]), lt(1, [3, 2], "s32")], [lt(2, [3, 2, 4])])), "1:0:n",
         [{"n": 1}, {"n": 5}])
    _run(doc(op(0, "ScatterRows", [lt(0, [2, 8, 4]), lt(1, [3], "s64"), lt(2, [2, 3, 4])], [lt(3, [2, 8, 4])])))
    d = doc(op(0, "CopyToSlice", [lt(0, [6, 4]), lt(1, [2, 4])], [lt(2, [6, 4])]))
    d["graph"][0]["attrs"]["starts"] = attr([3, 0], "s64[]")
    _run(d)


@pytest.mark.parametrize("mode", ["normal", "neox"])
def test_rope(mode):
    d = doc(op(0, "RoPE", [lt(0, [2, 5, 3, 8]), lt(1, [5], "s32")], [lt(2, [2, 5, 3, 8])], mode=mode, base=500.0,
               rotary_dims=6))
    _run(d, "0:1:s+1:0:s", [{"s": 1}, {"s": 9}])


@pytest.mark.parametrize("mask", [None, "f32", "boolean"])
@pytest.mark.parametrize("causal", [False, True])
def test_attention(mask, causal):
    ins = [lt(0, [1, 4, 5, 8]), lt(1, [1, 2, 7, 8]), lt(2, [1, 2, 7, 8])]
    if mask:
        ins.append(lt(3, [5, 7], mask))
    _run(doc(op(0, "ScaledDotProductAttention", ins, [lt(4, [1, 4, 5, 8])], is_causal=causal)))


def test_generating_ops():
    d = doc(op(0, "GenIndex", [lt(0, [3, 4])], [lt(1, [3, 4], "s64")], axis=1),
            op(1, "Arange", [], [lt(2, [4], "s64")], start=2, end=10, step=2),
            op(2, "Add", [lt(1, [3, 4], "s64"), lt(2, [4], "s64")], [lt(3, [3, 4], "s64")]),
            op(3, "Full", [], [lt(4, [2, 3], "f16")], shape=[2, 3], value=-1.5))
    _run(d)


# -- the reference's own semantics -----------------------------------------------------------
def test_bf16_rounding_is_to_nearest_even_and_keeps_nan():
    x = np.array([1.0, 1 + 2**-8, 1 + 3 * 2**-8, np.nan, -np.inf], np.float32)
    bits = f32_to_bf16_bits(x)
    back = (bits.astype(np.uint32) << 16).view(np.float32)
    assert back[:3].tolist() == [1.0, 1.0, 1 + 4 * 2**-8]
    assert np.isnan(back[3]) and back[4] == -np.inf


def test_i32_results_wrap_around():
    assert round_to(np.array([2**31, -(2**31) - 1]), dg.i32).tolist() == [-(2**31), 2**31 - 1]


def test_attention_with_every_key_masked_gives_zeros():
    g = onednn.from_json(doc(op(0, "ScaledDotProductAttention", [lt(0, [1, 2, 8]), lt(1, [1, 3, 8]),
                                                                   lt(2, [1, 3, 8]), lt(3, [2, 3], "boolean")],
                                  [lt(4, [1, 2, 8])])))
    rng = np.random.default_rng(0)
    mask = np.array([[True, False, True], [False, False, False]])
    feeds = {0: rng.standard_normal((1, 2, 8)).astype(np.float32), 1: rng.standard_normal((1, 3, 8)).astype(np.float32),
             2: rng.standard_normal((1, 3, 8)).astype(np.float32), 3: mask}
    out = reference.run(g, feeds)[4]
    assert (out[0, 1] == 0).all()
    q, k, v = (feeds[i].astype(np.float64)[0] for i in range(3))
    s = q[0] @ k.T / math.sqrt(8)
    p = np.exp(s - s[[0, 2]].max())
    p[1] = 0
    np.testing.assert_allclose(out[0, 0], (p / p.sum()) @ v, rtol=1e-6)


def test_an_op_kind_without_a_reference_is_an_unsupported_error():
    d = doc(op(0, "Wildcard", [lt(0, [2])], [lt(1, [2])]))
    with pytest.raises(dg.UnsupportedError, match="Wildcard"):
        reference.run(onednn.from_json(d), {0: np.zeros(2, np.float32)})


def test_kept_tensors_are_the_same_and_the_others_are_dropped_after_their_last_use():
    """reference.run(keep=...) holds only the live values: what the runner's
    size estimate counts (a chain of n ops holds two tensors, not n)."""
    chain = [op(i, "Exp" if i % 2 else "Tanh", [lt(i, [3, 4])], [lt(i + 1, [3, 4])]) for i in range(6)]
    g = onednn.from_json(doc(*chain))
    x = {0: np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32) * 0.1}
    every = reference.run(g, x)
    kept = reference.run(g, x, keep={6, 3})
    assert sorted(kept) == [3, 6]
    for t in (3, 6):
        np.testing.assert_array_equal(kept[t], every[t])


def test_the_runner_sizes_a_case_by_what_its_reference_holds_at_once():
    from dyngraph.onednn.reader import import_graph
    from dyngraph.onednn.runner import run_case

    chain = [op(i, "ReLU", [lt(i, [1024, 1024])], [lt(i + 1, [1024, 1024])]) for i in range(8)]
    imp = import_graph(doc(*chain))
    # 9 tensors of 8 MiB in float64 (72 MiB together): at most 2 live at once in the reference
    assert run_case(imp, max_bytes=17 << 20).status == "pass"
    r = run_case(imp, max_bytes=15 << 20)
    assert r.status == "unsupported" and r.features == ("a case larger than the size limit",)
