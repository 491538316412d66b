"""onednn.to_json / onednn.from_json: from_json(to_json(g)) is the same graph,
on every graph at hand: oneDNN's cases, the Llama decoder (symbolic dims,
state, dyngraph-only ops), and graphs written for the purpose. A graph read
from a file is written back as that file, op for op, and computes the same."""

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

from .jsondiff import diff
from .roundtrip import canon, check_case, read, written_back

K = dg.OpKind


def assert_round_trip(g, decomposed=False):
    text = onednn.to_json(g, decomposed=decomposed)
    g2 = onednn.from_json(text)
    assert canon(g2) == canon(g)
    assert onednn.to_json(g2, decomposed=decomposed) == text  # and writing it again gives the same file
    return text


def _case_files():
    from .conformance import CASES

    return sorted(glob.glob(os.path.join(CASES, "**", "*.json"), recursive=True))


def test_every_onednn_case_is_written_back_op_for_op(cases_dir):
    """All of oneDNN's cases, those dyngraph cannot run too (read with their
    refused ops as Wildcards): to_json writes the file's ops, ids, attributes
    (as spelled: bools 0 or 1) and logical tensors (layout, strides, property)
    as the file has them, and reading that back gives the same graph."""
    files = _case_files()
    refused = []
    for f in files:
        problems, _, _, wild = written_back(f)
        assert not problems, f"{os.path.relpath(f, cases_dir)}: " + "\n".join(problems[:20])
        if wild:
            refused.append(f)
    assert len(files) == 283
    assert 0 < len(refused) <= 40  # training ops, Dropout, 3-D convolution...: read, written, not run


def test_every_case_dyngraph_imports_round_trips_as_dyngraph_decomposed_it(cases_dir):
    """``decomposed=True`` writes the ops dyngraph runs (Full, Equal, the
    statistics of LayerNorm, ...); those read back as the same graph too."""
    n = 0
    for f in _case_files():
        try:
            g = onednn.from_json(f)
        except dg.DyngraphError:
            continue
        assert_round_trip(g, decomposed=True)
        n += 1
    assert n >= 240


# a sample that covers every decomposition of the importer, quantized and low-bit
# types, benchdnn's rewrites and dynamic dims: (file, options of from_json, bindings)
_SAMPLE = [
    ("op/f32/prelu.json", {}, ()),
    ("pattern/f32/matmul_post_ops_mul_fusion.json", {}, ()),  # a 1-D MatMul input
    ("pattern/f32/reduction_post_ops_l1_chain_fusion.json", {}, ()),
    ("pattern/f32/reduction_post_ops_l2_fusion.json", {}, ()),
    ("op/f32/logsoftmax.json", {"in_shapes": "0:2x8x4x4"}, ()),
    ("op/f32/lnorm_ks.json", {"in_shapes": "0:2x8x4x4"}, ()),  # LayerNorm's mean and variance
    ("op/f32/softmax_w_stats.json", {"in_shapes": "1:2x4x8x8"}, ()),
    ("complex_fusion/mha/hf-sdpa-fwd-no-mask-bf16-f32.json", {}, ()),  # mixed floats, inf_as_zero, stats
    ("pattern/int8/int8_lnorm_tc_multiply_quantize.json", {}, ()),
    ("pattern/int8/int8_bf16_gnorm_add_fusion.json", {}, ()),
    ("complex_fusion/mha/sdpa-compressed-k-int8-gs32.json", {}, ()),
    ("op/f32/dynamicdq_u4.json", {}, ()),
    ("pattern/f8/f8_matmul.json", {}, ()),
    ("op/f32/add.json", {"dt": "bf16", "mb": 2}, ()),
    ("complex_fusion/mha/MHA-distill_bert-inf-fp32-bs1.json",
     {"dynamic": "4:0:b+5:0:b+0:0:b+4:2:s+5:3:s+1:3:s+0:2:s"}, ({"b": 1, "s": 7}, {"b": 2, "s": 33})),
]


@pytest.mark.parametrize("case,options,bindings", _SAMPLE, ids=[c[0].rsplit("/", 1)[1] for c in _SAMPLE])
def test_the_graph_read_back_computes_what_the_graph_read_first_did(cases_dir, case, options, bindings):
    """Both graphs run through the conformance runner on the same inputs:
    the same values, bit for bit; and compiling and running a graph leaves it
    written as the file it came from."""
    path = os.path.join(cases_dir, case)
    ov = onednn.make_overrides(**options) if options else None
    r = check_case(path, ov, list(bindings))
    assert r["ran"] and not r["written"] and not r["results"], r
    imp, _ = read(path, ov)
    text = onednn.to_json(imp.graph)
    from dyngraph.onednn.runner import run_case

    assert run_case(imp, list(bindings)).status == "pass"
    assert onednn.to_json(imp.graph) == text
    if not options:
        with open(path) as f:
            assert diff(json.load(f), json.loads(text)) == []


