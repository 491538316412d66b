"""MaxPool, AvgPool and AdaptiveAvgPool against float64 numpy references
(dyngraph/reference/spatial_numpy.py), compiled once with dynamic sizes and run
at three shapes. Max is exact; an average of k float32 values is within
(k + 1) * U of the exact mean, relative to the mean of |x|."""

import numpy as np
import pytest

import dyngraph as dg
from oputil import compile_op, run
from dyngraph.reference import spatial_numpy as ref

K = dg.OpKind
D = dg.DYNAMIC_DIM
U = 2.0**-24


def shape_of(fmt, n, c, spatial):
    return [n, c, *spatial] if fmt == "NCX" else [n, *spatial, c]


def pool_attrs(kernel, strides, pb=None, pe=None, **extra):
    ns = len(kernel)
    return dict(kernel=kernel, strides=strides, pads_begin=pb or [0] * ns, pads_end=pe or [0] * ns, **extra)


def check_avg(y, want, x, k):
    bound = (k + 1) * U * np.abs(x).max() + 1e-30
    assert y.shape == want.shape
    assert np.abs(y - want).max() <= bound


@pytest.mark.parametrize("fmt", ["NCX", "NXC"])
@pytest.mark.parametrize("case", [
    dict(kernel=[3, 3], strides=[2, 2], pb=[1, 1], pe=[1, 1]),            # ResNet's max pool
    dict(kernel=[2, 2], strides=[2, 2]),
    dict(kernel=[3, 2], strides=[2, 1], pb=[1, 0], pe=[0, 1], ceil=True),
    dict(kernel=[2, 3], strides=[1, 2], dilations=[2, 1], pb=[1, 1], pe=[1, 2]),
    dict(kernel=[3, 3], strides=[3, 3], dilations=[2, 2], pb=[2, 2], pe=[2, 2]),  # a stride of neither 1 nor 2
])
def test_max_pool2d_matches_numpy(fmt, case, rng):
    case = dict(case)
    ceil = case.pop("ceil", False)
    extra = {"rounding_type": "ceil"} if ceil else {}
    if "dilations" in case:
        extra["dilations"] = case["dilations"]
    cp = compile_op(K.MaxPool, [shape_of(fmt, D, 5, [D, D])],
                    attrs=pool_attrs(case["kernel"], case["strides"], case.get("pb"), case.get("pe"), data_format=fmt,
                                     **extra))
    for n, h, w in [(1, 5, 6), (2, 12, 9), (3, 17, 22)]:
        x = rng.standard_normal(shape_of(fmt, n, 5, (h, w))).astype(np.float32)
        (y,) = run(cp, x)
        want = ref.pool(x, "max", case["kernel"], case["strides"], case.get("pb"), case.get("pe"),
                        case.get("dilations"), ceil, fmt=fmt)
        assert y.shape == want.shape
        np.testing.assert_array_equal(y, want.astype(np.float32))


def test_max_pool_propagates_nan():
    cp = compile_op(K.MaxPool, [[1, 1, D]], attrs=pool_attrs([2], [2], data_format="NCX"))
    x = np.array([[[1.0, np.nan, 3.0, 2.0, np.nan, np.nan]]], np.float32)
    (y,) = run(cp, x)
    np.testing.assert_array_equal(y, [[[np.nan, 3.0, np.nan]]])


