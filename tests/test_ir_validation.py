"""The C++ reader checks every op of an IR against its kind's declared facts
(arity, dtype classes, attributes: presence, type, constraints), generated
from the Python op registry: an IR that bypassed the Python API is refused
with an IRError naming the op and what is wrong, before anything is built."""

import copy
import math

import numpy as np
import pytest

import dyngraph as dg
from dyngraph import _backend
from dyngraph.ir_codes import AttrType
from dyngraph.ir_writer import RawAttr, write_program
from dyngraph.ops import registered_kinds, schema_of

K = dg.OpKind


def compiled(engine, ops_fn, inputs, consts=None):
    g = dg.Graph()
    outs = ops_fn(g)
    g.finalize()
    (p,) = g.get_partitions()
    return p.compile(inputs, outs, engine, constants=consts or {})


@pytest.fixture
def norm_prog(engine):
    """x -> LayerNorm(x, gamma, beta) -> SoftMax: a program to tamper with."""
    seq = dg.Dim("seq", max=64)
    x = dg.LogicalTensor(0, dg.f32, [seq, 8])
    gm = dg.LogicalTensor(1, dg.f32, [8], property=dg.CONSTANT)
    bt = dg.LogicalTensor(2, dg.f32, [8], property=dg.CONSTANT)
    h = dg.LogicalTensor(3, dg.f32)
    y = dg.LogicalTensor(4, dg.f32)

    def ops(g):
        g.add_op(dg.Op(0, K.LayerNorm, [x, gm, bt], [h], {"epsilon": 1e-5}))
        g.add_op(dg.Op(1, K.SoftMax, [h], [y], {"axis": -1}))
        return [y]

    ones = np.ones(8, np.float32)
    return compiled(engine, ops, [x, gm, bt], {1: ones, 2: ones}).program


def refused(prog, match):
    with pytest.raises(dg.IRError, match=match):
        _backend.check_ir(write_program(prog))


def test_the_untampered_program_is_accepted(norm_prog):
    _backend.check_ir(write_program(norm_prog))


@pytest.mark.parametrize("eps", [-1e-5, math.nan, math.inf])
def test_a_norm_epsilon_that_is_negative_or_not_finite_is_refused(norm_prog, eps):
    p = copy.deepcopy(norm_prog)
    p.ops[0].attrs["epsilon"] = eps
    refused(p, "LayerNorm.*'epsilon' must be")


def test_a_missing_attribute_is_refused(norm_prog):
    p = copy.deepcopy(norm_prog)
    del p.ops[0].attrs["epsilon"]
    refused(p, "'epsilon' is missing")


def test_an_unknown_attribute_is_refused(norm_prog):
    p = copy.deepcopy(norm_prog)
    p.ops[0].attrs["epsilom"] = RawAttr(AttrType.FLOAT, (1e-5,))
    refused(p, "'epsilom' is not an attribute of this op")


def test_an_attribute_of_the_wrong_type_is_refused(norm_prog):
    p = copy.deepcopy(norm_prog)
    p.ops[0].attrs["epsilon"] = RawAttr(AttrType.INT, (0,))
    refused(p, "'epsilon' must be a float")


def test_a_bool_attribute_holds_zero_or_one(norm_prog):
    p = copy.deepcopy(norm_prog)
    p.ops[0].attrs["use_affine"] = RawAttr(AttrType.INT, (7,))
    refused(p, "'use_affine' must hold one value, 0 or 1")


@pytest.mark.parametrize("axis", [2, -3, 2**40])
def test_an_axis_out_of_range_is_refused(norm_prog, axis):
    p = copy.deepcopy(norm_prog)
    p.ops[1].attrs["axis"] = axis
    refused(p, "SoftMax.*'axis' is axis .* out of range for rank 2")


def test_a_string_outside_its_choices_is_refused(engine):
    x = dg.LogicalTensor(0, dg.f32, [dg.Dim("n"), 4])
    y = dg.LogicalTensor(1, dg.f32)

    def ops(g):
        g.add_op(dg.Op(0, K.GELU, [x], [y], {"mode": "tanh"}))
        return [y]

    p = copy.deepcopy(compiled(engine, ops, [x]).program)
    p.ops[0].attrs["mode"] = RawAttr(AttrType.STRING, ("fast",))
    refused(p, "'mode' must be one of 'erf', 'tanh', got 'fast'")


