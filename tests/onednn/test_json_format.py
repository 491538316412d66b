"""Reading oneDNN Graph JSON: the file format, checked as untrusted input."""

import copy
import json
import math

import numpy as np
import pytest

import dyngraph as dg
from dyngraph import onednn
from dyngraph.onednn import import_graph

from .jsoncase import attr, doc, lt, op, unary


def relu_add():
    """x -> ReLU -> Add(., y) -> End"""
    return doc(
        op(0, "ReLU", [lt(0, [2, 3])], [lt(1, [2, 3])]),
        op(1, "Add", [lt(1, [2, 3]), lt(2, [1, 3])], [lt(3, [2, 3])], auto_broadcast="numpy"),
        op(2, "End", [lt(3, [2, 3])], []),
    )


def test_a_graph_reads_from_a_dict_text_bytes_and_a_path(tmp_path):
    d = relu_add()
    path = tmp_path / "g.json"
    path.write_text(json.dumps(d))
    for src in (d, json.dumps(d), json.dumps(d).encode(), str(path), path):
        g = onednn.from_json(src)
        assert g.is_finalized
        assert [o.kind for o in g.get_ops()] == [dg.OpKind.ReLU, dg.OpKind.Add]
        assert g.logical_tensor(3).shape == (2, 3)


def test_end_ops_mark_outputs_and_input_ports_order_the_inputs():
    d = relu_add()
    d["input_ports"] = [2, 0]
    imp = import_graph(d)
    assert imp.inputs == [2, 0]
    assert imp.outputs == [3]


def test_dtypes_map_by_onednn_names():
    d = doc(op(0, "GreaterEqual", [lt(0, [4], "s32"), lt(1, [4], "s32")], [lt(2, [4], "boolean")]))
    g = onednn.from_json(d)
    assert g.logical_tensor(0).dtype is dg.i32 and g.logical_tensor(2).dtype is dg.boolean


def test_attribute_types_are_read_as_typed():
    d = doc(op(0, "StaticTranspose", [lt(0, [2, 3, 4])], [lt(1, [4, 2, 3])], order=[2, 0, 1]))
    d["graph"][0]["attrs"]["order"] = attr([2, 0, 1], "s64[]")
    (o,) = onednn.from_json(d).get_ops()
    assert list(o.attrs["order"]) == [2, 0, 1]
    d = unary("MatMul")
    d["graph"][0]["inputs"].append(lt(5, [3, 2]))
    d["graph"][0]["outputs"][0]["shape"] = [2, 2]
    d["graph"][0]["attrs"] = {"transpose_a": attr(0, "bool"), "transpose_b": attr(1, "bool")}
    d["graph"][0]["inputs"][1]["shape"] = [2, 3]
    (o,) = onednn.from_json(d).get_ops()
    assert o.attrs["transpose_a"] is False and o.attrs["transpose_b"] is True


def test_unknown_dims_of_internal_tensors_are_inferred():
    d = relu_add()
    d["graph"][0]["outputs"][0]["shape"] = [-9223372036854775808]  # oneDNN's "unknown"
    d["graph"][1]["inputs"][0]["shape"] = [-1, -1]
    g = onednn.from_json(d)
    assert g.logical_tensor(1).shape == (2, 3)


def test_a_constant_hint_on_an_op_output_is_dropped():
    d = relu_add()
    d["graph"][0]["outputs"][0]["property_type"] = "constant"
    d["graph"][1]["inputs"][0]["property_type"] = "constant"
    assert onednn.from_json(d).logical_tensor(1).property is dg.VARIABLE


def test_constant_and_host_scalar_inputs():
    d = relu_add()
    d["graph"][1]["inputs"][1]["property_type"] = "constant"
    d["graph"][0]["inputs"][0]["property_type"] = "host_scalar"
    g = onednn.from_json(d)
    assert g.logical_tensor(2).property is dg.CONSTANT
    assert g.logical_tensor(0).property is dg.VARIABLE


