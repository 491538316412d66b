"""Interpolate (nearest, linear, bilinear, bicubic) against numpy references, compiled
once with dynamic sizes and run at three shapes. Nearest picks elements
(exact). Linear weights come from a float32 source coordinate, off by a few
U times the coordinate (up to the axis length L), which moves the result by
that much times the difference of two neighbours (<= 2 max|x|): the bound
is 8 * U * (L + 2) * max|x| (errors measured: below a quarter of it).
Bicubic sums four taps whose weights' slopes add to at most 3 (Keys'
kernel, a = -0.75), but measured it stays within a tenth of the same bound
(0.08 of it, scales 0.5-3, up to 40 x 33): held to it."""

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


def linear_atol(x, sizes):
    return 8 * U * (max(list(x.shape[1:]) + list(sizes)) + 2) * np.abs(x).max()


def spatial_of(fmt, shape):
    return list(shape[2:]) if fmt == "NCX" else list(shape[1:-1])


@pytest.mark.parametrize("fmt", ["NCX", "NXC"])
@pytest.mark.parametrize("coord", ["half_pixel", "asymmetric"])
@pytest.mark.parametrize("scales", [[2.0, 2.0], [0.5, 1.5], [3.0, 1.0]])
def test_nearest_by_scales(fmt, coord, scales, rng):
    cp = compile_op(K.Interpolate, [shape_of(fmt, D, 3, [D, D])],
                    attrs={"mode": "nearest", "scales": scales, "coordinate_transformation_mode": coord,
                           "data_format": fmt})
    for n, h, w in [(1, 2, 2), (2, 5, 8), (1, 13, 6)]:
        x = rng.standard_normal(shape_of(fmt, n, 3, (h, w))).astype(np.float32)
        (y,) = run(cp, x)
        sizes = [int(h * scales[0]), int(w * scales[1])]
        assert spatial_of(fmt, y.shape) == sizes
        np.testing.assert_array_equal(y, ref.interpolate(x, sizes, "nearest", coord, fmt).astype(np.float32))


def test_nearest_to_sizes_that_are_expressions(rng):
    h = dg.Dim("h", min=1, max=1000)
    cp = compile_op(K.Interpolate, [[D, 2, h, 7]],
                    attrs={"mode": "nearest", "sizes": [2 * h + 1, 3], "data_format": "NCX"})
    for n, hv in [(1, 1), (2, 4), (1, 41)]:
        x = rng.standard_normal((n, 2, hv, 7)).astype(np.float32)
        (y,) = run(cp, x)
        assert y.shape == (n, 2, 2 * hv + 1, 3)
        np.testing.assert_array_equal(y, ref.interpolate(x, [2 * hv + 1, 3], "nearest").astype(np.float32))


def test_nearest_index_follows_pytorch_at_exact_multiples(rng):
    """in 2 -> out 82: output 41 maps to 41 * (2/82) = 1 in exact arithmetic,
    to 0 in PyTorch's float32 product (and ours)."""
    cp = compile_op(K.Interpolate, [[1, 1, 1, D]], attrs={"mode": "nearest", "sizes": [1, 82],
                                                          "coordinate_transformation_mode": "asymmetric",
                                                          "data_format": "NCX"})
    (y,) = run(cp, np.array([[[[10.0, 20.0]]]], np.float32))
    assert y[0, 0, 0, 41] == 10.0 and y[0, 0, 0, 42] == 20.0


@pytest.mark.parametrize("fmt", ["NCX", "NXC"])
@pytest.mark.parametrize("coord", ["half_pixel", "align_corners"])
def test_bilinear_to_sizes_that_are_expressions(fmt, coord, rng):
    h, w = dg.Dim("h", max=500), dg.Dim("w", max=500)
    cp = compile_op(K.Interpolate, [shape_of(fmt, D, 3, [h, w])],
                    attrs={"mode": "bilinear", "sizes": [h + 3, 5], "coordinate_transformation_mode": coord,
                           "data_format": fmt})
    for n, hv, wv in [(1, 1, 1), (2, 4, 9), (1, 30, 12)]:
        x = rng.standard_normal(shape_of(fmt, n, 3, (hv, wv))).astype(np.float32)
        (y,) = run(cp, x)
        want = ref.interpolate(x, [hv + 3, 5], "bilinear", coord, fmt)
        assert y.shape == want.shape
        np.testing.assert_allclose(y, want, rtol=0, atol=linear_atol(x, [hv + 3, 5]))


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("fmt", ["NCX", "NXC"])
@pytest.mark.parametrize("coord", ["half_pixel", "align_corners"])
@pytest.mark.parametrize("scales", [[2.0, 2.0], [0.5, 1.5]])
def test_2d_by_scales_matches_numpy(mode, fmt, coord, scales, rng):
    cp = compile_op(K.Interpolate, [shape_of(fmt, D, 3, [D, D])],
                    attrs={"mode": mode, "scales": scales, "coordinate_transformation_mode": coord,
                           "data_format": fmt})
    for n, h, w in [(1, 2, 2), (2, 6, 9), (1, 15, 4)]:
        x = rng.standard_normal(shape_of(fmt, n, 3, (h, w))).astype(np.float32)
        (y,) = run(cp, x)
        sizes = [int(h * scales[0]), int(w * scales[1])]
        want = ref.interpolate(x, sizes, mode, coord, fmt)
        assert y.shape == want.shape
        np.testing.assert_allclose(y, want, rtol=0, atol=linear_atol(x, sizes))


