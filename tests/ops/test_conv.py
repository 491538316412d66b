"""Convolution and ConvTranspose against float64 numpy references
(dyngraph/reference/spatial_numpy.py), each compiled once with a dynamic batch
and/or dynamic spatial sizes and run at three shapes.

Error bound: a float32 sum of K products, in any order, is within
K * U * sum|w * x| of the exact sum (U = 2**-24); the bias and the rounding
of the result add U * |result|. Every check uses that bound (measured
errors are far below it), which still flags a wrong index (an O(1) error).
"""

import copy

import numpy as np
import pytest

import dyngraph as dg
from oputil import compile_op, run
from dyngraph.compiled_partition import CompiledPartition
from dyngraph.ops.spatial import MAX_KERNEL_DEPTH
from dyngraph.reference import spatial_numpy as ref
from dyngraph.symbolic import Expr

K = dg.OpKind
D = dg.DYNAMIC_DIM
U = 2.0**-24


def assert_conv_close(y, x, w, b, **kw):
    want = ref.conv(x, w, b, **kw)
    wfmt = kw.get("wfmt", "OIX")
    k = np.prod(ref.weights_to_oix(w, wfmt).shape[1:])
    bound = (k + 1) * U * ref.conv_magnitude(x, w, **kw) + U * np.abs(want) + 1e-30
    err = np.abs(y.astype(np.float64) - want)
    worst = np.unravel_index(np.argmax(err / bound), err.shape)
    assert y.shape == want.shape, (y.shape, want.shape)
    assert (err <= bound).all(), f"error {err[worst]} above the bound {bound[worst]} at {worst}"


def conv_attrs(ns, strides=None, dilations=None, pb=None, pe=None, **extra):
    return dict(strides=strides or [1] * ns, dilations=dilations or [1] * ns, pads_begin=pb or [0] * ns,
                pads_end=pe or [0] * ns, **extra)


def shape_of(fmt, n, c, spatial):
    return [n, c, *spatial] if fmt == "NCX" else [n, *spatial, c]


def weight_shape(wfmt, o, i, ks):
    return [o, i, *ks] if wfmt in ("OIX", "IOX") else [*ks, i, o]


