"""benchdnn's rewrites of a case (--in-shapes, --op-attrs, --dt, --op-kind,
--mb, --tensor-property) and dynamic dimensions, given as benchdnn's option
strings or as Python values."""

import numpy as np
import pytest

import dyngraph as dg
from dyngraph.onednn import import_graph, make_overrides
from dyngraph.onednn.runner import run_case

from .jsoncase import doc, lt, op, run_json


def mlp():
    """x[4,8] @ w[8,16] -> + b[16] -> ReLU -> Add(., r[4,16])"""
    return doc(
        op(0, "MatMul", [lt(0, [4, 8]), lt(1, [8, 16], prop="constant")], [lt(2, [4, 16])]),
        op(1, "BiasAdd", [lt(2, [4, 16]), lt(3, [16])], [lt(4, [4, 16])]),
        op(2, "ReLU", [lt(4, [4, 16])], [lt(5, [4, 16])]),
        op(3, "Add", [lt(5, [4, 16]), lt(6, [4, 16])], [lt(7, [4, 16])]),
    )


def imported(**kw):
    return import_graph(mlp(), make_overrides(**kw))


def test_in_shapes_rewrite_inputs_and_the_rest_is_inferred():
    for spec in ("0:2x8+6:2x16", {0: [2, 8], 6: [2, 16]}):
        g = imported(in_shapes=spec).graph
        assert g.logical_tensor(7).shape == (2, 16)
    g = imported(in_shapes="0:4x8*ba").graph  # strides only: a layout, nothing changes
    assert g.logical_tensor(0).shape == (4, 8)


def test_in_shapes_of_a_tensor_that_is_not_an_input_is_ignored_as_benchdnn_does(caplog):
    with caplog.at_level("WARNING", logger="dyngraph"):
        g = imported(in_shapes="4:2x16+9:1").graph
    assert g.logical_tensor(4).shape == (4, 16)
    assert "tensor 4 is not an input" in caplog.text and "tensor 9" in caplog.text


def test_malformed_in_shapes_are_graph_errors():
    for bad in ("0:2xa", "x:2", "0", "0:2x3*7x", "0:-"):
        with pytest.raises(dg.DyngraphError):
            imported(in_shapes=bad)


def test_mb_rewrites_the_batch_of_the_inputs_that_carry_it():
    g = imported(mb=3).graph
    assert g.logical_tensor(0).shape == (3, 8) and g.logical_tensor(6).shape == (3, 16)
    assert g.logical_tensor(1).shape == (8, 16)  # a constant keeps its shape


def test_dt_changes_every_f32_tensor_or_the_ones_named():
    g = imported(dt="f16").graph
    assert {g.logical_tensor(i).dtype for i in range(8)} == {dg.f16}
    d = doc(op(0, "TypeCast", [lt(0, [2, 3])], [lt(1, [2, 3])]))
    g = import_graph(d, make_overrides(dt="1:bf16")).graph
    assert g.logical_tensor(1).dtype is dg.bf16 and g.logical_tensor(0).dtype is dg.f32
    with pytest.raises(dg.GraphError, match="no tensor 9"):
        import_graph(d, make_overrides(dt="9:f16"))


def test_op_attrs_set_typed_values():
    d = doc(op(0, "SoftMax", [lt(0, [2, 3, 4])], [lt(1, [2, 3, 4])], axis=1))
    (o,) = import_graph(d, make_overrides(op_attrs="0:axis:-1")).graph.get_ops()
    assert o.attrs["axis"] == -1
    d = doc(op(0, "StaticReshape", [lt(0, [2, 6])], [lt(1, [3, 4])], shape=[3, 4], special_zero=False))
    g = import_graph(d, make_overrides(op_attrs="0:shape:4x3*special_zero:0")).graph
    assert g.logical_tensor(1).shape == (4, 3)
    with pytest.raises(dg.GraphError, match="not a bool"):
        import_graph(d, make_overrides(op_attrs="0:special_zero:maybe"))
    with pytest.raises(dg.GraphError, match="no op 5"):
        import_graph(d, make_overrides(op_attrs="5:shape:12"))


