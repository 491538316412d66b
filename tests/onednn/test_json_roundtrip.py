"""onednn.to_json / onednn.from_json: from_json(to_json(g)) is the same graph,
on every graph at hand: oneDNN's cases, the Llama decoder (symbolic dims,
state, dyngraph-only ops), and graphs written for the purpose."""

import glob
import json
import math
import os

import numpy as np
import pytest

import dyngraph as dg
from dyngraph import onednn
from dyngraph.models.llama import LlamaConfig, build, random_weights
from dyngraph.onednn import import_graph
from dyngraph.ops import schema_of
from dyngraph.ops.registry import normalize_attrs
from dyngraph.symbolic import Expr

K = dg.OpKind


def _value(v):
    if isinstance(v, Expr):
        if v.is_const:
            return v.value
        return ("expr", str(v), tuple(sorted((s.name, s.min, s.max) for s in v.free_symbols())))
    if isinstance(v, (list, tuple)):
        return tuple(_value(x) for x in v)
    if isinstance(v, float) and math.isnan(v):
        return "nan"
    return v


def _lt(lt):
    shape = None if lt.shape is None else tuple(
        "UNKNOWN" if d is dg.UNKNOWN_DIM else "DYNAMIC" if d is dg.DYNAMIC_DIM else _value(d) for d in lt.shape)
    return (lt.id, lt.dtype, shape, lt.property, lt.name)


def canon(g):
    """Everything that makes a graph what it is: ops (kind, name, attributes
    with defaults, inputs and outputs as declared) and every tensor as finalized."""
    ops = {}
    for o in g.get_ops():
        schema = schema_of(o.kind)
        attrs = normalize_attrs(schema, dict(o.attrs), o.label) if schema else dict(o.attrs)
        ops[o.id] = (o.kind, o.name, {k: _value(v) for k, v in attrs.items()},
                     [_lt(t) for t in o.inputs], [_lt(t) for t in o.outputs])
    tensors = {}
    if g.is_finalized:
        ids = {t.id for o in g.get_ops() for t in o.inputs + o.outputs}
        tensors = {i: _lt(g.logical_tensor(i)) for i in ids}
    return ops, tensors


def assert_round_trip(g):
    text = onednn.to_json(g)
    g2 = onednn.from_json(text)
    assert canon(g2) == canon(g)
    assert onednn.to_json(g2) == text  # and writing it again gives the same file
    return text


def _case_files():
    from .conformance import CASES

    return sorted(glob.glob(os.path.join(CASES, "**", "*.json"), recursive=True))


def test_round_trip_of_every_onednn_case_dyngraph_imports(cases_dir):
    n = 0
    for f in _case_files():
        try:
            g = onednn.from_json(f)
        except dg.DyngraphError:
            continue
        assert_round_trip(g)
        n += 1
    assert n >= 60


def test_round_trip_of_every_onednn_case_with_its_unsupported_ops_as_wildcards(cases_dir):
    n = 0
    for f in _case_files():
        try:
            g = import_graph(f, wildcards=True).graph
        except dg.DyngraphError:
            continue  # one file declares a tensor with two shapes
        assert_round_trip(g)
        n += 1
    assert n >= 280


def test_a_plain_graph_is_written_as_plain_onednn_json(cases_dir):
    from .conformance import CASES

    g = onednn.from_json(os.path.join(CASES, "complex_fusion/mha/MHA-bert_large-inf-fp32-bs1.json"))
    d = json.loads(onednn.to_json(g))
    assert set(d) == {"version", "engine_kind", "fpmath_mode", "input_ports", "output_ports", "graph"}
    for o in d["graph"]:
        assert set(o) == {"id", "name", "kind", "attrs", "inputs", "outputs"}
        for t in o["inputs"] + o["outputs"]:
            assert set(t) == {"id", "dtype", "shape", "stride", "layout_type", "property_type"}
        assert all(a["type"] in ("bool", "s64", "s64[]", "f32", "f32[]", "string") for a in o["attrs"].values())