def compile_conv(fmt, wfmt, C, O, ks, groups=1, spatial=None, bias=True, constant=True, rng=None, **attrs):
    """A Convolution with a dynamic batch and (unless given) dynamic spatial sizes."""
    ns = len(ks)
    spatial = spatial or [D] * ns
    w = rng.standard_normal(weight_shape(wfmt, O, C // groups, ks)).astype(np.float32)
    b = rng.standard_normal(O).astype(np.float32) if bias else None
    shapes = [shape_of(fmt, D, C, spatial), list(w.shape)] + ([[O]] if bias else [])
    consts = {1: w, **({2: b} if bias else {})} if constant else {}
    a = {**conv_attrs(ns, **{k: attrs.pop(k) for k in ("strides", "dilations", "pb", "pe") if k in attrs}),
         "groups": groups, "data_format": fmt, "weights_format": wfmt, **attrs}
    return compile_op(K.Convolution, shapes, attrs=a, constants=consts), w, b


@pytest.mark.parametrize("fmt", ["NCX", "NXC"])
@pytest.mark.parametrize("wfmt", ["OIX", "XIO"])
@pytest.mark.parametrize("case", [
    dict(ks=(3, 3), strides=[1, 1], pb=[1, 1], pe=[1, 1]),              # ResNet 3x3
    dict(ks=(3, 3), strides=[2, 2], pb=[1, 1], pe=[1, 1]),              # downsampling 3x3
    dict(ks=(7, 7), strides=[2, 2], pb=[3, 3], pe=[3, 3]),              # ResNet stem
    dict(ks=(3, 2), strides=[1, 2], dilations=[2, 1], pb=[2, 0], pe=[1, 1]),  # asymmetric, dilated
    dict(ks=(1, 1)),                                                    # 1x1: read in place
    dict(ks=(1, 1), strides=[2, 2]),                                    # 1x1 strided: gathered
])
def test_conv2d_matches_numpy_at_three_shapes(fmt, wfmt, case, rng):
    case = dict(case)
    ks = case.pop("ks")
    cp, w, b = compile_conv(fmt, wfmt, 6, 8, ks, rng=rng, **case)
    kw = dict(strides=case.get("strides"), dilations=case.get("dilations"), pads_begin=case.get("pb"),
              pads_end=case.get("pe"), fmt=fmt, wfmt=wfmt)
    for n, h, wd in [(1, 9, 9), (3, 16, 11), (2, 23, 30)]:
        x = rng.standard_normal(shape_of(fmt, n, 6, (h, wd))).astype(np.float32)
        (y,) = run(cp, x)
        assert_conv_close(y, x, w, b, **kw)


@pytest.mark.parametrize("fmt", ["NCX", "NXC"])
@pytest.mark.parametrize("groups,C,O", [(2, 6, 4), (3, 6, 9), (6, 6, 6), (6, 6, 12)])
def test_grouped_and_depthwise_conv2d(fmt, groups, C, O, rng):
    """groups == C == O is depthwise (a direct loop); C == groups < O a depth multiplier."""
    for wfmt in ("OIX", "XIO"):
        cp, w, b = compile_conv(fmt, wfmt, C, O, (3, 3), groups, strides=[2, 1], pb=[1, 1], pe=[0, 1], rng=rng)
        for n, h in [(1, 5), (2, 12), (4, 17)]:
            x = rng.standard_normal(shape_of(fmt, n, C, (h, h + 3))).astype(np.float32)
            (y,) = run(cp, x)
            assert_conv_close(y, x, w, b, strides=[2, 1], pads_begin=[1, 1], pads_end=[0, 1], groups=groups, fmt=fmt,
                              wfmt=wfmt)


@pytest.mark.parametrize("wfmt", ["OIX", "XIO"])
@pytest.mark.parametrize("stride,dilation", [(2, 1), (2, 2), (3, 1)])
def test_strided_columns_over_tiles_that_split_output_rows(wfmt, stride, dilation, rng):
    """NCX columns gathered tile by tile: 64 channels x 3x3 make tiles of at
    most 227 positions, evened out over the image and the threads
    (conv_gather::tile_positions), so most start and end inside output rows;
    strides 2 (its own vectorized copy) and 3, with and without dilation, at 1,
    2 and 3 threads, the edges padded."""
    for threads in (1, 2, 3):
        eng = dg.Engine(dg.Engine.CPU, num_threads=threads)
        w = rng.standard_normal(weight_shape(wfmt, 24, 64, (3, 3))).astype(np.float32)
        b = rng.standard_normal(24).astype(np.float32)
        a = {**conv_attrs(2, strides=[stride, stride], dilations=[dilation, dilation], pb=[1, 2], pe=[2, 1]),
             "groups": 1, "data_format": "NCX", "weights_format": wfmt}
        cp = compile_op(K.Convolution, [[D, 64, D, D], list(w.shape), [24]], attrs=a, constants={1: w, 2: b},
                        engine=eng)
        for n, h, wd in [(1, 41, 47), (2, 30, 57)]:
            x = rng.standard_normal((n, 64, h, wd)).astype(np.float32)
            (y,) = run(cp, x)
            assert_conv_close(y, x, w, b, strides=[stride, stride], dilations=[dilation, dilation], pads_begin=[1, 2],
                              pads_end=[2, 1], wfmt=wfmt)


@pytest.mark.parametrize("fmt", ["NCX", "NXC"])
@pytest.mark.parametrize("strides", [[2, 2], [1, 2], [3, 3]])
def test_depthwise_conv2d_strided_along_rows(fmt, strides, rng):
    """The depthwise loop's row kernel (madd_row) with a column stride of 2
    (a vectorized case of its own) and 3, against numpy."""
    cp, w, b = compile_conv(fmt, "OIX", 8, 8, (3, 3), 8, strides=strides, pb=[1, 1], pe=[1, 1], rng=rng)
    for n, h in [(1, 7), (2, 19), (3, 36)]:
        x = rng.standard_normal(shape_of(fmt, n, 8, (h, h + 5))).astype(np.float32)
        (y,) = run(cp, x)
        assert_conv_close(y, x, w, b, strides=strides, pads_begin=[1, 1], pads_end=[1, 1], groups=8, fmt=fmt)


@pytest.mark.parametrize("fmt", ["NCX", "NXC"])
@pytest.mark.parametrize("case", [
    dict(k=3, strides=[1], pb=[1], pe=[1], groups=1),   # Whisper's first conv
    dict(k=3, strides=[2], pb=[1], pe=[1], groups=1),   # Whisper's second conv
    dict(k=10, strides=[5], pb=[0], pe=[0], groups=1),  # Wav2Vec2's feature extractor
    dict(k=8, strides=[1], pb=[4], pe=[4], groups=4),   # Wav2Vec2's positional conv (grouped, even kernel)
    dict(k=5, strides=[1], dilations=[3], pb=[0], pe=[2], groups=8),  # depthwise, dilated
])
def test_conv1d_with_a_dynamic_length(fmt, case, rng):
    case = dict(case)
    k, groups = case.pop("k"), case.pop("groups")
    length = dg.Dim("length", min=12, max=4096)
    cp, w, b = compile_conv(fmt, "OIX", 8, 8, (k,), groups, spatial=[length], rng=rng, **case)
    for n, L in [(1, 12), (2, 97), (3, 400)]:
        x = rng.standard_normal(shape_of(fmt, n, 8, (L,))).astype(np.float32)
        (y,) = run(cp, x)
        assert_conv_close(y, x, w, b, strides=case["strides"], dilations=case.get("dilations"), pads_begin=case["pb"],
                          pads_end=case["pe"], groups=groups, fmt=fmt)


@pytest.mark.parametrize("auto_pad", ["same_upper", "same_lower", "valid"])
@pytest.mark.parametrize("stride", [1, 2, 3])
def test_auto_pad_resolves_padding_per_input_size(auto_pad, stride, rng):
    """same_*: ceil(L / stride) outputs whatever L is (the padding is an
    expression of L); valid: no padding. Pads given with auto_pad are ignored."""
    cp, w, b = compile_conv("NCX", "OIX", 3, 4, (4, 3), strides=[stride, stride], pb=[5, 5], pe=[5, 5],
                            auto_pad=auto_pad, rng=rng)
    for n, h, wd in [(1, 7, 8), (2, 10, 13), (1, 16, 5)]:
        x = rng.standard_normal((n, 3, h, wd)).astype(np.float32)
        (y,) = run(cp, x)
        pb, pe = [], []
        for L, k in ((h, 4), (wd, 3)):
            if auto_pad == "valid":
                pb.append(0), pe.append(0)
                continue
            out = -(-L // stride)
            total = max((out - 1) * stride + k - L, 0)
            lo = total // 2 if auto_pad == "same_upper" else (total + 1) // 2
            pb.append(lo), pe.append(total - lo)
            assert y.shape[2 + len(pb) - 1] == out
        assert_conv_close(y, x, w, b, strides=[stride, stride], pads_begin=pb, pads_end=pe)


def test_conv_output_sizes_are_expressions_of_the_input_sizes():
    h, wd = dg.Dim("h", min=8, max=512), dg.Dim("w", min=8, max=512)
    cp, _, _ = compile_conv("NCX", "OIX", 3, 4, (3, 3), spatial=[h, wd], strides=[2, 2], dilations=[2, 1],
                            pb=[1, 0], pe=[2, 0], rng=np.random.default_rng(0))
    (out,) = cp.get_outputs()
    assert out.shape[2].free_symbols() == {h.sym} and out.shape[3].free_symbols() == {wd.sym}
    for v in (8, 9, 100, 511):  # dilated kernel 5, pads 1 + 2; kernel 3, no pads
        assert out.shape[2].evaluate({h.sym: v}) == (v + 3 - 5) // 2 + 1
        assert out.shape[3].evaluate({wd.sym: v}) == (v - 3) // 2 + 1


def test_conv_with_runtime_weights_and_several_threads(rng):
    """Weights computed at run time (as Wav2Vec2's weight-normed conv); a
    product tiled over positions and shared by two threads."""
    eng = dg.Engine(dg.Engine.CPU, num_threads=2)
    attrs = dict(conv_attrs(2, pb=[1, 1], pe=[1, 1]), data_format="NCX", weights_format="OIX")
    cp = compile_op(K.Convolution, [[D, 16, D, D], [32, 16, 3, 3]], attrs=attrs, engine=eng)
    for n, h in [(1, 3), (2, 40), (1, 96)]:  # 96x96: K = 144, 512 KB tiles of 910 positions
        x = rng.standard_normal((n, 16, h, h)).astype(np.float32)
        w = rng.standard_normal((32, 16, 3, 3)).astype(np.float32)
        (y,) = run(cp, x, w)
        assert_conv_close(y, x, w, None, pads_begin=[1, 1], pads_end=[1, 1])


def test_f16_conv_computes_in_f32(rng):
    attrs = dict(conv_attrs(2, pb=[1, 1], pe=[1, 1]), data_format="NCX", weights_format="OIX")
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float16)
    cp = compile_op(K.Convolution, [[D, 3, 8, 8], [4, 3, 3, 3]], in_dtypes=dg.f16, attrs=attrs, constants={1: w})
    for n in (1, 2, 5):
        x = rng.standard_normal((n, 3, 8, 8)).astype(np.float16)
        (y,) = run(cp, x)
        assert y.dtype == np.float16
        want = ref.conv(x, w, pads_begin=[1, 1], pads_end=[1, 1])
        np.testing.assert_allclose(y.astype(np.float64), want, rtol=2e-3, atol=2e-3 * np.abs(want).max())


# -- ConvTranspose -------------------------------------------------------------------------


@pytest.mark.parametrize("fmt,wfmt", [("NCX", "IOX"), ("NXC", "XOI"), ("NCX", "XOI"), ("NXC", "IOX")])
@pytest.mark.parametrize("case", [
    dict(ks=(3, 3), strides=[2, 2], pb=[1, 1], pe=[1, 1], op=[1, 1], groups=1),
    dict(ks=(4, 4), strides=[2, 2], pb=[1, 1], pe=[1, 1], op=[0, 0], groups=2),
    dict(ks=(3, 2), strides=[1, 3], dilations=[2, 1], pb=[0, 1], pe=[2, 0], op=[0, 2], groups=1),
])
def test_conv_transpose2d_matches_numpy(fmt, wfmt, case, rng):
    case = dict(case)
    ks, groups = case.pop("ks"), case.pop("groups")
    C, Og = 4, 3
    w = rng.standard_normal(weight_shape(wfmt, C, Og, ks)).astype(np.float32)
    b = rng.standard_normal(Og * groups).astype(np.float32)
    attrs = dict(strides=case["strides"], dilations=case.get("dilations", [1, 1]), pads_begin=case["pb"],
                 pads_end=case["pe"], output_padding=case["op"], groups=groups, data_format=fmt, weights_format=wfmt)
    cp = compile_op(K.ConvTranspose, [shape_of(fmt, D, C, [D, D]), list(w.shape), [Og * groups]], attrs=attrs,
                    constants={1: w, 2: b})
    for n, h, wd in [(1, 3, 4), (2, 7, 5), (3, 12, 9)]:
        x = rng.standard_normal(shape_of(fmt, n, C, (h, wd))).astype(np.float32)
        (y,) = run(cp, x)
        want = ref.conv_transpose(x, w, b, strides=case["strides"], dilations=case.get("dilations"),
                                  pads_begin=case["pb"], pads_end=case["pe"], output_padding=case["op"], groups=groups,
                                  fmt=fmt, wfmt=wfmt)
        assert y.shape == want.shape
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


def test_conv_transpose1d_with_a_dynamic_length(rng):
    w = rng.standard_normal((6, 2, 5)).astype(np.float32)
    attrs = dict(strides=[3], dilations=[1], pads_begin=[2], pads_end=[1], data_format="NCX", weights_format="IOX")
    cp = compile_op(K.ConvTranspose, [[D, 6, D], [6, 2, 5]], attrs=attrs, constants={1: w})
    for n, L in [(1, 1), (2, 10), (1, 77)]:
        x = rng.standard_normal((n, 6, L)).astype(np.float32)
        (y,) = run(cp, x)
        want = ref.conv_transpose(x, w, strides=[3], pads_begin=[2], pads_end=[1])
        assert y.shape == want.shape == (n, 2, (L - 1) * 3 + 5 - 3)
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("fmt,wfmt", [("NCX", "IOX"), ("NXC", "XOI")])
def test_conv_transpose_over_more_input_positions_than_one_column_tile(fmt, wfmt, rng):
    """The kernel's columns hold a tile of input positions (about 512 KB: 227 positions of 64 channels x
    3 x 3 taps here); an input of 40 x 37 positions spans several tiles, one ending inside a row."""
    C, Og, ks = 8, 64, (3, 3)
    w = rng.standard_normal(weight_shape(wfmt, C, Og, ks)).astype(np.float32)
    attrs = dict(strides=[2, 1], dilations=[1, 2], pads_begin=[1, 0], pads_end=[0, 1], data_format=fmt,
                 weights_format=wfmt)
    cp = compile_op(K.ConvTranspose, [shape_of(fmt, D, C, [D, D]), list(w.shape)], attrs=attrs, constants={1: w},
                    engine=dg.Engine(num_threads=2))
    for n, h, wd in [(1, 40, 37), (2, 3, 300), (1, 1, 1)]:
        x = rng.standard_normal(shape_of(fmt, n, C, (h, wd))).astype(np.float32)
        (y,) = run(cp, x)
        want = ref.conv_transpose(x, w, strides=[2, 1], dilations=[1, 2], pads_begin=[1, 0], pads_end=[0, 1], fmt=fmt,
                                  wfmt=wfmt)
        assert y.shape == want.shape
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind,attrs", [
    (K.Convolution, dict(strides=[1], dilations=[1 << 62], pads_begin=[0], pads_end=[0])),
    (K.Convolution, dict(strides=[1], dilations=[1], pads_begin=[0], pads_end=[(1 << 63) - 1])),
    (K.ConvTranspose, dict(strides=[1 << 31], dilations=[1], pads_begin=[0], pads_end=[0])),
    (K.MaxPool, dict(kernel=[2], strides=[1], dilations=[(1 << 63) - 2], pads_begin=[1 << 62], pads_end=[1 << 62])),
    (K.AvgPool, dict(kernel=[1 << 40], strides=[1], pads_begin=[0], pads_end=[0], exclude_pad=False)),
])
def test_window_attributes_beyond_2_to_the_31_are_graph_errors(kind, attrs):
    """Strides, dilations, kernels and paddings stay below 2^31, so that the kernels' window arithmetic
    (o * stride - pad + k * dilation) cannot overflow int64 (it read out of bounds for 2^62-sized values)."""
    shapes = [[1, 2, 8]] + ([[2, 2, 3]] if kind in (K.Convolution, K.ConvTranspose) else [])
    with pytest.raises(dg.GraphError, match="must be <= 2147483647"):
        compile_op(kind, shapes, attrs={**attrs, "data_format": "NCX",
                                        **({"weights_format": "OIX" if kind is K.Convolution else "IOX"}
                                           if kind in (K.Convolution, K.ConvTranspose) else {})})