def test_op_kind_replaces_a_kind_or_removes_the_op(rng):
    x = rng.standard_normal((4, 16)).astype(np.float32)
    d = doc(op(0, "ReLU", [lt(0, [4, 16])], [lt(1, [4, 16])]), op(1, "Exp", [lt(1, [4, 16])], [lt(2, [4, 16])]))
    (y,) = run_json(d, {0: x}, overrides=make_overrides(op_kind="0:Abs")).values()
    np.testing.assert_allclose(y, np.exp(np.abs(x)), rtol=1e-6)
    (y,) = run_json(d, {0: x}, overrides=make_overrides(op_kind="0:undef")).values()
    np.testing.assert_allclose(y, np.exp(x), rtol=1e-6)
    # a binary op removed passes through the input that has a producer
    imp = import_graph(mlp(), make_overrides(op_kind="3:undef"))
    assert imp.outputs == [5]


def test_tensor_property_makes_an_input_constant():
    g = imported(tensor_property="6:constant").graph
    assert g.logical_tensor(6).property is dg.CONSTANT
    with pytest.raises(dg.GraphError):
        imported(tensor_property="6:frozen")


def test_dynamic_dims_share_a_name_and_run_at_several_sizes():
    imp = import_graph(mlp(), make_overrides(dynamic=["0:0:batch", "6:0:batch"]))
    g = imp.graph
    (batch,) = imp.symbols.values()
    assert g.logical_tensor(7).shape[0] == batch and g.logical_tensor(7).shape[1] == 16
    res = run_case(imp, [{"batch": 1}, {"batch": 7}, {"batch": 33}])
    assert res.status == "pass", res.message
    assert res.graphs_built == 3 and res.partitions == 1
    assert [r.outputs[0].shape for r in res.runs] == [(1, 16), (7, 16), (33, 16)]


def test_dynamic_dims_given_as_dims_keep_their_range():
    batch = dg.Dim("batch", min=1, max=8)
    imp = import_graph(mlp(), make_overrides(dynamic={(0, 0): batch, (6, 0): batch}))
    assert imp.symbols == {"batch": batch}
    res = run_case(imp, [{"batch": 9}])
    assert res.status == "error" and "batch" in res.message


def test_a_static_reshape_follows_a_dynamic_dimension():
    d = doc(op(0, "StaticReshape", [lt(0, [2, 5, 12])], [lt(1, [2, 5, 3, 4])], shape=[2, 5, 3, 4],
               special_zero=False),
            op(1, "ReLU", [lt(1, [2, 5, 3, 4])], [lt(2, [2, 5, 3, 4])]))
    imp = import_graph(d, make_overrides(dynamic="0:0:b+0:1:s"))
    assert list(imp.graph.get_ops()[0].attrs["shape"]) == [0, 0, 3, 4]
    res = run_case(imp, [{"b": 1, "s": 1}, {"b": 3, "s": 7}])
    assert res.status == "pass", res.message


@pytest.mark.parametrize("spec,match", [
    ("1:0", "constant"), ("4:0", "not an input"), ("0:2", "no axis"), ("0", "ID:AXIS"), ("0:0:a b", "name"),
    ("0:0:x+0:1:x", "elsewhere"),
])
def test_bad_dynamic_specs_are_graph_errors(spec, match):
    with pytest.raises(dg.GraphError, match=match):
        imported(dynamic=spec)


def test_a_binding_must_name_every_dimension_and_nothing_else():
    imp = import_graph(mlp(), make_overrides(dynamic="0:0:batch+6:0:batch"))
    assert run_case(imp, [{"batch": 2, "seq": 3}]).status == "error"
    assert run_case(imp, [{}]).status == "error"
