"""Numerics of the unary ops added with oneDNN's attribute names (Clamp, Elu,
LeakyReLU, HardSigmoid, SoftPlus, Pow with a scalar exponent) and the
unary functions Reciprocal, Rsqrt, Erf, HardSwish, Mish, Round, Ceil,
Floor, Acos, Asin and Atan, against numpy.

Each op is compiled once with a dynamic dimension and run at three shapes.
References are computed in float64 and rounded to f32; the kernels compute
in f32 with libm's functions, so the bound is a few ulps (measured worst
case in the comments). Round, Ceil, Floor, Clamp and LeakyReLU are exact.
"""

import math

import ml_dtypes
import numpy as np
import pytest

import dyngraph as dg
from oputil import compile_op, run

K = dg.OpKind
EPS = 2.0**-23  # one ulp of 1.0 in f32

N = dg.Dim("n")
SHAPES = [(1, 5), (4, 5), (33, 5)]  # rows bind n: the first is the smallest size, the last above a vector width


def np_erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def softplus64(x, beta=1.0):
    bx = beta * x
    return (np.maximum(bx, 0) + np.log1p(np.exp(-np.abs(bx)))) / beta


# kind, attrs, float64 reference, relative bound (in ulps of f32), values to draw[, absolute bound]
UNARY = {
    "Reciprocal": (K.Reciprocal, {}, lambda x: 1.0 / x, 1, "any"),
    "Rsqrt": (K.Rsqrt, {}, lambda x: 1.0 / np.sqrt(x), 2, "positive"),  # two roundings: measured 1.0 ulp
    "Erf": (K.Erf, {}, np_erf, 2, "any"),  # glibc erff: measured 1.0 ulp
    # glibc acosf / asinf / atanf: measured 0.84 / 0.82 / 0.70 ulp on a dense grid of [-1, 1] (atan also
    # of [-100, 100] and 1e-30..1e30); acos and asin are NaN outside [-1, 1], as numpy's
    "Acos": (K.Acos, {}, np.arccos, 1, "unit"),
    "Asin": (K.Asin, {}, np.arcsin, 1, "unit"),
    "Atan": (K.Atan, {}, np.arctan, 1, "wide"),
    "HardSwish": (K.HardSwish, {}, lambda x: x * np.clip(x + 3, 0, 6) / 6, 3, "wide"),  # 3 roundings
    "Mish": (K.Mish, {}, lambda x: x * np.tanh(softplus64(x)), 4, "wide"),  # measured 2.1 ulp
    "Elu": (K.Elu, {"alpha": 0.7}, lambda x: np.where(x >= 0, x, 0.7 * np.expm1(np.minimum(x, 0))), 2, "wide"),
    # alpha x + beta cancels near 0: an absolute bound of an ulp of beta (alpha as f32, as the op holds it)
    "HardSigmoid": (K.HardSigmoid, {"alpha": 1 / 6, "beta": 0.5},
                    lambda x: np.clip(float(np.float32(1 / 6)) * x + 0.5, 0, 1), 2, "wide", 0.5 * EPS),
    "SoftPlus": (K.SoftPlus, {}, softplus64, 2, "wide"),
    "SoftPlus-beta2": (K.SoftPlus, {"beta": 2.0}, lambda x: softplus64(x, 2.0), 3, "wide"),
    "SoftPlus-beta-neg": (K.SoftPlus, {"beta": -0.5}, lambda x: softplus64(x, -0.5), 3, "wide"),
    "Pow-2.5": (K.Pow, {"beta": 2.5}, lambda x: x**2.5, 1, "positive"),  # glibc powf: < 1 ulp
    "Pow-neg2": (K.Pow, {"beta": -2.0}, lambda x: x**-2.0, 1, "any"),
    "Pow-3": (K.Pow, {"beta": 3.0}, lambda x: x**3.0, 1, "any"),
}
EXACT = {
    "Round": (K.Round, {}, np.round),  # ties to even, as numpy
    "Ceil": (K.Ceil, {}, np.ceil),
    "Floor": (K.Floor, {}, np.floor),
    "Clamp": (K.Clamp, {"min": -0.5, "max": 1.25}, lambda x: np.clip(x, np.float32(-0.5), np.float32(1.25))),
    "Clamp-open": (K.Clamp, {"min": -math.inf, "max": 0.0}, lambda x: np.minimum(x, np.float32(0))),
    "LeakyReLU": (K.LeakyReLU, {"alpha": 0.125}, lambda x: np.where(x >= 0, x, x * np.float32(0.125))),
}


def draw(rng, shape, kind):
    x = rng.standard_normal(shape) * 4
    if kind == "positive":
        x = np.abs(x) + 1e-3
    if kind == "wide":  # both tails and the values around the kinks
        x = x * 6
        x.flat[:4] = [-3.0, 3.0, 0.0, -30.0][: x.size]
    if kind == "unit":  # [-1, 1] and a little past it (NaN there), both ends and 0
        x = rng.uniform(-1.2, 1.2, shape)
        x.flat[:5] = [-1.0, 1.0, 0.0, 1.0 + 2.0**-23, -1.5][: x.size]
    return x.astype(np.float32)


@pytest.mark.parametrize("case", UNARY)
def test_unary_matches_numpy_within_a_few_ulps(case, rng):
    kind, attrs, ref, ulps, values, *atol = UNARY[case]
    cp = compile_op(kind, [[N, 5]], attrs=attrs)
    for shape in SHAPES:
        x = draw(rng, shape, values)
        (got,) = run(cp, x)
        assert got.dtype == np.float32 and got.shape == shape
        with np.errstate(invalid="ignore"):  # arccos / arcsin outside [-1, 1]
            want = ref(x.astype(np.float64))
        nan = np.isnan(want)
        assert (np.isnan(got) == nan).all(), f"{case}: NaN at {x[np.isnan(got) != nan]}"
        want, got = want[~nan], got[~nan]
        tol = ulps * EPS * np.maximum(np.abs(want), np.finfo(np.float32).tiny) + (atol[0] if atol else 0.0)
        err = np.abs(got.astype(np.float64) - want)
        assert (err <= tol).all(), f"{case}: worst {float((err / np.maximum(np.abs(want), 1e-38)).max()) / EPS:.2f} ulp"
    assert cp.cache_info().builds == len(SHAPES)