# -- errors ------------------------------------------------------------------------------


def test_channel_mismatch_is_a_shape_error():
    with pytest.raises(dg.ShapeError, match="src channels"):
        compile_op(K.Convolution, [[D, 5, 8, 8], [4, 3, 3, 3]],
                   attrs=dict(conv_attrs(2), data_format="NCX", weights_format="OIX"))


def test_groups_that_do_not_divide_the_output_channels_are_a_shape_error():
    with pytest.raises(dg.ShapeError, match="not divisible by groups"):
        compile_op(K.Convolution, [[D, 6, 8, 8], [5, 3, 3, 3]],
                   attrs=dict(conv_attrs(2), groups=2, data_format="NCX", weights_format="OIX"))


def test_attribute_with_the_wrong_number_of_axes_is_a_shape_error():
    with pytest.raises(dg.ShapeError, match="'strides' needs 2 entries"):
        compile_op(K.Convolution, [[D, 3, 8, 8], [4, 3, 3, 3]],
                   attrs=dict(conv_attrs(2), strides=[1], data_format="NCX", weights_format="OIX"))


@pytest.mark.parametrize("attrs,match", [
    (dict(auto_pad="same"), "must be one of"),
    (dict(strides=[0, 1]), "must be >= 1"),
    (dict(pads_begin=[-1, 0]), "must be >= 0"),
    (dict(groups=0), "must be >= 1"),
    (dict(data_format="NHWC"), "must be one of"),
    (dict(padding=[1, 1]), "unknown attribute"),
])
def test_bad_attributes_are_graph_errors(attrs, match):
    a = {**conv_attrs(2), "data_format": "NCX", "weights_format": "OIX", **attrs}
    with pytest.raises(dg.GraphError, match=match):
        compile_op(K.Convolution, [[D, 3, 8, 8], [4, 3, 3, 3]], attrs=a)