def _mutations():
    """(description, mutate(doc)) pairs: each makes the file malformed."""
    big = 2**63

    def setp(path, value):
        def f(d):
            x = d
            for k in path[:-1]:
                x = x[k]
            x[path[-1]] = value
        return f

    def delp(path):
        def f(d):
            x = d
            for k in path[:-1]:
                x = x[k]
            del x[path[-1]]
        return f

    g0 = ["graph", 0]
    return [
        ("graph not a list", setp(["graph"], {"a": 1})),
        ("empty graph", setp(["graph"], [])),
        ("op not an object", setp(g0, 3)),
        ("op id missing", delp(g0 + ["id"])),
        ("op id negative", setp(g0 + ["id"], -1)),
        ("op id a string", setp(g0 + ["id"], "0")),
        ("op id a bool", setp(g0 + ["id"], True)),
        ("op id too large", setp(g0 + ["id"], big)),
        ("kind not a string", setp(g0 + ["kind"], 7)),
        ("inputs missing", delp(g0 + ["inputs"])),
        ("outputs not a list", setp(g0 + ["outputs"], {})),
        ("tensor not an object", setp(g0 + ["inputs", 0], [1])),
        ("tensor id missing", delp(g0 + ["inputs", 0, "id"])),
        ("dtype not a string", setp(g0 + ["inputs", 0, "dtype"], 1)),
        ("unknown dtype", setp(g0 + ["inputs", 0, "dtype"], "f128")),
        ("shape not a list", setp(g0 + ["inputs", 0, "shape"], "2x3")),
        ("dimension a float", setp(g0 + ["inputs", 0, "shape"], [2.5, 3])),
        ("dimension huge", setp(g0 + ["inputs", 0, "shape"], [big, 3])),
        ("rank 100", setp(g0 + ["inputs", 0, "shape"], [1] * 100)),
        ("stride not ints", setp(g0 + ["inputs", 0, "stride"], ["a", 1])),
        ("unknown layout", setp(g0 + ["inputs", 0, "layout_type"], "blocked")),
        ("unknown property", setp(g0 + ["inputs", 0, "property_type"], "weird")),
        ("attrs not an object", setp(["graph", 1, "attrs"], [])),
        ("attribute without type", setp(["graph", 1, "attrs", "auto_broadcast"], {"value": "numpy"})),
        ("attribute without value", setp(["graph", 1, "attrs", "auto_broadcast"], {"type": "string"})),
        ("unknown attribute type", setp(["graph", 1, "attrs", "auto_broadcast"], {"type": "s128", "value": 1})),
        ("bool attribute 2", setp(["graph", 1, "attrs", "auto_broadcast"], {"type": "bool", "value": 2})),
        ("s64 attribute a float", setp(["graph", 1, "attrs", "x"], {"type": "s64", "value": 1.5})),
        ("f32 attribute a string", setp(["graph", 1, "attrs", "x"], {"type": "f32", "value": "a"})),
        ("s64[] with a string", setp(["graph", 1, "attrs", "x"], {"type": "s64[]", "value": [1, "a"]})),
        ("string attribute a number", setp(["graph", 1, "attrs", "auto_broadcast"], {"type": "string", "value": 1})),
        ("unknown auto_broadcast", setp(["graph", 1, "attrs", "auto_broadcast"], attr("sideways"))),
        ("engine_kind a number", setp(["engine_kind"], 1)),
        ("unknown fpmath_mode", setp(["fpmath_mode"], "fast")),
        ("input_ports not ints", setp(["input_ports"], ["a"])),
        ("an op twice", lambda d: d["graph"].append(copy.deepcopy(d["graph"][0]))),
        ("a tensor produced twice", lambda d: d["graph"].append(op(9, "ReLU", [lt(0, [2, 3])], [lt(1, [2, 3])]))),
        ("a tensor with two dtypes", setp(["graph", 1, "inputs", 0, "dtype"], "f16")),
        # (a consumer's other shape of a produced tensor is oneDNN's producer's: tests/onednn/test_json_declarations.py)
        ("a graph input with two shapes", lambda d: d["graph"].insert(2, op(8, "ReLU", [lt(0, [3, 2])], [lt(9, [3, 2])]))),
        ("a cycle", lambda d: d["graph"][0]["inputs"].__setitem__(0, lt(3, [2, 3]))),
        ("too few inputs", lambda d: d["graph"][1]["inputs"].pop()),
        ("shapes that do not broadcast", setp(["graph", 1, "inputs", 1, "shape"], [4, 5])),
        ("zero-size tensor declared [0]", setp(g0 + ["inputs", 0, "shape"], [0, 3])),
    ]


@pytest.mark.parametrize("what,mutate", _mutations(), ids=[m[0] for m in _mutations()])
def test_a_malformed_file_is_a_typed_error(what, mutate):
    d = relu_add()
    mutate(d)
    with pytest.raises(dg.DyngraphError):
        onednn.from_json(json.dumps(d, allow_nan=True))