@pytest.mark.parametrize("case", EXACT)
def test_exact_unary_matches_numpy_bit_for_bit(case, rng):
    kind, attrs, ref = EXACT[case]
    cp = compile_op(kind, [[N, dg.DYNAMIC_DIM]], attrs=attrs)
    for shape in [(1, 1), (3, 8), (17, 9)]:
        x = (rng.standard_normal(shape) * 3).astype(np.float32)
        x.flat[: min(4, x.size)] = np.array([0.5, -2.5, 1.5, -0.0], np.float32)[: min(4, x.size)]  # ties, -0
        (got,) = run(cp, x)
        np.testing.assert_array_equal(got, ref(x))
        if kind in (K.Round, K.Ceil, K.Floor):  # -0.5 rounds to -0, like numpy
            assert np.array_equal(np.signbit(got), np.signbit(ref(x)))


@pytest.mark.parametrize("kind,attrs", [(K.Clamp, {"min": 0.0, "max": 1.0}), (K.LeakyReLU, {"alpha": 0.1}),
                                        (K.Elu, {"alpha": 1.0}), (K.HardSwish, {}), (K.Mish, {}), (K.Erf, {}),
                                        (K.Round, {}), (K.SoftPlus, {}), (K.HardSigmoid, {"alpha": 0.2, "beta": 0.5}),
                                        (K.Acos, {}), (K.Asin, {}), (K.Atan, {})])
def test_nan_stays_nan(kind, attrs):
    cp = compile_op(kind, [[N]], attrs=attrs)
    (got,) = run(cp, np.array([np.nan, 1.0], np.float32))
    assert np.isnan(got[0]) and not np.isnan(got[1])


def test_special_values():
    x = np.array([0.0, -0.0, np.inf, -np.inf, 1e-40, 100.0, -100.0], np.float32)
    cases = {
        (K.Reciprocal, ()): np.array([np.inf, -np.inf, 0.0, -0.0, np.inf, 0.01, -0.01]),  # 1/1e-40 overflows f32
        (K.Erf, ()): np_erf(x.astype(np.float64)),
        (K.SoftPlus, ()): softplus64(x.astype(np.float64)),
        (K.Pow, (("beta", 0.0),)): np.ones_like(x, np.float64),  # x ** 0 is 1, even for inf and 0
        (K.Atan, ()): np.arctan(x.astype(np.float64)),  # +-pi/2 at +-inf
    }
    with np.errstate(invalid="ignore"):  # NaN past +-1, the infinities included
        cases[K.Acos, ()] = np.arccos(x.astype(np.float64))
        cases[K.Asin, ()] = np.arcsin(x.astype(np.float64))
    for (kind, attrs), want in cases.items():
            cp = compile_op(kind, [[N]], attrs=dict(attrs))
            (got,) = run(cp, x)
            np.testing.assert_allclose(got, want.astype(np.float32), rtol=2 * EPS, atol=0, err_msg=kind.name)
            if kind in (K.Asin, K.Atan):  # odd: -0 gives -0
                assert np.array_equal(np.signbit(got[:2]), [False, True]), kind.name


@pytest.mark.parametrize("dtype", [dg.f16, dg.bf16])
def test_half_precision_is_computed_in_f32_and_rounded_once(dtype, rng):
    # the reference: Mish in float64, rounded to f32 and then to the half type (a value's f32 error
    # is far below half an f16 or bf16 step, so computing in f32 and rounding once gives these bits)
    half = np.float16 if dtype is dg.f16 else ml_dtypes.bfloat16
    cp = compile_op(K.Mish, [[N, 4]], in_dtypes=dtype)
    for n in (1, 6):
        x = rng.standard_normal((n, 4)).astype(half)
        x64 = x.astype(np.float64)
        want = (x64 * np.tanh(np.log1p(np.exp(x64)))).astype(np.float32).astype(half)
        arg = x if dtype is dg.f16 else x.view(np.uint16)
        (got,) = run(cp, arg)
        np.testing.assert_array_equal(np.asarray(got).view(half).view(np.uint16), want.view(np.uint16))


@pytest.mark.parametrize("kind,attrs,match", [
    (K.Elu, {"alpha": -1.0}, "'alpha' must be >= 0"),
    (K.Elu, {}, "'alpha' is required"),
    (K.SoftPlus, {"beta": 0.0}, "beta must be nonzero"),
    (K.Clamp, {"min": math.nan, "max": 1.0}, "must not be NaN"),
    (K.Clamp, {"min": 0.0}, "'max' is required"),
    (K.HardSigmoid, {"alpha": math.inf, "beta": 0.0}, "must be finite"),
    (K.LeakyReLU, {"alpha": "x"}, "must be a float"),
])
def test_bad_attributes_are_refused(kind, attrs, match):
    with pytest.raises((dg.GraphError, dg.ShapeError), match=match):
        compile_op(kind, [[N]], attrs=attrs)


@pytest.mark.parametrize("kind", [K.Erf, K.Round, K.Reciprocal, K.Acos])
def test_integer_inputs_are_dtype_errors(kind):
    with pytest.raises(dg.DTypeError, match="floating-point"):
        compile_op(kind, [[N]], in_dtypes=dg.i32)