def test_missing_strides_is_a_graph_error():
    with pytest.raises(dg.GraphError, match="'strides' is required"):
        compile_op(K.Convolution, [[D, 3, 8, 8], [4, 3, 3, 3]],
                   attrs=dict(dilations=[1, 1], pads_begin=[0, 0], pads_end=[0, 0]))


def test_integer_src_is_a_dtype_error():
    with pytest.raises(dg.DTypeError):
        compile_op(K.Convolution, [[D, 3, 8, 8], [4, 3, 3, 3]], in_dtypes=dg.i32,
                   attrs=dict(conv_attrs(2), data_format="NCX", weights_format="OIX"))


def test_rank_6_src_is_a_shape_error():
    with pytest.raises(dg.ShapeError, match="rank 3, 4 or 5"):
        compile_op(K.Convolution, [[2, 3, 2, 4, 8, 8], [4, 3, 1, 3, 3, 3]],
                   attrs=dict(conv_attrs(4), data_format="NCX", weights_format="OIX"))


def test_input_smaller_than_the_kernel_is_a_shape_error_at_compile_or_run(rng):
    with pytest.raises(dg.ShapeError, match="too small"):
        compile_op(K.Convolution, [[1, 3, 2, 2], [4, 3, 3, 3]],
                   attrs=dict(conv_attrs(2), data_format="NCX", weights_format="OIX"))
    cp = compile_op(K.Convolution, [[1, 3, D, D], [4, 3, 3, 3]],
                    attrs=dict(conv_attrs(2), data_format="NCX", weights_format="OIX"))
    with pytest.raises(dg.ShapeError, match="dimensions must be positive"):
        run(cp, np.zeros((1, 3, 2, 8), np.float32), np.zeros((4, 3, 3, 3), np.float32))