@pytest.mark.parametrize("coord", ["half_pixel", "align_corners"])
def test_linear_1d_with_a_dynamic_length(coord, rng):
    cp = compile_op(K.Interpolate, [[D, 4, D]], attrs={"mode": "linear", "scales": [3.0],
                                                       "coordinate_transformation_mode": coord, "data_format": "NCX"})
    for n, L in [(1, 1), (2, 6), (3, 50)]:
        x = rng.standard_normal((n, 4, L)).astype(np.float32)
        (y,) = run(cp, x)
        np.testing.assert_allclose(y, ref.interpolate(x, [3 * L], "linear", coord), rtol=0,
                                   atol=linear_atol(x, [3 * L]))


def _onednn_size(size, scale):
    """oneDNN's output size for a scale: trunc(f32(size) * f32(scale)), in f32."""
    return int(np.float32(size) * np.float32(scale))


@pytest.mark.parametrize("fmt", ["NCX", "NXC"])
@pytest.mark.parametrize("mode,coord", [("nearest", "half_pixel"), ("bilinear", "half_pixel"),
                                        ("bilinear", "align_corners")])
def test_any_scale_of_a_static_size_is_resized_as_onednn_sizes_it(fmt, mode, coord, rng):
    """A scale that is no ratio of small integers (oneDNN's 0.809524) takes
    static spatial sizes: the output size is oneDNN's f32 product, truncated,
    and source coordinates use the real ratio out / in. The batch stays dynamic."""
    scales = [0.809524, 1.3717]
    assert _onednn_size(21, 0.809524) == 17  # the f32 product rounds up to 17 (exactly 16.99999999...)
    for (h, w), batches in [((21, 17), (1, 3)), ((7, 30), (2,)), ((50, 3), (1, 4))]:
        cp = compile_op(K.Interpolate, [shape_of(fmt, D, 3, [h, w])],
                        attrs={"mode": mode, "scales": scales, "coordinate_transformation_mode": coord,
                               "data_format": fmt})
        sizes = [_onednn_size(h, scales[0]), _onednn_size(w, scales[1])]
        for n in batches:
            x = rng.standard_normal(shape_of(fmt, n, 3, (h, w))).astype(np.float32)
            (y,) = run(cp, x)
            want = ref.interpolate(x, sizes, "nearest" if mode == "nearest" else "bilinear", coord, fmt)
            assert spatial_of(fmt, y.shape) == sizes and y.shape == want.shape
            if mode == "nearest":
                np.testing.assert_array_equal(y, want.astype(np.float32))
            else:
                np.testing.assert_allclose(y, want, rtol=0, atol=linear_atol(x, sizes))


# -- errors ------------------------------------------------------------------------------


@pytest.mark.parametrize("attrs,match", [
    ({"mode": "linear", "scales": [2.0, 2.0]}, "is for 1-D or 3-D data"),
    ({"mode": "nearest", "scales": [2.0, 2.0], "coordinate_transformation_mode": "align_corners"}, "linear modes"),
    ({"mode": "bilinear", "scales": [2.0, 2.0], "coordinate_transformation_mode": "asymmetric"}, "mode 'nearest'"),
    ({"mode": "nearest"}, "either sizes or scales"),
    ({"mode": "nearest", "scales": [2.0]}, "needs 2 entries"),
    ({"mode": "nearest", "scales": [2.0, 0.123456789]}, "8 gives an empty output"),
    ({"mode": "nearest", "scales": [2.0, -1.0]}, "positive"),
])
def test_bad_interpolate_attributes_are_shape_errors(attrs, match):
    with pytest.raises(dg.ShapeError, match=match):
        compile_op(K.Interpolate, [[D, 3, 8, 8]], attrs={"data_format": "NCX", **attrs})


def test_a_scale_that_is_no_small_ratio_of_a_dynamic_size_is_a_shape_error():
    with pytest.raises(dg.ShapeError, match="not a ratio of small integers and the size .* is dynamic"):
        compile_op(K.Interpolate, [[D, 3, 8, D]], attrs={"data_format": "NCX", "mode": "nearest",
                                                         "scales": [2.0, 0.809524]})


def test_unknown_mode_is_a_graph_error():
    with pytest.raises(dg.GraphError, match="must be one of"):
        compile_op(K.Interpolate, [[D, 3, 8, 8]], attrs={"mode": "area", "scales": [2.0, 2.0]})


