"""IRs that put s4, u4 or f8 where an op does not take them (written by hand,
bypassing the Python API): refused with a typed error by the C++ reader (the
dtype classes it checks), or by the lowering (what the classes let through),
and by dyngraph.load's own checks; never a crash."""

import copy

import numpy as np
import pytest

import dyngraph as dg
from dyngraph import _backend
from dyngraph.ir_writer import write_program
from dyngraph.serialization import seal
from irtools import pack, unpack

K = dg.OpKind
LOWBIT = [dg.s4, dg.u4, dg.f8_e4m3, dg.f8_e5m2]


def program(engine, build, inputs, consts=None):
    g = dg.Graph()
    outs = build(g)
    g.finalize()
    (p,) = g.get_partitions()
    return copy.deepcopy(p.compile(inputs, outs, engine, constants=consts or {}).program)


def relu_program(engine):
    x, y = dg.LogicalTensor(0, dg.f32, [dg.Dim("n"), 4]), dg.LogicalTensor(1, dg.f32)

    def build(g):
        g.add_op(dg.Op(0, K.ReLU, [x], [y]))
        return [y]

    return program(engine, build, [x])


def cast_program(engine, src, dst):
    x, y = dg.LogicalTensor(0, src, [dg.Dim("n"), 4]), dg.LogicalTensor(1, dst)

    def build(g):
        g.add_op(dg.Op(0, K.TypeCast, [x], [y]))
        return [y]

    return program(engine, build, [x])


def loaded(tmp_path, prog):
    path = tmp_path / "hostile.dg"
    path.write_bytes(seal(write_program(prog)))
    return dg.load(path)


def raw(prog, engine):
    """The C++ runtime alone (no Python checks)."""
    return _backend.CompiledPartition(write_program(prog), {}, engine.impl, 4)


@pytest.mark.parametrize("dt", LOWBIT, ids=str)
def test_a_low_bit_input_of_an_op_that_takes_floats_is_refused_by_the_reader(dt, engine):
    p = relu_program(engine)
    p.tensors[p.inputs[0]].dtype = dt
    with pytest.raises(dg.IRError, match=rf"ReLU\): input 0 .* must be a floating-point tensor, it is {dt}"):
        _backend.check_ir(write_program(p))


@pytest.mark.parametrize("dt", LOWBIT, ids=str)
def test_the_int8_product_refuses_low_bit_operands(dt, engine, rng):
    """Dequantize(u8) -> MatMul <- Dequantize(s8 weights) becomes QuantizedMatMul (u8 / s8 only)."""
    x = dg.LogicalTensor(0, dg.u8, [dg.Dim("n"), 8])
    w = dg.LogicalTensor(1, dg.s8, [8, 4], property=dg.CONSTANT)
    xd, wd, y = dg.LogicalTensor(2, dg.f32), dg.LogicalTensor(3, dg.f32), dg.LogicalTensor(4, dg.f32)

    def build(g):
        g.add_op(dg.Op(0, K.Dequantize, [x], [xd], {"scales": [0.5], "zps": [3]}))
        g.add_op(dg.Op(1, K.Dequantize, [w], [wd], {"scales": [0.25]}))
        g.add_op(dg.Op(2, K.MatMul, [xd, wd], [y]))
        return [y]

    p = program(engine, build, [x, w], {1: rng.integers(-8, 8, (8, 4)).astype(np.int8)})
    assert [op.kind for op in p.ops] == [K.QuantizedMatMul]
    p.tensors[p.ops[0].inputs[0]].dtype = dt
    with pytest.raises(dg.IRError, match=rf"QuantizedMatMul\): input 0 \(src\) .* must be a u8 or s8 tensor, it is {dt}"):
        _backend.check_ir(write_program(p))


def test_an_unknown_dtype_code_is_refused(engine, tmp_path):
    t = unpack(write_program(relu_program(engine)))
    t.tensors[0].dtype = 12  # one past f8_e5m2
    with pytest.raises(dg.IRError, match="unknown dtype 12"):
        _backend.check_ir(pack(t))
    (tmp_path / "bad.dg").write_bytes(seal(pack(t)))
    with pytest.raises(dg.IRError, match="unknown dtype 12"):
        dg.load(tmp_path / "bad.dg")


@pytest.mark.parametrize("src,dst", [(dg.f8_e4m3, dg.i32), (dg.boolean, dg.f8_e5m2)], ids=str)
def test_a_typecast_of_f8_to_or_from_a_non_float_is_a_typed_error(src, dst, tmp_path, engine):
    """Both dtypes are in TypeCast's class; the pair is not: load's check of the op rules refuses it,
    and the C++ runtime alone refuses it when it builds the graph."""
    p = cast_program(engine, dg.f32, dg.f16)
    p.tensors[p.inputs[0]].dtype, p.tensors[p.outputs[0]].dtype = src, dst
    _backend.check_ir(write_program(p))  # the classes pass
    with pytest.raises(dg.IRError, match="f8 type converts only to and from"):
        loaded(tmp_path, p)
    cp = raw(p, engine)
    data = np.zeros((3, 4), np.uint8 if src.is_f8 else np.bool_)
    with pytest.raises(dg.CompileError, match="f8 converts only to and from floats"):
        cp.run([data], [dst.numpy])


def test_zero_points_of_an_f8_quantize_are_a_typed_error(tmp_path, engine):
    x, y = dg.LogicalTensor(0, dg.f32, [dg.Dim("n"), 4]), dg.LogicalTensor(1, dg.f8_e4m3)

    def build(g):
        g.add_op(dg.Op(0, K.Quantize, [x], [y], {"scales": [1.0]}))
        return [y]

    p = program(engine, build, [x])
    p.ops[0].attrs["zps"] = (3,)
    with pytest.raises(dg.IRError, match="zero points are not supported for f8_e4m3"):
        loaded(tmp_path, p)
    with pytest.raises(dg.CompileError, match="zero point 3 is outside the range of f8_e4m3"):
        raw(p, engine).run([np.zeros((2, 4), np.float32)], [np.uint8])


def test_a_zero_point_tensor_of_an_f8_dynamic_dequantize_is_a_typed_error(tmp_path, engine):
    x, s, z, y = (dg.LogicalTensor(0, dg.u8, [dg.Dim("n"), 4]), dg.LogicalTensor(1, dg.f32, [1]),
                  dg.LogicalTensor(2, dg.u8, [1]), dg.LogicalTensor(3, dg.f32))

    def build(g):
        g.add_op(dg.Op(0, K.DynamicDequantize, [x, s, z], [y]))
        return [y]

    p = program(engine, build, [x, s, z])
    p.tensors[p.inputs[0]].dtype = dg.f8_e5m2
    with pytest.raises(dg.IRError, match="zero points are not supported for f8_e5m2"):
        loaded(tmp_path, p)
    args = [np.zeros((2, 4), np.uint8), np.ones(1, np.float32), np.zeros(1, np.uint8)]
    with pytest.raises(dg.CompileError, match="zero points for f8_e5m2"):
        raw(p, engine).run(args, [np.float32])