def test_round_trip_of_the_llama_decoder():
    cfg = LlamaConfig(vocab=64, hidden=32, layers=2, heads=4, kv_heads=2, ffn=48, max_seq=16, rope_base=10000.0,
                      eps=1e-5, tied_embeddings=True)
    g = build(cfg, random_weights(cfg)).finalize()
    text = assert_round_trip(g)
    d = json.loads(text)
    assert d["dyngraph_symbols"] == [{"name": "seq", "min": 1, "max": 16}]
    kinds = {o["kind"] for o in d["graph"]}
    assert {"RoPE", "ScaledDotProductAttention", "ScatterRows", "Gather", "Arange"} <= kinds
    props = {t["property_type"] for o in d["graph"] for t in o["inputs"]}
    assert {"state", "constant", "variable"} <= props


def test_round_trip_of_symbolic_shapes_and_attributes():
    seq = dg.Dim("seq", min=2, max=512)
    past = dg.Dim("past", min=1, max=64)
    x = dg.LogicalTensor(0, dg.f32, [seq, 8], name="x")
    y = dg.LogicalTensor(1, dg.f32, [past + seq, 8])
    cat = dg.LogicalTensor(2, dg.f32, None)
    sl = dg.LogicalTensor(3, dg.f32, [dg.UNKNOWN_DIM, 8])
    rs = dg.LogicalTensor(4, dg.f32, None)
    ar = dg.LogicalTensor(5, dg.i64, None)
    full = dg.LogicalTensor(6, dg.f16, None)
    z = dg.LogicalTensor(7, dg.f32, [dg.DYNAMIC_DIM, 8])
    g = dg.Graph()
    g.add_op(dg.Op(0, K.Concat, [x, y], [cat], {"axis": 0}, "cat"))
    g.add_op(dg.Op(1, K.Slice, [cat], [sl], {"begin": [seq // 2], "end": [2**62], "axes": [0]}))
    g.add_op(dg.Op(2, K.StaticReshape, [sl], [rs], {"shape": [-1, 2, 4]}))
    g.add_op(dg.Op(3, K.Arange, [], [ar], {"start": past, "end": 2 * seq + past + 1, "step": 2}))
    g.add_op(dg.Op(4, K.Full, [], [full], {"shape": [seq, sym_max(seq, past)], "value": -math.inf}))
    g.add_op(dg.Op(5, K.GELU, [z], [dg.LogicalTensor(8, dg.f32, None)], {"mode": "tanh"}))
    g.add_op(dg.Op(6, K.SoftMax, [x], [dg.LogicalTensor(9, dg.f32, None)]))  # dyngraph's default axis: -1
    g.finalize()
    text = assert_round_trip(g)
    d = json.loads(text)
    gelu = next(o for o in d["graph"] if o["kind"] == "GELU")
    assert gelu["attrs"]["mode"] == {"type": "string", "value": "gelu_tanh"}  # oneDNN's spelling
    sm = next(o for o in d["graph"] if o["kind"] == "SoftMax")
    assert sm["attrs"]["axis"]["value"] == -1  # written, since oneDNN's default (1) differs
    assert d["graph"][0]["inputs"][1]["dyngraph_dims"] == ["seq + past", 8]


def sym_max(a, b):
    return dg.sym_max(a, b)


def test_round_trip_of_an_unfinalized_graph_with_state():
    kv = dg.LogicalTensor(0, dg.f32, [4, 8], property=dg.STATE, name="cache")
    idx = dg.LogicalTensor(1, dg.i32, [dg.DYNAMIC_DIM])
    src = dg.LogicalTensor(2, dg.f32, [dg.DYNAMIC_DIM, 8])
    out = dg.LogicalTensor(3, dg.f32, None)
    g = dg.Graph()
    g.add_op(dg.Op(0, K.ScatterRows, [kv, idx, src], [out]))
    d = json.loads(onednn.to_json(g))
    assert d["graph"][0]["inputs"][0]["property_type"] == "state"
    assert d["graph"][0]["inputs"][1]["dyngraph_dims"] == ["?"]
    assert d["graph"][0]["outputs"][0]["dyngraph_dims"] is None
    g2 = onednn.from_json(d)
    ops1, _ = canon(g)
    ops2, _ = canon(g2)
    assert ops1 == ops2


def test_to_json_writes_a_file(tmp_path):
    cfg = LlamaConfig(vocab=32, hidden=16, layers=1, heads=2, kv_heads=1, ffn=16, max_seq=8, rope_base=10000.0,
                      eps=1e-5, tied_embeddings=False)
    g = build(cfg, random_weights(cfg)).finalize()
    p = tmp_path / "llama.json"
    text = onednn.to_json(g, p)
    assert p.read_text() == text + "\n"
    assert canon(onednn.from_json(str(p))) == canon(g)


def test_a_dimension_name_that_cannot_be_written_is_refused():
    x = dg.LogicalTensor(0, dg.f32, [dg.Dim("my seq"), 4])
    g = dg.Graph()
    g.add_op(dg.Op(0, K.ReLU, [x], [dg.LogicalTensor(1, dg.f32, None)]))
    with pytest.raises(dg.GraphError, match="my seq"):
        onednn.to_json(g)


@pytest.mark.parametrize("bad", ["seq +", "seq // 0", "unknown + 1", "min(seq)", "(" * 100 + "seq" + ")" * 100,
                                 "9" * 30, "seq $ 2", 5.5])
def test_a_bad_dimension_expression_in_a_file_is_a_graph_error(bad):
    d = {"graph": [{"id": 0, "name": "r", "kind": "ReLU", "attrs": {},
                    "inputs": [{"id": 0, "dtype": "f32", "shape": [-1], "dyngraph_dims": [bad]}],
                    "outputs": [{"id": 1, "dtype": "f32", "shape": [-1]}]}],
         "dyngraph_symbols": [{"name": "seq", "min": 1, "max": 8}]}
    with pytest.raises(dg.GraphError):
        onednn.from_json(d)


def test_symbols_read_back_with_their_ranges_and_bind_at_run_time():
    seq = dg.Dim("seq", min=1, max=32)
    x = dg.LogicalTensor(0, dg.f32, [seq, 4])
    g = dg.Graph()
    g.add_op(dg.Op(0, K.Exp, [x], [dg.LogicalTensor(1, dg.f32, None)]))
    g.finalize()
    g2 = onednn.from_json(onednn.to_json(g))
    (p,) = g2.get_partitions()
    cp = p.compile(p.get_input_ports(), p.get_output_ports(), dg.Engine(num_threads=1))
    for n in (1, 5, 32):
        a = np.linspace(-1, 1, 4 * n, dtype=np.float32).reshape(n, 4)
        (out,) = cp(a)
        np.testing.assert_allclose(out, np.exp(a), rtol=1e-6)
    with pytest.raises(dg.ShapeError, match="seq"):
        cp(np.zeros((33, 4), np.float32))


def test_symbolic_dimensions_are_written_as_onednn_writes_unknown_ones():
    """oneDNN writes a dimension it does not know as INT64_MIN (DNNL_GRAPH_UNKNOWN_DIM), in the shape
    and the strides; dyngraph's own key keeps the symbol, and the file reads back the same."""
    INT64_MIN = -(2 ** 63)
    batch = dg.Dim("batch", max=32)
    x = dg.LogicalTensor(0, dg.f32, [batch, 4])
    y = dg.LogicalTensor(1, dg.f32, None)
    g = dg.Graph()
    g.add_op(dg.Op(0, K.ReLU, [x], [y]))
    g.finalize()
    d = json.loads(onednn.to_json(g))
    (t,) = d["graph"][0]["inputs"]
    assert t["shape"] == [INT64_MIN, 4] and t["stride"] == [INT64_MIN, INT64_MIN]
    assert t["dyngraph_dims"] == ["batch", 4]
    g2 = onednn.from_json(json.dumps(d))
    (op,) = g2.get_ops()
    assert str(op.inputs[0].shape[0]) == "batch" and op.inputs[0].shape[1] == 4