# -- bicubic (2-D only; PyTorch's kernel) ---------------------------------------------------


def test_bicubic_to_sizes_that_are_expressions(rng):
    """Up along one axis, down along the other; a single row and column take every tap clamped."""
    h, w = dg.Dim("h", max=500), dg.Dim("w", max=500)
    cp = compile_op(K.Interpolate, [[D, 2, h, w]], attrs={"mode": "bicubic", "sizes": [2 * h + 1, 3],
                                                          "data_format": "NCX"})
    for n, hv, wv in [(1, 1, 1), (2, 4, 9), (1, 30, 12)]:
        x = rng.standard_normal((n, 2, hv, wv)).astype(np.float32)
        (y,) = run(cp, x)
        want = ref.interpolate(x, [2 * hv + 1, 3], "bicubic")
        assert y.shape == want.shape
        np.testing.assert_allclose(y, want, rtol=0, atol=linear_atol(x, [2 * hv + 1, 3]))


def test_bicubic_reference_is_pytorchs():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(0).standard_normal((1, 2, 5, 7)).astype(np.float32)
    for size, ac in [((11, 3), False), ((11, 3), True), ((2, 16), False)]:
        want = torch.nn.functional.interpolate(torch.from_numpy(x), size=size, mode="bicubic", align_corners=ac)
        got = ref.interpolate(x, list(size), "bicubic", "align_corners" if ac else "half_pixel")
        np.testing.assert_allclose(got, want.numpy(), rtol=0, atol=1e-5)


@pytest.mark.parametrize("attrs,match", [
    ({"scales": [2.0, 2.0, 2.0]}, "is for 2-D data"),
    ({"scales": [2.0, 2.0], "coordinate_transformation_mode": "asymmetric"}, "mode 'nearest'"),
])
def test_bad_bicubic_attributes_are_shape_errors(attrs, match):
    shape = [D, 3, 4, 8, 8] if len(attrs["scales"]) == 3 else [D, 3, 8, 8]
    with pytest.raises(dg.ShapeError, match=match):
        compile_op(K.Interpolate, [shape], attrs={"data_format": "NCX", "mode": "bicubic", **attrs})


# -- 3 spatial axes: depth, then (H, W) (backend/lower/interpolate.cpp) -------------------


@pytest.mark.parametrize("fmt", ["NCX", "NXC"])
@pytest.mark.parametrize("mode,coord", [("nearest", "half_pixel"), ("nearest", "asymmetric"), ("linear", "half_pixel"),
                                        ("linear", "align_corners")])
@pytest.mark.parametrize("scales", [[2.0, 2.0, 0.5], [0.5, 1.5, 3.0], [1.0, 2.0, 1.0]])
def test_3d_by_scales_matches_numpy(fmt, mode, coord, scales, rng):
    cp = compile_op(K.Interpolate, [shape_of(fmt, D, 3, [D, D, D])],
                    attrs={"mode": mode, "scales": scales, "coordinate_transformation_mode": coord, "data_format": fmt})
    for n, d, h, w in [(1, 2, 4, 12), (2, 5, 3, 8), (1, 1, 7, 2)]:
        sizes = [int(d * scales[0]), int(h * scales[1]), int(w * scales[2])]
        if 0 in sizes:  # an empty output: a ShapeError at run time
            continue
        x = rng.standard_normal(shape_of(fmt, n, 3, (d, h, w))).astype(np.float32)
        (y,) = run(cp, x)
        want = ref.interpolate(x, sizes, mode, coord, fmt)
        assert y.shape == want.shape
        if mode == "nearest":
            np.testing.assert_array_equal(y, want.astype(np.float32))
        else:
            np.testing.assert_allclose(y, want, rtol=0, atol=linear_atol(x, sizes))


def test_trilinear_to_sizes_that_are_expressions(rng):
    d = dg.Dim("d", max=100)
    cp = compile_op(K.Interpolate, [[D, 2, d, 4, 5]],
                    attrs={"mode": "linear", "sizes": [d * 2, 3, 7], "data_format": "NCX"})
    for n, dd in [(1, 1), (2, 3), (3, 6)]:
        x = rng.standard_normal((n, 2, dd, 4, 5)).astype(np.float32)
        (y,) = run(cp, x)
        want = ref.interpolate(x, [2 * dd, 3, 7], "linear", "half_pixel", "NCX")
        np.testing.assert_allclose(y, want, rtol=0, atol=linear_atol(x, [2 * dd, 3, 7]))


def test_3d_bilinear_is_a_shape_error():
    with pytest.raises(dg.ShapeError, match="is for 2-D data"):
        compile_op(K.Interpolate, [[D, 3, 4, 8, 8]], attrs={"data_format": "NCX", "mode": "bilinear",
                                                            "scales": [2.0, 2.0, 2.0]})
