"""The int8 convolution: QuantizedConvolution against numpy's integer
arithmetic (dyngraph/reference/spatial.py, int8_conv: the integer sums
exact, each f32 step rounded once on both sides, so the outputs are equal,
not close), each compiled once with a dynamic batch and spatial size and run
at several shapes: windows, groups, layouts, zero points, signedness, bias,
requantization, saturation, sums beyond 32 bits, and every kernel variant."""

import os
import textwrap

import numpy as np
import pytest
from oputil import INT8_NP, INT8_RANGE, compile_op, int8_values, run
from subproc import run_python

import dyngraph as dg
from dyngraph.reference import spatial_numpy as sp
from dyngraph.reference.spatial import int8_conv

K = dg.OpKind
D = dg.DYNAMIC_DIM
NP, RANGE, ints = INT8_NP, INT8_RANGE, int8_values


def data_shape(fmt, n, c, spatial):
    return [n, c, *spatial] if fmt == "NCX" else [n, *spatial, c]


def weight_shape(wfmt, o, i, ks):
    return {"OIX": [o, i, *ks], "XIO": [*ks, i, o], "OXI": [o, *ks, i]}[wfmt]


def qconv_attrs(rng, fmt, wfmt, ks, adt=dg.u8, wdt=dg.s8, o=8, per_channel=True, out=dg.f32, groups=1, strides=None,
                dilations=None, pb=None, pe=None):
    ns = len(ks)
    zlo, zhi = RANGE[adt]
    wlo, whi = RANGE[wdt]
    c = o if per_channel else 1
    attrs = dict(strides=strides or [1] * ns, dilations=dilations or [1] * ns, pads_begin=pb or [0] * ns,
                 pads_end=pe or [0] * ns, groups=groups, data_format=fmt, weights_format=wfmt,
                 src_scale=float(rng.uniform(0.01, 0.1)), src_zp=int(rng.integers(zlo, zhi)),
                 wei_scales=[float(v) for v in rng.uniform(0.001, 0.05, c)],
                 wei_zps=[int(v) for v in rng.integers(wlo, whi, c)])
    if out in NP:
        attrs.update(dst_scale=float(rng.uniform(0.5, 2.0)), dst_zp=int(rng.integers(*RANGE[out])))
    return attrs