def test_too_many_inputs_are_refused(engine):
    """A MatMul with a fourth input: its extra input is not silently dropped."""
    x = dg.LogicalTensor(0, dg.f32, [dg.Dim("n"), 4])
    w = dg.LogicalTensor(1, dg.f32, [4, 4])
    y = dg.LogicalTensor(2, dg.f32)

    def ops(g):
        g.add_op(dg.Op(0, K.MatMul, [x, w], [y]))
        return [y]

    p = copy.deepcopy(compiled(engine, ops, [x, w]).program)
    p.ops[0].inputs = [0, 1, 1, 0]
    refused(p, r"MatMul\): takes 2 to 3 inputs, the IR gives 4")


def test_an_input_of_the_wrong_dtype_class_is_refused(engine):
    """Gather indices that are floats would abort inside ggml."""
    table = dg.LogicalTensor(0, dg.f32, [10, 4])
    idx = dg.LogicalTensor(1, dg.i32, [dg.Dim("n")])
    y = dg.LogicalTensor(2, dg.f32)

    def ops(g):
        g.add_op(dg.Op(0, K.Gather, [table, idx], [y]))
        return [y]

    p = copy.deepcopy(compiled(engine, ops, [table, idx]).program)
    i = p.inputs[1]
    p.tensors[i].dtype = dg.f32
    refused(p, r"Gather\): input 1 \(indices\) .* must be an i32 or i64 tensor, it is f32")


def test_a_resolved_attribute_with_the_wrong_length_is_refused(engine):
    x = dg.LogicalTensor(0, dg.f32, [dg.Dim("n"), 6])
    y = dg.LogicalTensor(1, dg.f32)

    def ops(g):
        g.add_op(dg.Op(0, K.Slice, [x], [y], {"begin": [1], "end": [4], "axes": [1]}))
        return [y]

    p = copy.deepcopy(compiled(engine, ops, [x]).program)
    p.ops[0].attrs["strides"] = (1,)
    refused(p, "'strides' must have one entry per axis of input 0 \\(2\\), it has 1")
    p.ops[0].attrs["strides"] = (1, 0)
    refused(p, "'strides' must be >= 1, got 0")


def test_every_registered_default_satisfies_its_own_constraints():
    from dyngraph.ops.registry import REQUIRED, check_value

    for kind in registered_kinds():
        s = schema_of(kind)
        for name, spec in s.attrs.items():
            if spec.default is not REQUIRED and spec.default is not None and spec.kind not in ("expr", "exprs"):
                check_value(name, spec, spec.default, kind.name)


def test_the_graph_api_refuses_what_the_reader_refuses():
    """A negative epsilon is refused when the op is added, not at execution."""
    x = dg.LogicalTensor(0, dg.f32, [4, 8])
    y = dg.LogicalTensor(1, dg.f32)
    g = dg.Graph()
    with pytest.raises(dg.GraphError, match="'epsilon' must be >= 0"):
        g.add_op(dg.Op(0, K.RMSNorm, [x], [y], {"epsilon": -1.0}))
    with pytest.raises(dg.GraphError, match="'epsilon' must be finite"):
        g.add_op(dg.Op(0, K.RMSNorm, [x], [y], {"epsilon": float("nan")}))


@pytest.mark.parametrize("kind,attrs", [(K.SquaredDifference, {}), (K.FloorDivide, {}), (K.Pow, {}),
                                        (K.Maximum, {}), (K.BiasAdd, {"data_format": "NXC"})])
def test_binary_operands_of_different_dtypes_are_refused(engine, kind, attrs):
    """Kernels that read both operands as one type (f32 read from f16 data would read past it)."""
    x = dg.LogicalTensor(0, dg.f32, [dg.Dim("n"), 4])
    b = dg.LogicalTensor(1, dg.f32, [4])
    y = dg.LogicalTensor(2, dg.f32)

    def ops(g):
        g.add_op(dg.Op(0, kind, [x, b], [y], attrs))
        return [y]

    p = copy.deepcopy(compiled(engine, ops, [x, b]).program)
    _backend.check_ir(write_program(p))  # untampered: accepted
    p.tensors[p.inputs[1]].dtype = dg.f16
    refused(p, rf"{kind.name}\): input 1 .* is f16, input 0 is f32; they must match")
    p.tensors[p.inputs[1]].dtype = dg.f32
    p.tensors[p.outputs[0]].dtype = dg.f16
    refused(p, rf"{kind.name}\): output 0 .* is f16, the op's outputs have the dtype of input 0")