@pytest.mark.parametrize("stride", [1, 2, 3])
def test_max_pool_of_wide_rows_with_nan_and_infinities(stride, rng):
    """Rows wide enough for the vector loops (whole windows a vector of outputs per tap, the edges one at
    a time): NaN anywhere in a window wins, -inf and +inf are values like others."""
    case = dict(kernel=[3, 3], strides=[stride, stride], pb=[1, 1], pe=[1, 1])
    cp = compile_op(K.MaxPool, [[D, 3, D, D]], attrs=pool_attrs(**case, data_format="NCX"))
    for n, h, w in [(1, 7, 70), (2, 9, 131)]:
        x = rng.standard_normal((n, 3, h, w)).astype(np.float32)
        flat = x.reshape(-1)
        for v in (np.nan, -np.inf, np.inf):
            flat[rng.choice(flat.size, flat.size // 50, replace=False)] = v
        x[0, 0, 2] = np.nan  # a whole input row
        (y,) = run(cp, x)
        want = ref.pool(x, "max", case["kernel"], case["strides"], case["pb"], case["pe"], fmt="NCX")
        assert y.shape == want.shape and np.isnan(want).any()
        np.testing.assert_array_equal(y, want.astype(np.float32))


@pytest.mark.parametrize("fmt", ["NCX", "NXC"])
@pytest.mark.parametrize("exclude_pad", [False, True])
@pytest.mark.parametrize("case", [
    dict(kernel=[3, 3], strides=[1, 1], pb=[1, 1], pe=[1, 1]),
    dict(kernel=[2, 2], strides=[2, 2]),
    dict(kernel=[3, 3], strides=[2, 2], pb=[1, 1], pe=[1, 1], ceil=True),  # a window past the padding: clipped
])
def test_avg_pool2d_matches_numpy(fmt, exclude_pad, case, rng):
    case = dict(case)
    ceil = case.pop("ceil", False)
    extra = {"rounding_type": "ceil"} if ceil else {}
    cp = compile_op(K.AvgPool, [shape_of(fmt, D, 4, [D, D])],
                    attrs=pool_attrs(case["kernel"], case["strides"], case.get("pb"), case.get("pe"), data_format=fmt,
                                     exclude_pad=exclude_pad, **extra))
    for n, h, w in [(1, 4, 4), (2, 10, 7), (3, 16, 21)]:
        x = rng.standard_normal(shape_of(fmt, n, 4, (h, w))).astype(np.float32)
        (y,) = run(cp, x)
        want = ref.pool(x, "avg", case["kernel"], case["strides"], case.get("pb"), case.get("pe"), None, ceil,
                        exclude_pad, fmt)
        check_avg(y, want, x, 9)


@pytest.mark.parametrize("kind", [K.MaxPool, K.AvgPool])
def test_pool1d_with_a_dynamic_length(kind, rng):
    length = dg.Dim("length", min=3, max=10000)
    extra = {"exclude_pad": True} if kind is K.AvgPool else {}
    cp = compile_op(kind, [[D, 3, length]], attrs=pool_attrs([3], [2], [1], [1], data_format="NCX", **extra))
    for n, L in [(1, 3), (2, 50), (4, 1001)]:
        x = rng.standard_normal((n, 3, L)).astype(np.float32)
        (y,) = run(cp, x)
        name = "max" if kind is K.MaxPool else "avg"
        want = ref.pool(x, name, [3], [2], [1], [1], exclude_pad=True)
        assert y.shape == want.shape == (n, 3, (L - 1) // 2 + 1)
        check_avg(y, want, x, 3)


@pytest.mark.parametrize("auto_pad", ["same_upper", "same_lower"])
def test_pool_same_padding_keeps_ceil_of_size_over_stride(auto_pad, rng):
    cp = compile_op(K.MaxPool, [[D, 2, D, D]], attrs=pool_attrs([3, 2], [2, 2], data_format="NCX", auto_pad=auto_pad))
    for h, w in [(5, 5), (8, 9), (13, 4)]:
        x = rng.standard_normal((1, 2, h, w)).astype(np.float32)
        (y,) = run(cp, x)
        pb, pe = [], []
        for L, k in ((h, 3), (w, 2)):
            total = max((-(-L // 2) - 1) * 2 + k - L, 0)
            lo = total // 2 if auto_pad == "same_upper" else (total + 1) // 2
            pb.append(lo), pe.append(total - lo)
        want = ref.pool(x, "max", [3, 2], [2, 2], pb, pe)
        assert y.shape == (1, 2, -(-h // 2), -(-w // 2))
        np.testing.assert_array_equal(y, want.astype(np.float32))


@pytest.mark.parametrize("fmt", ["NCX", "NXC"])
@pytest.mark.parametrize("sizes", [[1, 1], [3, 2], [5, 7]])
def test_adaptive_avg_pool2d_matches_numpy(fmt, sizes, rng):
    cp = compile_op(K.AdaptiveAvgPool, [shape_of(fmt, D, 3, [D, D])], attrs={"sizes": sizes, "data_format": fmt})
    for n, h, w in [(1, 3, 4), (2, 7, 7), (2, 20, 13)]:
        x = rng.standard_normal(shape_of(fmt, n, 3, (h, w))).astype(np.float32)
        (y,) = run(cp, x)
        check_avg(y, ref.adaptive_avg_pool(x, sizes, fmt), x, h * w)


def test_adaptive_avg_pool1d(rng):
    cp = compile_op(K.AdaptiveAvgPool, [[D, 4, D]], attrs={"sizes": [5], "data_format": "NCX"})
    for n, L in [(1, 2), (3, 11), (2, 100)]:
        x = rng.standard_normal((n, 4, L)).astype(np.float32)
        (y,) = run(cp, x)
        check_avg(y, ref.adaptive_avg_pool(x, [5]), x, L)


def test_pool_of_f16_rounds_once(rng):
    cp = compile_op(K.AvgPool, [[D, 2, 6, 6]], in_dtypes=dg.f16,
                    attrs=pool_attrs([2, 2], [2, 2], data_format="NCX", exclude_pad=False))
    x = rng.standard_normal((3, 2, 6, 6)).astype(np.float16)
    (y,) = run(cp, x)
    assert y.dtype == np.float16
    np.testing.assert_array_equal(y, ref.pool(x, "avg", [2, 2], [2, 2]).astype(np.float16))


# -- errors ------------------------------------------------------------------------------


def test_pads_as_large_as_the_window_are_a_shape_error():
    with pytest.raises(dg.ShapeError, match="smaller than the window"):
        compile_op(K.MaxPool, [[D, 2, 8, 8]], attrs=pool_attrs([2, 2], [1, 1], [2, 0], [0, 0], data_format="NCX"))


def test_avg_pool_needs_exclude_pad():
    with pytest.raises(dg.GraphError, match="'exclude_pad' is required"):
        compile_op(K.AvgPool, [[D, 2, 8, 8]], attrs=pool_attrs([2, 2], [1, 1], data_format="NCX"))


def test_avg_pool_has_no_dilations():
    with pytest.raises(dg.GraphError, match="unknown attribute 'dilations'"):
        compile_op(K.AvgPool, [[D, 2, 8, 8]],
                   attrs=pool_attrs([2, 2], [1, 1], data_format="NCX", exclude_pad=True, dilations=[2, 2]))


def test_bad_rounding_type_is_a_graph_error():
    with pytest.raises(dg.GraphError, match="must be one of"):
        compile_op(K.MaxPool, [[D, 2, 8, 8]], attrs=pool_attrs([2, 2], [1, 1], data_format="NCX", rounding_type="up"))


def test_kernel_with_the_wrong_number_of_axes_is_a_shape_error():
    with pytest.raises(dg.ShapeError, match="'kernel' needs 2 entries"):
        compile_op(K.MaxPool, [[D, 2, 8, 8]], attrs=pool_attrs([2], [1, 1], data_format="NCX"))


def test_adaptive_pool_to_size_zero_is_a_graph_error():
    with pytest.raises(dg.GraphError, match="must be >= 1"):
        compile_op(K.AdaptiveAvgPool, [[D, 2, 8, 8]], attrs={"sizes": [0, 1], "data_format": "NCX"})


# 3 spatial axes: a 2-D pooling of each depth slice, then one over depth (backend/lower/pool.cpp)
@pytest.mark.parametrize("fmt", ["NCX", "NXC"])
@pytest.mark.parametrize("kind,case", [
    ("max", dict(kernel=[2, 3, 3], strides=[2, 2, 1], pb=[1, 1, 1], pe=[0, 1, 1])),
    ("max", dict(kernel=[3, 2, 2], strides=[1, 2, 2], pb=[1, 0, 1], pe=[1, 1, 0], dilations=[2, 1, 1], ceil=True)),
    ("avg", dict(kernel=[2, 4, 3], strides=[2, 2, 2], pb=[1, 1, 1], pe=[-1, 1, 0], exclude_pad=True)),  # oneDNN's file
    ("avg", dict(kernel=[3, 3, 2], strides=[2, 1, 2], pb=[1, 1, 0], pe=[1, 0, 1], exclude_pad=False)),
    ("avg", dict(kernel=[2, 2, 2], strides=[2, 2, 2], pb=[0, 0, 0], pe=[-1, 0, -1], ceil=True)),
])
def test_pool3d_matches_numpy(fmt, kind, case, rng):
    case = dict(case)
    ceil = case.pop("ceil", False)
    extra = {"rounding_type": "ceil"} if ceil else {}
    if kind == "max" and "dilations" in case:
        extra["dilations"] = case["dilations"]
    if kind == "avg":
        extra["exclude_pad"] = case.get("exclude_pad", False)
    cp = compile_op(K.MaxPool if kind == "max" else K.AvgPool, [shape_of(fmt, D, 3, [D, D, D])],
                    attrs=pool_attrs(case["kernel"], case["strides"], case["pb"], case["pe"], data_format=fmt, **extra))
    for n, d, h, w in [(1, 5, 6, 7), (2, 8, 5, 9), (3, 11, 13, 6)]:
        x = rng.standard_normal(shape_of(fmt, n, 3, (d, h, w))).astype(np.float32)
        (y,) = run(cp, x)
        want = ref.pool(x, kind, case["kernel"], case["strides"], case["pb"], case["pe"], case.get("dilations"),
                        ceil, exclude_pad=case.get("exclude_pad", False), fmt=fmt)
        if kind == "max":
            assert y.shape == want.shape
            np.testing.assert_array_equal(y, want.astype(np.float32))
        else:
            check_avg(y, want, x, int(np.prod(case["kernel"])))


def test_pool3d_rejects_a_negative_end_padding_that_empties_the_output():
    with pytest.raises(dg.ShapeError, match="output size"):
        compile_op(K.AvgPool, [[1, 2, 4, 4, 4]],
                   attrs=pool_attrs([2, 2, 2], [1, 1, 1], [0, 0, 0], [-3, 0, 0], data_format="NCX", exclude_pad=True))


def test_adaptive_avg_pool_refuses_3_spatial_axes():
    with pytest.raises(dg.ShapeError, match="rank 3 .* or 4"):
        compile_op(K.AdaptiveAvgPool, [[1, 2, 4, 4, 4]], attrs=dict(sizes=[2, 2, 2], data_format="NCX"))


# 3 spatial axes, hostile sizes: attributes beyond 2^31 are refused by the shape rule; within it the
# depth pass clips each window to the input (no loop over the kernel, no padded copy)
@pytest.mark.parametrize("kind,attrs", [
    (K.MaxPool, dict(kernel=[1 << 31, 1, 1], strides=[1, 1, 1])),
    (K.MaxPool, dict(kernel=[2, 1, 1], strides=[1, 1, 1], dilations=[(1 << 63) - 1, 1, 1])),
    (K.AvgPool, dict(kernel=[2, 1, 1], strides=[1 << 62, 1, 1], exclude_pad=False)),
    (K.AvgPool, dict(kernel=[2, 1, 1], strides=[1, 1, 1], pads_begin=[1 << 40, 0, 0], exclude_pad=True)),
])
def test_pool3d_attributes_beyond_2_to_the_31_are_graph_errors(kind, attrs):
    a = {"pads_begin": [0, 0, 0], "pads_end": [0, 0, 0], "data_format": "NCX", **attrs}
    with pytest.raises(dg.GraphError, match="must be <= 2147483647"):
        compile_op(kind, [[1, 1, 4, 4, 4]], attrs=a)


@pytest.mark.parametrize("kind", ["max", "avg"])
def test_pool3d_with_a_depth_kernel_stride_and_padding_of_2_to_the_31_pools_the_input(kind):
    m = (1 << 31) - 1
    x = np.arange(1, 4, dtype=np.float32).reshape(1, 1, 3, 1, 1)
    extra = {"exclude_pad": True} if kind == "avg" else {}
    cp = compile_op(K.MaxPool if kind == "max" else K.AvgPool, [[1, 1, 3, 1, 1]],
                    attrs=pool_attrs([m, 1, 1], [m, 1, 1], [m - 1, 0, 0], [m - 1, 0, 0], data_format="NCX", **extra))
    (y,) = run(cp, x)
    # window 0 covers depth rows [1 - m, 0], window 1 rows [1, m): the input's rows 0 and 1, 2
    np.testing.assert_array_equal(y.ravel(), [1.0, 3.0] if kind == "max" else [1.0, 2.5])
    assert cp.cache_info().arena_bytes < 1 << 20