def test_benchdnns_rewrites_are_written_into_the_file(cases_dir):
    """The graph the user asked for: new shapes with dense strides, internal
    shapes inferred, dynamic dims as oneDNN writes unknown ones (INT64_MIN)
    with dyngraph's symbols, a StaticReshape that follows a dynamic dim."""
    INT64_MIN = -(2 ** 63)
    path = os.path.join(cases_dir, "complex_fusion/mha/MHA-bert_large-inf-fp32-bs1.json")
    with open(path) as f:
        orig = json.load(f)
    g = onednn.from_json(path, in_shapes="3:2x16x384x64+4:2x16x64x384+1:2x1x1x384", mb=2)
    d = json.loads(onednn.to_json(g))
    mm = d["graph"][0]
    assert mm["inputs"][0]["shape"] == [2, 16, 384, 64] and mm["inputs"][0]["stride"] == [393216, 24576, 64, 1]
    assert mm["outputs"][0]["shape"] == [2, 16, 384, 384]  # inferred
    assert [o["kind"] for o in d["graph"]] == [o["kind"] for o in orig["graph"]]

    path = os.path.join(cases_dir, "complex_fusion/mha/JAX-MHA-inf-fp32.json")
    g = onednn.from_json(path, dynamic="1:0:b+2:0:b+0:0:b+7:0:b+1:2:s+2:3:s+0:3:s+7:3:s")
    d = json.loads(onednn.to_json(g))
    assert d["dyngraph_symbols"] == [{"name": "b", "min": 1, "max": 2 ** 63 - 1},
                                     {"name": "s", "min": 1, "max": 2 ** 63 - 1}]
    q = next(t for o in d["graph"] for t in o["inputs"] if t["id"] == 1)
    assert q["shape"][0] == q["shape"][2] == INT64_MIN and q["dyngraph_dims"][0:3:2] == ["b", "s"]
    assert q["stride"] == [INT64_MIN] * 4
    (reshape,) = [o for o in d["graph"] if o["kind"] == "StaticReshape"]
    assert reshape["attrs"] == {"shape": {"type": "s64[]", "value": [0, 0, 0, 0]},
                                "special_zero": {"type": "bool", "value": 1}}  # oneDNN's spelling of a bool
    assert canon(onednn.from_json(d), declared=False) == canon(g, declared=False)  # (internal shapes: inferred)


def test_an_op_changed_after_import_is_written_as_dyngraph_ops(cases_dir):
    """The file's op is written while the graph holds what the importer made
    of it; once one of those ops changes, that op's dyngraph form is written
    instead (and the ports are the graph's), the other ops as the file has them."""
    path = os.path.join(cases_dir, "complex_fusion/mha/MHA-bert_large-inf-fp32-bs1.json")
    with open(path) as f:
        orig = json.load(f)
    g = onednn.from_json(path)
    full = next(o for o in g.get_ops() if o.kind is K.Full)  # of SoftMax mode=inf_as_zero
    full.set_attr("value", -1e30)
    d = json.loads(onednn.to_json(g))
    kinds = [o["kind"] for o in d["graph"]]
    assert "SoftMax" in kinds and "Full" in kinds and "Select" in kinds
    assert [k for k in kinds if k not in ("Full", "Equal", "ReduceMax", "Select")] == \
        [o["kind"] for o in orig["graph"]]
    kept = {o["id"]: o for o in orig["graph"] if o["kind"] != "SoftMax"}
    assert all(diff(kept[o["id"]], o) == [] for o in d["graph"] if o["id"] in kept)
    g2 = onednn.from_json(d)
    assert next(o for o in g2.get_ops() if o.kind is K.Full and o.attrs["value"] == -1e30)


@pytest.mark.parametrize("key,value", [("fpmath_mode_apply_to_int", 5), ("fpmath_mode_apply_to_int", [1]),
                                       ("input_ports", [-1]), ("output_ports", "0")])
def test_a_bad_top_level_key_is_a_graph_error(key, value):
    d = {"version": "3.5.0", key: value, "graph": [
        {"id": 0, "name": "r", "kind": "ReLU", "attrs": {},
         "inputs": [{"id": 0, "dtype": "f32", "shape": [2], "stride": [1], "layout_type": "strided",
                     "property_type": "undef"}],
         "outputs": [{"id": 1, "dtype": "f32", "shape": [2], "stride": [1], "layout_type": "strided",
                      "property_type": "undef"}]}]}
    with pytest.raises(dg.GraphError, match=key):
        onednn.from_json(d)
    d[key] = "true" if key == "fpmath_mode_apply_to_int" else [0] if key == "input_ports" else [1]
    assert diff(d, json.loads(onednn.to_json(onednn.from_json(d)))) == []


def test_to_json_of_what_is_not_a_graph_is_a_graph_error():
    for bad in (None, "graph.json", {"graph": []}, 3):
        with pytest.raises(dg.GraphError, match="takes a dyngraph Graph"):
            onednn.to_json(bad)


def test_a_plain_graph_is_written_as_plain_onednn_json(cases_dir):
    from .conformance import CASES

    g = onednn.from_json(os.path.join(CASES, "complex_fusion/mha/MHA-bert_large-inf-fp32-bs1.json"))
    for decomposed in (False, True):  # as the file has it; as dyngraph runs it
        d = json.loads(onednn.to_json(g, decomposed=decomposed))
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