def test_output_padding_not_below_the_stride_is_a_shape_error():
    with pytest.raises(dg.ShapeError, match="output_padding"):
        compile_op(K.ConvTranspose, [[D, 4, 8, 8], [4, 2, 3, 3]],
                   attrs=dict(conv_attrs(2, strides=[2, 2]), output_padding=[2, 0], data_format="NCX",
                              weights_format="IOX"))


# -- 3 spatial axes: KD depth-shifted views joined along the channels, one 2-D convolution --------


@pytest.mark.parametrize("fmt", ["NCX", "NXC"])
@pytest.mark.parametrize("wfmt", ["OIX", "XIO"])
@pytest.mark.parametrize("case", [
    dict(ks=(3, 3, 3)),                                                              # oneDNN's conv_3d
    dict(ks=(3, 3, 3), strides=[2, 1, 2], pb=[1, 1, 1], pe=[1, 0, 1]),
    dict(ks=(2, 3, 1), strides=[1, 2, 1], dilations=[2, 1, 1], pb=[2, 1, 0], pe=[1, 1, 0]),
    dict(ks=(3, 2, 2), strides=[2, 2, 2], pb=[1, 0, 1], pe=[-1, 0, -1]),               # negative end pads: cropping
    dict(ks=(1, 1, 1)),
    dict(ks=(3, 3, 3), groups=2, pb=[1, 1, 1], pe=[1, 1, 1]),
    dict(ks=(3, 1, 3), groups=6, O=12, strides=[1, 1, 2]),                             # depthwise (multiplier 2)
    # depth paddings beyond the kernel: some kernel depths read nothing but padding (D 5 and 4), others part
    dict(ks=(2, 3, 1), dilations=[6, 1, 1], pb=[5, 1, 0], pe=[0, 1, 0]),
    dict(ks=(3, 1, 2), strides=[2, 1, 1], pb=[0, 0, 1], pe=[4, 0, 0]),                 # windows past the end
])
def test_conv3d_matches_numpy_at_three_shapes(fmt, wfmt, case, rng):
    case = dict(case)
    ks, groups, O = case.pop("ks"), case.pop("groups", 1), case.pop("O", 8)
    cp, w, b = compile_conv(fmt, wfmt, 6, O, ks, groups, rng=rng, **case)
    kw = dict(strides=case.get("strides"), dilations=case.get("dilations"), pads_begin=case.get("pb"),
              pads_end=case.get("pe"), groups=groups, fmt=fmt, wfmt=wfmt)
    for n, d, h, wd in [(1, 5, 6, 7), (3, 8, 5, 9), (2, 4, 11, 6)]:
        x = rng.standard_normal(shape_of(fmt, n, 6, (d, h, wd))).astype(np.float32)
        (y,) = run(cp, x)
        assert_conv_close(y, x, w, b, **kw)


