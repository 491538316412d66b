"""A QuantizedConvolution in an IR that bypassed the Python API (tampered
shapes, attributes and dtypes) is refused with a typed error naming what is
wrong (IRError when the IR is read, CompileError when its graph is built),
never read out of bounds by the kernel: the reader checks every declared
attribute constraint, the lowering the shapes against each other and the
scales and zero points against the channels and dtypes."""

import copy

import numpy as np
import pytest

import dyngraph as dg
from dyngraph.compiled_partition import CompiledPartition
from dyngraph.dtypes import DataType
from dyngraph.symbolic import Expr
from oputil import compile_op

K = dg.OpKind
D = dg.DYNAMIC_DIM
TYPED = (dg.CompileError, dg.IRError)


def qconv(rng, groups=1):
    w = rng.integers(-128, 128, (8, 6 // groups, 3, 3)).astype(np.int8)
    b = np.ones(8, np.float32)
    attrs = dict(strides=[1, 1], dilations=[1, 1], pads_begin=[1, 1], pads_end=[1, 1], groups=groups,
                 data_format="NCX", weights_format="OIX", src_scale=0.1, src_zp=3, wei_scales=[0.01] * 8,
                 wei_zps=[1] * 8, dst_scale=0.5, dst_zp=7)
    cp = compile_op(K.QuantizedConvolution, [[D, 6, 8, 8], list(w.shape), [8]], [dg.u8, dg.s8, dg.f32], attrs,
                    out_dtypes=dg.u8, constants={1: w, 2: b})
    return cp, {1: w, 2: b}


X = np.zeros((2, 6, 8, 8), np.uint8)


def rebuilt(cp, tamper, data):
    prog = copy.deepcopy(cp.program)
    tamper(prog)
    return CompiledPartition.create(prog, data, cp.engine, 4)


def refused(cp, tamper, data, match, x=X):
    with pytest.raises(TYPED, match=match):
        rebuilt(cp, tamper, data)(x)


def shape(prog, tidx, dims):
    prog.tensors[tidx].shape = tuple(Expr.const(d) if isinstance(d, int) else d for d in dims)


def op_attrs(**kw):
    def tamper(p):
        p.ops[0].attrs.update(kw)
    return tamper


def test_an_untampered_int8_conv_runs(rng):
    cp, data = qconv(rng)
    x = rng.integers(0, 256, X.shape).astype(np.uint8)
    np.testing.assert_array_equal(rebuilt(cp, lambda p: None, data)(x)[0], cp(x)[0])


def test_weights_of_the_wrong_rank_are_refused(rng):
    cp, data = qconv(rng)
    w3 = np.zeros((8, 6, 9), np.int8)
    refused(cp, lambda p: shape(p, 1, w3.shape), {1: w3, 2: data[2]}, "src's rank|rank")


def test_weights_that_do_not_fit_the_channels_are_refused(rng):
    cp, data = qconv(rng)
    w2 = np.zeros((8, 5, 3, 3), np.int8)
    refused(cp, lambda p: shape(p, 1, w2.shape), {1: w2, 2: data[2]}, "weights .* do not fit")


def test_groups_that_do_not_divide_the_channels_are_refused(rng):
    cp, data = qconv(rng, groups=2)
    refused(cp, op_attrs(groups=3), data, "output channels in 3 groups")


def test_an_output_larger_than_the_window_arithmetic_is_refused(rng):
    cp, data = qconv(rng)
    out = cp.program.outputs[0]

    def tamper(p):
        d = list(p.tensors[out].shape)
        d[3] = d[3] + 4
        shape(p, out, d)
    refused(cp, tamper, data, "is not the output of this convolution")


def test_a_bias_of_the_wrong_length_is_refused(rng):
    cp, data = qconv(rng)
    b5 = np.ones(5, np.float32)
    refused(cp, lambda p: shape(p, 2, (5,)), {1: data[1], 2: b5}, "bias .* must have the 8 output channels")


@pytest.mark.parametrize("attrs,match", [
    (dict(wei_scales=[0.01] * 3), "3 wei_scales for 8 output channels"),
    (dict(wei_scales=[]), "0 wei_scales"),
    (dict(wei_zps=[0] * 5), "5 wei_zps for 8 output channels"),
    (dict(wei_zps=[200] * 8), "wei_zps 200 is outside the range of s8"),
    (dict(src_zp=-5), "src_zp -5 is outside the range of u8"),
    (dict(dst_zp=-1), "dst_zp -1 is outside the range of u8"),
    (dict(src_scale=0.0), "src_scale 0 is not a positive f32"),
    (dict(wei_scales=[-1.0] * 8), "wei_scales -1 is not a positive f32"),
    (dict(dst_scale=1e-50), "dst_scale 1e-50 is not a positive f32"),
    (dict(src_scale=float("inf")), "src_scale"),
    (dict(src_zp=1000), "src_zp"),
], ids=lambda v: str(v) if isinstance(v, str) else "-".join(v))
def test_scales_and_zero_points_out_of_range_are_refused(attrs, match, rng):
    cp, data = qconv(rng)
    refused(cp, op_attrs(**attrs), data, match)


@pytest.mark.parametrize("attrs,match", [
    (dict(strides=[1, 1, 1]), "strides"),
    (dict(strides=[0, 1]), "strides"),
    (dict(dilations=[1]), "dilations"),
    (dict(groups=0), "groups"),
    (dict(resolved_pads_begin=(Expr.const(1),)), "resolved_pads_begin"),
], ids=lambda v: str(v) if isinstance(v, str) else "-".join(v))
def test_window_attributes_out_of_range_are_refused(attrs, match, rng):
    cp, data = qconv(rng)
    refused(cp, op_attrs(**attrs), data, match)


def test_a_float_src_is_refused(rng):
    cp, data = qconv(rng)

    def tamper(p):
        p.tensors[p.inputs[0]].dtype = DataType.f32
    refused(cp, tamper, data, "u8 or s8|dtype", x=X.astype(np.float32))