def compile_qconv(rng, C, O, ks, attrs, adt=dg.u8, wdt=dg.s8, out=dg.f32, bias=True, constant=True, spatial=None,
                  **options):
    """A QuantizedConvolution with a dynamic batch and (unless given) dynamic spatial sizes."""
    w = ints(rng, wdt, weight_shape(attrs["weights_format"], O, C // attrs["groups"], ks))
    b = rng.standard_normal(O).astype(np.float32) if bias else None
    shapes = [data_shape(attrs["data_format"], D, C, spatial or [D] * len(ks)), list(w.shape)] + ([[O]] if bias else [])
    dtypes = [adt, wdt] + ([dg.f32] if bias else [])
    consts = {1: w, **({2: b} if bias else {})} if constant else ({2: b} if bias else {})
    cp = compile_op(K.QuantizedConvolution, shapes, dtypes, attrs, out_dtypes=out, constants=consts, **options)
    return cp, w, b


def reference(x, w, b, attrs, out):
    return int8_conv(x, w, b, attrs, attrs["pads_begin"], attrs["pads_end"], out)


def check_at_shapes(cp, rng, w, b, attrs, C, out, shapes, adt=dg.u8, extra=()):
    for n, *spatial in shapes:
        x = ints(rng, adt, data_shape(attrs["data_format"], n, C, spatial))
        (got,) = run(cp, x, *extra)
        want = reference(x, w, b, attrs, out)
        assert got.dtype == out.numpy and got.shape == want.shape, (got.dtype, got.shape, want.shape)
        np.testing.assert_array_equal(got, want)


WINDOWS = {
    "3x3 pad 1": dict(ks=(3, 3), pb=[1, 1], pe=[1, 1]),
    "3x3 stride 2": dict(ks=(3, 3), strides=[2, 2], pb=[1, 1], pe=[1, 1]),
    "7x7 stem": dict(ks=(7, 7), strides=[2, 2], pb=[3, 3], pe=[3, 3]),
    "asymmetric dilated": dict(ks=(3, 2), strides=[1, 2], dilations=[2, 1], pb=[2, 0], pe=[1, 1]),
    "1x1": dict(ks=(1, 1)),
    "1x1 stride 2": dict(ks=(1, 1), strides=[2, 2]),
}


@pytest.mark.parametrize("fmt", ["NCX", "NXC"])
@pytest.mark.parametrize("wfmt", ["OIX", "XIO", "OXI"])
@pytest.mark.parametrize("window", list(WINDOWS))
def test_quantized_conv_equals_integer_arithmetic_at_three_shapes(fmt, wfmt, window, rng):
    case = dict(WINDOWS[window])
    ks = case.pop("ks")
    attrs = qconv_attrs(rng, fmt, wfmt, ks, **case)
    cp, w, b = compile_qconv(rng, 6, 8, ks, attrs)
    check_at_shapes(cp, rng, w, b, attrs, 6, dg.f32, [(1, 9, 9), (3, 16, 11), (2, 23, 30)])
    assert cp.cache_info().builds == 3


@pytest.mark.parametrize("fmt", ["NCX", "NXC"])
@pytest.mark.parametrize("groups,C,O", [(2, 6, 4), (6, 6, 6), (4, 4, 8), (3, 24, 48)],
                         ids=["grouped", "depthwise", "depthwise x2", "3 groups of 8"])
def test_grouped_and_depthwise_quantized_conv(fmt, groups, C, O, rng):
    attrs = qconv_attrs(rng, fmt, "OIX", (3, 3), o=O, groups=groups, strides=[2, 1], pb=[1, 0], pe=[0, 2])
    cp, w, b = compile_qconv(rng, C, O, (3, 3), attrs)
    check_at_shapes(cp, rng, w, b, attrs, C, dg.f32, [(1, 5, 7), (2, 12, 9)])


@pytest.mark.parametrize("adt,wdt", [(dg.u8, dg.s8), (dg.s8, dg.s8), (dg.u8, dg.u8), (dg.s8, dg.u8)])
@pytest.mark.parametrize("per_channel", [True, False])
@pytest.mark.parametrize("fmt", ["NCX", "NXC"])
def test_every_signedness_and_zero_point_form(adt, wdt, per_channel, fmt, rng):
    attrs = qconv_attrs(rng, fmt, "XIO", (3, 3), adt=adt, wdt=wdt, per_channel=per_channel, pb=[1, 1], pe=[1, 1])
    cp, w, b = compile_qconv(rng, 5, 8, (3, 3), attrs, adt=adt, wdt=wdt)
    check_at_shapes(cp, rng, w, b, attrs, 5, dg.f32, [(1, 6, 6), (2, 9, 4)], adt=adt)


@pytest.mark.parametrize("adt,wdt", [(dg.u8, dg.s8), (dg.s8, dg.u8)])
@pytest.mark.parametrize("fmt", ["NCX", "NXC"])
def test_depthwise_with_every_signedness(adt, wdt, fmt, rng):
    attrs = qconv_attrs(rng, fmt, "XIO", (3, 3), adt=adt, wdt=wdt, o=7, groups=7, pb=[1, 1], pe=[1, 1])
    cp, w, b = compile_qconv(rng, 7, 7, (3, 3), attrs, adt=adt, wdt=wdt)
    check_at_shapes(cp, rng, w, b, attrs, 7, dg.f32, [(1, 6, 6), (3, 9, 4)], adt=adt)


@pytest.mark.parametrize("out", [dg.f32, dg.u8, dg.s8])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("fmt", ["NCX", "NXC"])
def test_bias_and_requantized_outputs(out, bias, fmt, rng):
    attrs = qconv_attrs(rng, fmt, "OIX", (3, 3), out=out, pb=[1, 1], pe=[1, 1])
    cp, w, b = compile_qconv(rng, 6, 8, (3, 3), attrs, out=out, bias=bias)
    check_at_shapes(cp, rng, w, b, attrs, 6, out, [(1, 7, 7), (2, 10, 5)])


@pytest.mark.parametrize("out", [dg.u8, dg.s8])
@pytest.mark.parametrize("depthwise", [False, True])
def test_requantized_outputs_saturate_at_both_ends(out, depthwise, rng):
    groups = 6 if depthwise else 1
    attrs = qconv_attrs(rng, "NXC", "OIX", (3, 3), out=out, o=6, groups=groups, pb=[1, 1], pe=[1, 1])
    attrs.update(dst_scale=1e-3, dst_zp=0, src_zp=0 if out is dg.s8 else 128)
    cp, w, b = compile_qconv(rng, 6, 6, (3, 3), attrs, out=out)
    x = ints(rng, dg.u8, [2, 8, 8, 6])
    (got,) = run(cp, x)
    np.testing.assert_array_equal(got, reference(x, w, b, attrs, out))
    lo, hi = RANGE[out]
    assert (got == lo).any() and (got == hi - 1).any()


def test_one_dimensional_quantized_conv(rng):
    ncw = dg.Dim("w", min=1, max=100)
    attrs = qconv_attrs(rng, "NCX", "OIX", (5,), strides=[2], dilations=[2], pb=[3], pe=[1])
    cp, w, b = compile_qconv(rng, 4, 8, (5,), attrs, spatial=[ncw])
    check_at_shapes(cp, rng, w, b, attrs, 4, dg.f32, [(1, 9), (3, 40), (2, 17)])


def test_weights_given_at_execution(rng):
    attrs = qconv_attrs(rng, "NCX", "XIO", (3, 3), pb=[1, 1], pe=[1, 1])
    cp, _, b = compile_qconv(rng, 6, 8, (3, 3), attrs, constant=False)
    for n in (1, 2):
        x, w = ints(rng, dg.u8, [n, 6, 7, 7]), ints(rng, dg.s8, [3, 3, 6, 8])
        (got,) = run(cp, x, w)
        np.testing.assert_array_equal(got, reference(x, w, b, attrs, dg.f32))


@pytest.mark.parametrize("groups", [1, 2])
def test_windows_of_more_than_65536_values_sum_beyond_32_bits(groups, rng):
    """K = 1024 channels x 70 taps per output: 32-bit partial sums of every kernel variant are flushed in
    time; the extreme values make the total exceed 2^31."""
    C, kw = 1024 * groups, 70
    attrs = dict(strides=[1], dilations=[1], pads_begin=[0], pads_end=[0], groups=groups, data_format="NXC",
                 weights_format="OIX", src_scale=1.0, src_zp=0, wei_scales=[1.0], wei_zps=[])
    w = np.full((2 * groups, C // groups, kw), -128, np.int8)
    w[1::2] = rng.integers(-128, 128, w[1::2].shape)
    cp = compile_op(K.QuantizedConvolution, [[D, D, C], list(w.shape)], [dg.u8, dg.s8], attrs, out_dtypes=dg.f32,
                    constants={1: w}, engine=dg.Engine(dg.Engine.CPU, num_threads=2))
    x = np.full((1, kw + 1, C), 255, np.uint8)
    (got,) = run(cp, x)
    want = reference(x, w, None, attrs, dg.f32)
    assert abs(float(want[0, 0, 0])) > 2**31
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("fmt", ["NCX", "NXC"])
def test_depthwise_kernels_beyond_258_taps_sum_in_integers(fmt, rng):
    """Up to 258 taps the depthwise sums are exact in f32 (integers below 2^24); a longer kernel sums in int64."""
    C, kw = 3, 300
    attrs = dict(strides=[1], dilations=[1], pads_begin=[10], pads_end=[0], groups=C, data_format=fmt,
                 weights_format="OIX", src_scale=1.0, src_zp=255, wei_scales=[1.0], wei_zps=[127])
    w = np.full((C, 1, kw), -128, np.int8)
    cp = compile_op(K.QuantizedConvolution, [data_shape(fmt, D, C, [D]), list(w.shape)], [dg.u8, dg.s8], attrs,
                    out_dtypes=dg.f32, constants={1: w})
    x = np.zeros(data_shape(fmt, 2, C, [kw + 5]), np.uint8)
    (got,) = run(cp, x)
    want = reference(x, w, None, attrs, dg.f32)
    assert np.abs(want).max() > 2**24
    np.testing.assert_array_equal(got, want)


def test_two_threads_compute_the_same_numbers(rng):
    attrs = qconv_attrs(rng, "NCX", "OIX", (3, 3), out=dg.u8, pb=[1, 1], pe=[1, 1])
    w = ints(rng, dg.s8, [8, 6, 3, 3])
    cps = [compile_op(K.QuantizedConvolution, [[D, 6, D, D], list(w.shape)], [dg.u8, dg.s8], attrs, out_dtypes=dg.u8,
                      constants={1: w}, engine=dg.Engine(dg.Engine.CPU, num_threads=t)) for t in (1, 2)]
    x = ints(rng, dg.u8, [3, 6, 13, 9])
    got = [run(cp, x)[0] for cp in cps]
    np.testing.assert_array_equal(got[0], got[1])
    np.testing.assert_array_equal(got[0], reference(x, w, None, attrs, dg.u8))


def test_the_reference_sums_every_tap_with_the_padding_as_the_zero_point(rng):
    """int8_conv against a loop over every output and tap, in Python integers."""
    attrs = qconv_attrs(rng, "NCX", "OIX", (2, 3), o=4, groups=2, strides=[1, 2], dilations=[2, 1], pb=[1, 2],
                        pe=[0, 1])
    x, w = ints(rng, dg.u8, [1, 4, 5, 6]), ints(rng, dg.s8, [4, 2, 2, 3])
    got = reference(x, w, None, attrs, dg.f32)
    oh, ow = (sp.out_size(5, 2, 1, 2, 1, 0), sp.out_size(6, 3, 2, 1, 2, 1))
    assert got.shape == (1, 4, oh, ow)
    za, zw = attrs["src_zp"], attrs["wei_zps"]
    for o in range(4):
        g = o // 2
        for y in range(oh):
            for z in range(ow):
                acc = 0
                for i in range(2):
                    for kh in range(2):
                        for kw in range(3):
                            ih, iw = y + 2 * kh - 1, 2 * z + kw - 2
                            v = int(x[0, 2 * g + i, ih, iw]) if 0 <= ih < 5 and 0 <= iw < 6 else za
                            acc += (v - za) * (int(w[o, i, kh, kw]) - zw[o])
                scale = np.float32(np.float32(attrs["src_scale"]) * np.float32(attrs["wei_scales"][o]))
                assert got[0, o, y, z] == np.float32(np.float32(acc) * scale)


VARIANT = textwrap.dedent("""
    import numpy as np, dyngraph as dg, sys
    sys.path.insert(0, {tests!r})
    from dyngraph.reference.spatial import int8_conv
    assert dg._backend.kernel_isa() == {isa!r}, dg._backend.kernel_isa()
    rng = np.random.default_rng(1)
    D = dg.DYNAMIC_DIM
    for fmt, groups, C, O, adt, wdt in (("NCX", 1, 6, 9, dg.u8, dg.s8), ("NXC", 1, 40, 5, dg.s8, dg.u8),
                                        ("NXC", 2, 8, 6, dg.u8, dg.u8), ("NCX", 5, 5, 5, dg.s8, dg.s8)):
        attrs = dict(strides=[1, 2], dilations=[1, 1], pads_begin=[1, 0], pads_end=[2, 1], groups=groups,
                     data_format=fmt, weights_format="OIX", src_scale=0.05, src_zp=3, wei_scales=[0.01] * O,
                     wei_zps=[int(v) for v in rng.integers(0, 5, O)], dst_scale=0.3, dst_zp=7)
        lo = 0 if wdt is dg.u8 else -128
        W = rng.integers(lo, lo + 256, (O, C // groups, 3, 3)).astype(wdt.numpy)
        b = dg.GraphBuilder()
        xs = [D, C, D, D] if fmt == "NCX" else [D, D, D, C]
        y = b.op(dg.OpKind.QuantizedConvolution, [b.input("x", adt, xs), b.constant("w", W, dtype=wdt)], attrs,
                 dtype=dg.u8)
        b.output(y)
        cp = b.compile(dg.Engine(dg.Engine.CPU, num_threads=2))
        for n, h, w in ((1, 5, 6), (2, 11, 9)):
            lo = 0 if adt is dg.u8 else -128
            x = rng.integers(lo, lo + 256, (n, C, h, w) if fmt == "NCX" else (n, h, w, C)).astype(adt.numpy)
            (out,) = cp(x)
            want = int8_conv(x, W, None, attrs, [1, 0], [2, 1], dg.u8)
            assert (out == want).all(), (fmt, groups, n)
    print("ok")
""")


@pytest.mark.parametrize("isa", ["generic", "avx2", "avx512", "avx512vnni"])
def test_every_kernel_variant_computes_the_same_integers(isa):
    import dyngraph as _dg

    levels = ["generic", "avx2", "avx512", "avx512vnni"]
    if levels.index(isa) > levels.index(_dg._backend.kernel_isa()):
        pytest.skip(f"this CPU has no {isa}")
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = run_python(VARIANT.format(tests=tests, isa=isa), env_vars={"DYNGRAPH_KERNEL_ISA": isa})
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr


@pytest.mark.parametrize("change,error,match", [
    (dict(wei_scales=[0.01] * 3), dg.ShapeError, "wei_scales: 3 entries for 8 output channels"),
    (dict(wei_zps=[200] * 8), dg.ShapeError, "range of s8"),
    (dict(src_zp=-1), dg.ShapeError, "range of u8"),
    (dict(src_scale=0.0), dg.ShapeError, "positive"),
    (dict(weights_format="IOX"), dg.GraphError, "weights_format"),
    (dict(groups=4), dg.ShapeError, "groups"),
], ids=["scale count", "weight zp", "src zp", "scale", "weights format", "groups"])
def test_bad_quantized_conv_attributes_are_typed_errors(change, error, match, rng):
    attrs = dict(qconv_attrs(rng, "NCX", "OIX", (3, 3)), **change)
    with pytest.raises(error, match=match):
        compile_op(K.QuantizedConvolution, [[1, 6, 8, 8], [8, 6, 3, 3]], [dg.u8, dg.s8], attrs, out_dtypes=dg.f32)


def test_quantized_conv_dtypes_and_ranks_are_checked(rng):
    attrs = qconv_attrs(rng, "NCX", "OIX", (3, 3))
    with pytest.raises(dg.DTypeError):
        compile_op(K.QuantizedConvolution, [[1, 6, 8, 8], [8, 6, 3, 3]], [dg.f32, dg.s8], attrs, out_dtypes=dg.f32)
    with pytest.raises(dg.DTypeError, match="bias must be f32"):
        compile_op(K.QuantizedConvolution, [[1, 6, 8, 8], [8, 6, 3, 3], [8]], [dg.u8, dg.s8, dg.f16], attrs,
                   out_dtypes=dg.f32)
    with pytest.raises(dg.ShapeError, match="rank 4"):
        compile_op(K.QuantizedConvolution, [[1, 6, 8, 8], [8, 6, 9]], [dg.u8, dg.s8], attrs, out_dtypes=dg.f32)