def test_conv3d_with_runtime_weights(rng):
    cp, w, b = compile_conv("NCX", "OIX", 3, 4, (2, 2, 2), rng=rng, constant=False, pb=[1, 0, 0], pe=[0, 0, 1])
    x = rng.standard_normal((2, 3, 4, 5, 6)).astype(np.float32)
    (y,) = run(cp, x, w, b)
    assert_conv_close(y, x, w, b, pads_begin=[1, 0, 0], pads_end=[0, 0, 1])


def test_conv3d_errors_are_typed():
    w = [4, 3, 2, 2, 2]
    with pytest.raises(dg.ShapeError, match="output size"):  # the negative end padding leaves nothing
        compile_op(K.Convolution, [[1, 3, 3, 4, 4], w], attrs={**conv_attrs(3, pe=[-2, 0, 0]), "data_format": "NCX",
                                                             "weights_format": "OIX"})
    with pytest.raises(dg.ShapeError, match="rank 5"):
        compile_op(K.Convolution, [[1, 3, 3, 4, 4], [4, 3, 2, 2]], attrs={**conv_attrs(3), "data_format": "NCX",
                                                                          "weights_format": "OIX"})
    with pytest.raises(dg.ShapeError, match="rank 3 .* or 4"):  # ConvTranspose stays 1-D / 2-D
        compile_op(K.ConvTranspose, [[1, 4, 3, 4, 4], w], attrs={**conv_attrs(3), "data_format": "NCX",
                                                               "weights_format": "IOX"})