def test_a_vector_shared_by_many_ops_is_refused(engine):
    """FlatBuffers lets any number of tables refer to one vector: 64 Concat ops referring to one vector of 4,096
    inputs (and one name) make a 25 KB file that the reader would copy and check as 1 MB (a million ops of a
    million inputs: hours and terabytes from megabytes). Refused with an IRError, by the C++ reader and the
    Python one (which checks with it first); the same program written plainly is read."""
    from dyngraph.ir_reader import read_program
    from irtools import append_nodes, node, pack, pack_sharing, unpack

    x, y = dg.LogicalTensor(0, dg.f32, [1]), dg.LogicalTensor(1, dg.f32)

    def ops(g):
        g.add_op(dg.Op(0, K.Concat, [x, x], [y], {"axis": 0}))
        return [y]

    t = unpack(bytes(write_program(compiled(engine, ops, [x]).program)))
    m = 4096
    wide = append_nodes(t, [node(0, m)])  # the constant m
    op0, out0 = t.ops[0], t.tensors[t.outputs[0]]
    t.ops, t.tensors, t.outputs = [], list(t.tensors), []
    for k in range(64):
        op, out = copy.deepcopy(op0), copy.deepcopy(out0)
        out.id, out.shape = 100 + k, [wide]
        t.tensors.append(out)
        op.id, op.inputs, op.outputs = k, [op0.inputs[0]] * m, [len(t.tensors) - 1]
        t.ops.append(op)
        t.outputs.append(len(t.tensors) - 1)
    plain, shared = pack(t), pack_sharing(t)
    assert len(shared) * 20 < len(plain)
    _backend.check_ir(plain)
    assert len(read_program(plain).ops) == 64
    for check in (_backend.check_ir, read_program):
        with pytest.raises(dg.IRError, match="referred to more than once"):
            check(shared)


def test_the_reader_gives_back_what_the_writer_wrote(engine):
    """read_program (the C++ reader's tables, _backend.read_ir) then write_program gives the same bytes:
    symbols, expressions, every attribute type, a guard (seq == kv) and a value-source symbol survive."""
    from dyngraph.ir_reader import read_program

    seq, kv = dg.Dim("seq", max=64), dg.Dim("kv", min=2, max=32)
    x = dg.LogicalTensor(0, dg.f32, [seq, 8])
    w = dg.LogicalTensor(1, dg.f32, [kv, 8])
    shape = dg.LogicalTensor(2, dg.i64, [2])
    h, r, y, z = (dg.LogicalTensor(i, dg.f32) for i in (3, 4, 5, 6))

    def ops(g):
        g.add_op(dg.Op(0, K.Add, [x, w], [h]))
        g.add_op(dg.Op(1, K.LayerNorm, [h], [r], {"epsilon": 1e-3, "use_affine": False}))
        g.add_op(dg.Op(2, K.StaticReshape, [r], [y], {"shape": [-1], "special_zero": False}))
        g.add_op(dg.Op(3, K.DynamicReshape, [r, shape], [z], {"special_zero": False}))
        return [y, z]

    prog = compiled(engine, ops, [x, w, shape]).program
    assert prog.guards and prog.sources
    data = bytes(write_program(prog))
    back = read_program(data)
    assert [(s.name, s.min, s.max) for s in back.symbols] == [(s.name, s.min, s.max) for s in prog.symbols]
    assert bytes(write_program(back)) == data


def test_names_that_are_not_utf8_are_read_with_replacement_characters(norm_prog):
    from dyngraph.ir_reader import read_program
    from irtools import pack, unpack

    t = unpack(bytes(write_program(norm_prog)))
    t.ops[0].name, t.tensors[0].name = b"ln\xff", b"\xfe\xffx"
    back = read_program(pack(t))
    assert back.ops[0].name == "ln\ufffd" and back.tensors[0].name == "\ufffd\ufffdx"
