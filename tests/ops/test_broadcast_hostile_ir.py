"""IRs that bypassed the Python API, with an output larger than its inputs
broadcast to (or a slice starting past its input): refused with a
CompileError when the graph is built, never read out of bounds. The
broadcasting kernels (binary, compare, select), the strided copy of rank-5/6
tensors and the broadcast by a copy check every operand against the output."""

import copy

import numpy as np
import pytest

import dyngraph as dg
from dyngraph.compiled_partition import CompiledPartition
from dyngraph.symbolic import Expr
from oputil import compile_op

K = dg.OpKind


def tampered(cp, tamper):
    prog = copy.deepcopy(cp.program)
    tamper(prog)
    return CompiledPartition.create(prog, {}, cp.engine, 4)


def with_output_dim(cp, axis, size):
    def tamper(prog):
        out = prog.outputs[0]
        d = list(prog.tensors[out].shape)
        d[axis] = Expr.const(size)
        prog.tensors[out].shape = tuple(d)
    return tampered(cp, tamper)


@pytest.mark.parametrize("kind,dtype", [(K.Maximum, dg.f32), (K.SquaredDifference, dg.f32), (K.Add, dg.i32),
                                        (K.Multiply, dg.i32)])
def test_a_binary_kernel_output_beyond_its_operands_is_refused(kind, dtype):
    cp = compile_op(kind, [[4], [4]], in_dtypes=dtype)
    a = np.arange(4).astype(dtype.numpy)
    with pytest.raises(dg.CompileError, match="does not broadcast"):
        with_output_dim(cp, 0, 1 << 22)(a, a)


def test_a_compare_output_beyond_its_operands_is_refused():
    cp = compile_op(K.Less, [[4], [4]], out_dtypes=dg.boolean)
    a = np.arange(4).astype(np.float32)
    with pytest.raises(dg.CompileError, match="does not broadcast"):
        with_output_dim(cp, 0, 64)(a, a)


def test_a_rank_5_matmul_batch_that_does_not_broadcast_is_refused():
    cp = compile_op(K.MatMul, [[2, 1, 1, 4, 8], [1, 1, 1, 8, 4]])
    a, b = np.ones((2, 1, 1, 4, 8), np.float32), np.ones((1, 1, 1, 8, 4), np.float32)
    with pytest.raises(dg.CompileError, match="does not broadcast"):
        with_output_dim(cp, 0, 3)(a, b)


def test_a_rank_6_elementwise_output_that_its_inputs_do_not_broadcast_to_is_refused():
    sa, sb = [2, 1, 3, 1, 2, 1], [1, 2, 1, 2, 1, 3]  # 6 groups: the first input is broadcast by a copy
    cp = compile_op(K.Add, [sa, sb])
    with pytest.raises(dg.CompileError, match="does not broadcast"):
        with_output_dim(cp, 0, 1 << 20)(np.ones(sa, np.float32), np.zeros(sb, np.float32))


@pytest.mark.parametrize("start", [1, 1000, 1 << 40])
def test_a_rank_5_slice_starting_past_its_input_is_refused(start):
    cp = compile_op(K.Slice, [[1, 2, 3, 4, 5]], attrs={"begin": [0], "end": [1], "axes": [4], "steps": [1]})

    def tamper(prog):
        st = list(prog.ops[0].attrs["starts"])
        st[0] = Expr.const(start)
        prog.ops[0].attrs["starts"] = tuple(st)
    with pytest.raises(dg.CompileError, match="outside the input"):
        tampered(cp, tamper)(np.zeros((1, 2, 3, 4, 5), np.float32))


def test_a_rank_5_slice_whose_last_element_is_past_its_input_is_refused():
    cp = compile_op(K.Slice, [[1, 2, 3, 4, 5]], attrs={"begin": [1], "end": [3], "axes": [1], "steps": [1]})

    def tamper(prog):  # the output claims 1 + 5 rows of axis 1 (of 2)
        out = prog.outputs[0]
        d = list(prog.tensors[out].shape)
        d[1] = Expr.const(5)
        prog.tensors[out].shape = tuple(d)
    with pytest.raises(dg.CompileError, match="goes outside its source"):
        tampered(cp, tamper)(np.zeros((1, 2, 3, 4, 5), np.float32))


def test_untampered_rank_5_slice_and_binary_kernel_still_run(rng):
    cp = compile_op(K.Slice, [[1, 2, 3, 4, 5]], attrs={"begin": [1], "end": [4], "axes": [4], "steps": [2]})
    x = rng.standard_normal((1, 2, 3, 4, 5)).astype(np.float32)
    np.testing.assert_array_equal(tampered(cp, lambda p: None)(x)[0], x[..., 1:4:2])
    cp = compile_op(K.Maximum, [[3, 4], [4]])
    a, b = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    np.testing.assert_array_equal(tampered(cp, lambda p: None)(a, b)[0], np.maximum(a, b))
