"""An IR that bypassed the Python API (tampered shapes and attributes of the
spatial ops) is refused with a CompileError naming the op when its graph is
built, never read out of bounds by a kernel: the lowerings check the IR's
shapes against each other (weights against channels and groups, outputs
against the window arithmetic, per-channel parameters against channels,
windows against the input)."""

import copy

import numpy as np
import pytest

import dyngraph as dg
from dyngraph.compiled_partition import CompiledPartition
from dyngraph.symbolic import Expr
from oputil import compile_op

K = dg.OpKind
D = dg.DYNAMIC_DIM


def rebuilt(cp, tamper, data):
    prog = copy.deepcopy(cp.program)
    tamper(prog)
    return CompiledPartition.create(prog, data, cp.engine, 4)


def refused(cp, tamper, data, x, match):
    with pytest.raises(dg.CompileError, match=match):
        rebuilt(cp, tamper, data)(x)


def conv_op(rng, groups=1):
    w = rng.standard_normal((8, 6 // groups, 3, 3)).astype(np.float32)
    attrs = dict(strides=[1, 1], dilations=[1, 1], pads_begin=[1, 1], pads_end=[1, 1], groups=groups,
                 data_format="NCX", weights_format="OIX")
    return compile_op(K.Convolution, [[D, 6, 8, 8], list(w.shape)], attrs=attrs, constants={1: w}), w


def shape(prog, tidx, dims):
    prog.tensors[tidx].shape = tuple(Expr.const(d) if isinstance(d, int) else d for d in dims)


def test_untampered_conv_runs(rng):
    cp, w = conv_op(rng)
    x = rng.standard_normal((2, 6, 8, 8)).astype(np.float32)
    np.testing.assert_array_equal(rebuilt(cp, lambda p: None, {1: w})(x)[0], cp(x)[0])


def test_weights_that_do_not_fit_the_channels_are_refused(rng):
    cp, w = conv_op(rng)
    w2 = np.zeros((8, 5, 3, 3), np.float32)
    x = np.zeros((2, 6, 8, 8), np.float32)
    refused(cp, lambda p: shape(p, 1, w2.shape), {1: w2}, x, "weights .* do not fit")


def test_groups_that_do_not_divide_the_channels_are_refused(rng):
    cp, w = conv_op(rng, groups=2)
    x = np.zeros((2, 6, 8, 8), np.float32)

    def tamper(p):
        p.ops[0].attrs["groups"] = 3  # 6 input channels, 8 output channels
    refused(cp, tamper, {1: w}, x, "output channels in 3 groups")


def test_an_output_larger_than_the_window_arithmetic_is_refused(rng):
    cp, w = conv_op(rng)
    x = np.zeros((2, 6, 8, 8), np.float32)
    out = cp.program.outputs[0]

    def tamper(p):
        d = list(p.tensors[out].shape)
        d[3] = d[3] + 4
        shape(p, out, d)
    refused(cp, tamper, {1: w}, x, "is not the output of this convolution")


def test_a_pool_window_outside_the_input_is_refused(rng):
    cp = compile_op(K.MaxPool, [[D, 2, 8, 8]], attrs=dict(kernel=[2, 2], strides=[2, 2], pads_begin=[0, 0],
                                                          pads_end=[0, 0], data_format="NCX"))
    x = np.zeros((1, 2, 8, 8), np.float32)

    def tamper(p):
        p.ops[0].attrs["resolved_pads_begin"] = (Expr.const(5), Expr.const(0))
    refused(cp, tamper, {}, x, "lies outside src|is not the output of this pooling")


def test_a_pool_output_larger_than_its_windows_is_refused(rng):
    cp = compile_op(K.MaxPool, [[D, 2, 8, 8]], attrs=dict(kernel=[2, 2], strides=[2, 2], pads_begin=[0, 0],
                                                          pads_end=[0, 0], data_format="NCX"))
    out = cp.program.outputs[0]

    def tamper(p):
        d = list(p.tensors[out].shape)
        d[3] = d[3] + 1  # 5 windows of 2 with stride 2 over 8 columns: the last starts at 8, past the input
        shape(p, out, d)
    refused(cp, tamper, {}, np.zeros((1, 2, 8, 8), np.float32), "is not the output of this pooling")


def test_a_conv_transpose_output_of_the_wrong_size_is_refused(rng):
    w = rng.standard_normal((6, 2, 3, 3)).astype(np.float32)
    cp = compile_op(K.ConvTranspose, [[D, 6, 4, 4], list(w.shape)], constants={1: w},
                    attrs=dict(strides=[2, 2], dilations=[1, 1], pads_begin=[1, 1], pads_end=[1, 1], data_format="NCX",
                               weights_format="IOX"))
    out = cp.program.outputs[0]

    def tamper(p):
        d = list(p.tensors[out].shape)
        d[2] = d[2] + 3
        shape(p, out, d)
    refused(cp, tamper, {1: w}, np.zeros((1, 6, 4, 4), np.float32), "is not the output of this transposed convolution")


def test_window_attributes_beyond_2_to_the_31_in_a_file_are_ir_errors(rng):
    cp = compile_op(K.MaxPool, [[D, 2, 8, 8]], attrs=dict(kernel=[2, 2], strides=[2, 2], pads_begin=[0, 0],
                                                          pads_end=[0, 0], data_format="NCX"))

    def tamper(p):
        p.ops[0].attrs["strides"] = (1, 1 << 62)
    with pytest.raises(dg.IRError, match="'strides' must be <= 2147483647"):
        rebuilt(cp, tamper, {})


def test_a_conv_window_larger_than_the_padded_input_is_refused(rng):
    cp, w = conv_op(rng)
    out = cp.program.outputs[0]

    def tamper(p):  # a 3-tap window dilated by 5 spans 11 columns of 8 + 1 + 1: no output (C++'s -1 / 2 + 1 said one)
        p.ops[0].attrs["strides"] = (1, 2)
        p.ops[0].attrs["dilations"] = (1, 5)
        d = list(p.tensors[out].shape)
        d[3] = Expr.const(1)
        shape(p, out, d)
    refused(cp, tamper, {1: w}, np.zeros((2, 6, 8, 8), np.float32), "is not the output of this convolution")


def test_a_batch_norm_parameter_of_the_wrong_length_is_refused(rng):
    p4 = [np.ones(4, np.float32)] * 4
    cp = compile_op(K.BatchNormInference, [[D, 4, D]] + [[4]] * 4, attrs={"epsilon": 1e-5, "data_format": "NCX"},
                    constants={i + 1: v for i, v in enumerate(p4)})
    x = np.zeros((1, 4, 3), np.float32)
    data = {i + 1: v for i, v in enumerate(p4)}
    data[3] = np.ones(5, np.float32)
    refused(cp, lambda p: shape(p, 3, (5,)), data, x, "mean .* must have the 4 channels")


def test_group_norm_groups_that_do_not_divide_are_refused(rng):
    cp = compile_op(K.GroupNorm, [[D, 6, D]], attrs={"groups": 2, "use_affine": False, "data_format": "NCX"})
    x = np.zeros((1, 6, 3), np.float32)

    def tamper(p):
        p.ops[0].attrs["groups"] = 4
    refused(cp, tamper, {}, x, "4 groups of 6 channels")


def test_interpolate_with_other_output_channels_is_refused(rng):
    cp = compile_op(K.Interpolate, [[D, 3, 4, 4]], attrs={"mode": "nearest", "scales": [2.0, 2.0],
                                                          "data_format": "NCX"})
    x = np.zeros((1, 3, 4, 4), np.float32)
    out = cp.program.outputs[0]

    def tamper(p):
        d = list(p.tensors[out].shape)
        d[1] = 5
        shape(p, out, d)
    refused(cp, tamper, {}, x, "must have the batch and channels of src")