@pytest.mark.parametrize("text", [
    "", "{", "[1, 2]", '{"graph": [', "null", "\x00\x01", '{"graph": [{"id": 1e400}]}',
    "[" * 100000 + "]" * 100000, '{"graph": "' + "a" * 1000 + '"}', "\ud800",
])
def test_text_that_is_not_a_graph_is_a_graph_error(text):
    with pytest.raises(dg.GraphError):
        onednn.from_json(text if text.startswith(("{", "[")) else text.encode("utf-8", "surrogatepass"))


def test_a_missing_file_is_a_graph_error(tmp_path):
    with pytest.raises(dg.GraphError, match="cannot read"):
        onednn.from_json(str(tmp_path / "nope.json"))
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(dg.GraphError, match="UTF-8"):
        onednn.from_json(str(tmp_path / "bin.json"))


def test_random_truncations_and_byte_flips_are_typed_errors_or_graphs():
    text = json.dumps(relu_add()).encode()
    rng = np.random.default_rng(0)
    for _ in range(300):
        b = bytearray(text)
        if rng.random() < 0.5:
            b = b[: rng.integers(0, len(b))]
        else:
            for _ in range(rng.integers(1, 4)):
                b[rng.integers(0, len(b))] = int(rng.integers(32, 127))
        try:
            onednn.from_json(bytes(b))
        except dg.DyngraphError:
            pass


def test_non_finite_attribute_values_are_read():
    d = unary("Clamp")
    d["graph"][0]["attrs"] = {"min": attr(-math.inf, "f32"), "max": attr(math.nan, "f32")}
    with pytest.raises(dg.ShapeError, match=r"bounds \[-inf, nan\] must not be NaN"):  # read, and refused by the rule
        onednn.from_json(json.dumps(d))
    d["graph"][0]["attrs"]["max"] = attr(math.inf, "f32")
    (op,) = onednn.from_json(json.dumps(d)).get_ops()
    assert (op.attrs["min"], op.attrs["max"]) == (-math.inf, math.inf)


def conv3d(kd, pads, strides=(1, 1, 1), dilations=(1, 1, 1)):
    return doc(op(0, "Convolution", [lt(0, [1, 1, 1, 1, 1]), lt(1, [1, 1, kd, 1, 1])], [lt(2, [1, 1, 2, 1, 1])],
                  strides=list(strides), pads_begin=list(pads), pads_end=list(pads), dilations=list(dilations),
                  data_format="NCX", weights_format="OIX"))


def max_pool3d(kernel, strides, pads):
    return doc(op(0, "MaxPool", [lt(0, [1, 1, 1, 1, 1])], [lt(1, [1, 1, 1, 1, 1])], kernel=list(kernel),
                  strides=list(strides), pads_begin=list(pads), pads_end=list(pads), data_format="NCX"))


M31 = (1 << 31) - 1


@pytest.mark.parametrize("d,error,match", [
    # a kernel depth of 2^31 that the paddings let fit: the 3-D lowering would make 2^31 views
    (conv3d(M31, [M31 // 2, 0, 0]), dg.ShapeError, "kernel depth 2147483647 .* above the limit of 4096"),
    (conv3d(1, [1 << 62, 0, 0]), dg.GraphError, "'pads_begin' must be <= 2147483647"),
    (conv3d(2, [0, 0, 0], dilations=[(1 << 63) - 1, 1, 1]), dg.GraphError, "'dilations' must be <= 2147483647"),
    (conv3d(1, [1 << 63, 0, 0]), dg.GraphError, "out of range"),  # not an int64
    (max_pool3d([1 << 31, 1, 1], [1, 1, 1], [0, 0, 0]), dg.GraphError, "'kernel' must be <= 2147483647"),
    (max_pool3d([1, 1, 1], [-(1 << 63), 1, 1], [0, 0, 0]), dg.GraphError, "'strides' must be >= 1"),
])
def test_hostile_sizes_of_3d_spatial_ops_are_typed_errors_when_read(d, error, match):
    with pytest.raises(error, match=match):
        onednn.from_json(d)


def test_a_3d_pooling_window_of_2_to_the_31_reads_and_runs():
    """Within the bounds, a 2^31 window, stride and padding in depth is one window over the input."""
    g = onednn.from_json(max_pool3d([M31, 1, 1], [M31, 1, 1], [M31 - 1, 0, 0]))
    (part,) = g.get_partitions()
    cp = part.compile(part.get_input_ports(), part.get_output_ports(), dg.Engine(num_threads=1))
    (y,) = cp(np.full((1, 1, 1, 1, 1), 4.0, np.float32))
    np.testing.assert_array_equal(y.ravel(), [4.0])