# -- 3 spatial axes, hostile sizes: refused when compiled (or, from an IR, when built), never a hang ----------


def conv3d_attrs(**kw):
    return {**conv_attrs(3, **kw), "data_format": "NCX", "weights_format": "OIX"}


@pytest.mark.parametrize("kd", [MAX_KERNEL_DEPTH + 1, (1 << 31) - 1])
def test_conv3d_kernel_depth_above_the_limit_is_a_shape_error(kd):
    """The 3-D lowering joins one view of src per kernel depth: a depth of 2^31 (with paddings that let
    the window fit) took 15 s and 3 GB to fail when the graph was built; the shape rule refuses it."""
    half = min(kd // 2, (1 << 31) - 1)
    with pytest.raises(dg.ShapeError, match=f"kernel depth {kd} .* above the limit of {MAX_KERNEL_DEPTH}"):
        compile_op(K.Convolution, [[1, 1, 1, 1, 1], [1, 1, kd, 1, 1]], attrs=conv3d_attrs(pb=[half, 0, 0], pe=[half, 0, 0]))


@pytest.mark.parametrize("weights", [[1, 1, 1, 1 << 31], [1, 1, 1, 1 << 31, 1], [1, 1, 1 << 40, 1, 1]])
def test_kernel_sizes_beyond_2_to_the_31_are_shape_errors(weights):
    """The weights' kernel sizes are bounded as the kernel attribute of a pooling is."""
    ns = len(weights) - 2
    with pytest.raises(dg.ShapeError, match="kernel size .* above 2147483647"):
        compile_op(K.Convolution, [[1, 1] + [1] * ns, weights], attrs={**conv_attrs(ns), "data_format": "NCX",
                                                                         "weights_format": "OIX"})


def test_conv3d_with_a_depth_stride_and_padding_of_2_to_the_31_computes_its_two_outputs():
    """Output 0 reads only padding, output 1 the one input row: the lowering makes no padded copy of src
    (it asked for 24 GiB of working memory for this one-element input)."""
    m = (1 << 31) - 1
    w, b = np.full((1, 1, 1, 1, 1), 3.0, np.float32), np.full(1, 0.5, np.float32)
    cp = compile_op(K.Convolution, [[1, 1, 1, 1, 1], [1, 1, 1, 1, 1], [1]], constants={1: w, 2: b},
                    attrs=conv3d_attrs(strides=[m, 1, 1], pb=[m, 0, 0]))
    (y,) = run(cp, np.full((1, 1, 1, 1, 1), 2.0, np.float32))
    np.testing.assert_array_equal(y.ravel(), [0.5, 6.5])
    assert cp.cache_info().arena_bytes < 1 << 20


def test_conv3d_with_a_depth_dilation_of_2_to_the_31_computes_its_output():
    m = (1 << 31) - 1
    w = np.array([2.0, 3.0], np.float32).reshape(1, 1, 2, 1, 1)
    cp = compile_op(K.Convolution, [[1, 1, 1, 1, 1], [1, 1, 2, 1, 1]], constants={1: w},
                    attrs=conv3d_attrs(dilations=[m, 1, 1], pb=[m, 0, 0]))
    (y,) = run(cp, np.full((1, 1, 1, 1, 1), 5.0, np.float32))
    np.testing.assert_array_equal(y.ravel(), [15.0])  # kernel depth 0 in the padding, 1 on the input
    assert cp.cache_info().arena_bytes < 1 << 20


def with_weights_depth(cp, kd, out_depth):
    """cp's program with weights of kernel depth `kd` and dst of depth `out_depth`: an IR that bypassed
    the shape rule."""
    prog = copy.deepcopy(cp.program)
    for tid, axis, size in ((prog.ops[0].inputs[1], 2, kd), (prog.outputs[0], 2, out_depth)):
        t = prog.tensors[tid]
        t.shape = tuple(Expr.const(size) if i == axis else d for i, d in enumerate(t.shape))
    return CompiledPartition.create(prog, {}, cp.engine, 4)


def test_an_ir_with_a_conv3d_kernel_depth_above_the_limit_is_a_compile_error():
    """The lowering checks the depth too (an IR file meets no shape rule): a typed error when the graph is
    built, before it makes one view per kernel depth."""
    half = (1 << 30) - 1
    cp = compile_op(K.Convolution, [[1, 1, 1, 1, 1], [1, 1, 1, 1, 1]], attrs=conv3d_attrs(pb=[half, 0, 0], pe=[half, 0, 0]))
    # 1 + 2 * half - kd + 1 outputs in depth: one for kd = 2 * half + 1 (= 2^31 - 1)
    bad = with_weights_depth(cp, 2 * half + 1, 1)
    with pytest.raises(dg.CompileError, match=f"kernel depth of {2 * half + 1} .* above the limit of {MAX_KERNEL_DEPTH}"):
        bad.infer_outputs(bad.get_inputs())


def test_conv3d_at_the_kernel_depth_limit_computes(rng):
    kd, half = MAX_KERNEL_DEPTH, MAX_KERNEL_DEPTH // 2
    cp = compile_op(K.Convolution, [[1, 1, 1, 1, 1], [1, 1, kd, 1, 1]], attrs=conv3d_attrs(pb=[half, 0, 0], pe=[half, 0, 0]))
    x, w = np.full((1, 1, 1, 1, 1), 2.0, np.float32), rng.standard_normal((1, 1, kd, 1, 1)).astype(np.float32)
    (y,) = run(cp, x, w)
    # output o reads the input row with kernel depth half - o
    np.testing.assert_array_equal(y.ravel(), [2 * w.ravel()[half], 2 * w.ravel()[half - 1]])
