"""Numerics of the elementwise ops against numpy: binary ops with numpy
broadcasting, unary activations, BiasAdd.

Every test compiles its op once, with dynamic dimensions, and runs several
concrete shapes through that one compiled partition. Tolerances were set by
measuring the actual error (see the comments where one is looser than 1e-6
relative); ops that round once (add, sub, mul, div, max, min, sqrt, square,
abs, neg, relu) must match numpy exactly.
"""

import math

import numpy as np
import pytest

import dyngraph as dg
from oputil import compile_op, run

K = dg.OpKind

F32_EPS = 2.0**-23  # one ulp of 1.0 in f32
F16_U = 2.0**-11  # unit roundoff of f16: rounding a result to f16 costs at most this, relative
F16_TINY = 2.0**-25  # half the spacing of f16 subnormals: the rounding error near zero


# -- shapes ------------------------------------------------------------------------------------------
#
# A case's shapes are written with the letters "n" and "m" (one named dynamic dimension each, shared by
# both inputs), "?" (an anonymous DYNAMIC_DIM) and ints. BINDINGS give the values of the runs.

BINDINGS = [{"n": 1, "m": 1, "?": 1}, {"n": 3, "m": 5, "?": 2}, {"n": 17, "m": 64, "?": 9}]


def symbolic(shape, dims):
    return [dims[d] if d in dims else dg.DYNAMIC_DIM if d == "?" else d for d in shape]


def concrete(shape, binding):
    return tuple(binding[d] if isinstance(d, str) else d for d in shape)


def named_dims():
    return {"n": dg.Dim("n"), "m": dg.Dim("m")}


def compile_shapes(kind, shapes, dtype=dg.f32, attrs=None, engine=None):
    dims = named_dims()
    return compile_op(kind, [symbolic(s, dims) for s in shapes], in_dtypes=dtype, attrs=attrs, engine=engine)


BROADCAST_CASES = {
    "same": (["n", "m"], ["n", "m"]),
    "b_row": (["n", "m"], ["m"]),
    "b_column": (["n", "m"], ["n", 1]),
    "a_row": (["m"], ["n", "m"]),  # the first operand broadcasts
    "a_column": (["n", 1], ["n", "m"]),
    "a_scalar": ([], ["n", "m"]),
    "both": (["n", 1], [1, "m"]),  # each operand broadcasts along a different axis
    "rank4_both": ([2, 1, "n", 1], [1, 3, 1, "m"]),
    "anonymous": (["?", 8], [1, 8]),
}

BINARY_NUMPY = {
    K.Add: np.add,
    K.Subtract: np.subtract,
    K.Multiply: np.multiply,
    K.Divide: np.divide,
    K.Maximum: np.maximum,
    K.Minimum: np.minimum,
}
INT_BINARY = [K.Add, K.Subtract, K.Multiply, K.Maximum, K.Minimum]


def random_float(rng, shape, dtype):
    return rng.standard_normal(shape).astype(dtype)


def run_binary_cases(kind, case, dtype, make):
    sa, sb = BROADCAST_CASES[case]
    cp = compile_shapes(kind, [sa, sb], dtype)
    for binding in BINDINGS:
        a, b = make(concrete(sa, binding)), make(concrete(sb, binding))
        (out,) = run(cp, a, b)
        want = BINARY_NUMPY[kind](a, b)
        assert out.dtype == want.dtype and out.shape == want.shape
        # one IEEE operation per element, rounded once: bit-exact
        np.testing.assert_array_equal(out, want, err_msg=f"{kind.name} {case} at {binding}")


# -- binary ops ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", BROADCAST_CASES)
@pytest.mark.parametrize("kind", BINARY_NUMPY, ids=lambda k: k.name)
def test_binary_f32_matches_numpy_exactly(kind, case, rng):
    run_binary_cases(kind, case, dg.f32, lambda s: random_float(rng, s, np.float32))


@pytest.mark.parametrize("case", ["same", "a_row", "both"])
@pytest.mark.parametrize("kind", BINARY_NUMPY, ids=lambda k: k.name)
def test_binary_f16_matches_numpy_exactly(kind, case, rng):
    # computed in f32 and rounded to f16 once, which is what numpy does for float16
    run_binary_cases(kind, case, dg.f16, lambda s: random_float(rng, s, np.float16))


@pytest.mark.parametrize("case", ["same", "b_row", "a_row", "a_column", "a_scalar", "both", "rank4_both"])
@pytest.mark.parametrize("kind", INT_BINARY, ids=lambda k: k.name)
def test_binary_i32_matches_numpy_exactly(kind, case, rng):
    run_binary_cases(kind, case, dg.i32, lambda s: rng.integers(-1000, 1000, s).astype(np.int32))


@pytest.mark.parametrize("const_input", [0, 1])
@pytest.mark.parametrize("dtype", [dg.f32, dg.i32])
@pytest.mark.parametrize("kind", [K.Subtract, K.Maximum], ids=lambda k: k.name)
def test_binary_with_a_constant_operand(kind, dtype, const_input, rng):
    # the constant is the smaller operand: as input 0 it is the one that broadcasts
    shapes = [[1, 8], ["n", 8]] if const_input == 0 else [["n", 8], [8]]
    value = rng.integers(-50, 50, shapes[const_input]).astype(dtype.numpy)
    dims = named_dims()
    cp = compile_op(kind, [symbolic(s, dims) for s in shapes], in_dtypes=dtype, constants={const_input: value})
    for binding in BINDINGS:
        x = rng.integers(-50, 50, concrete(shapes[1 - const_input], binding)).astype(dtype.numpy)
        (out,) = run(cp, x)
        want = BINARY_NUMPY[kind](value, x) if const_input == 0 else BINARY_NUMPY[kind](x, value)
        np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("kind", [K.Add, K.Subtract, K.Multiply], ids=lambda k: k.name)
def test_binary_i32_wraps_around_on_overflow_like_numpy(kind):
    big = np.iinfo(np.int32)
    a = np.array([big.max, big.min, big.max, 65536, -7, 123456789], np.int32)
    b = np.array([1, -1, big.max, 65536, big.min, 987654321], np.int32)
    cp = compile_shapes(kind, [["n"], ["n"]], dg.i32)
    (out,) = run(cp, a, b)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(out, BINARY_NUMPY[kind](a, b))


@pytest.mark.parametrize("kind", [K.Add, K.Multiply, K.Maximum, K.Minimum], ids=lambda k: k.name)
def test_binary_bool_matches_numpy(kind):
    # numpy: bool + is logical or, bool * is logical and
    a = np.array([[False, False, True, True]])
    b = np.array([[False, True, False, True], [True, True, True, True]])
    cp = compile_shapes(kind, [[1, "m"], ["n", "m"]], dg.boolean)
    (out,) = run(cp, a, b)
    np.testing.assert_array_equal(out, BINARY_NUMPY[kind](a, b))


@pytest.mark.parametrize("kind", [K.Maximum, K.Minimum], ids=lambda k: k.name)
def test_max_min_propagate_nan_like_numpy(kind):
    a = np.array([np.nan, 1.0, np.nan, -np.inf, 0.0], np.float32)
    b = np.array([2.0, np.nan, np.nan, np.inf, -0.0], np.float32)
    cp = compile_shapes(kind, [["n"], ["n"]])
    (out,) = run(cp, a, b)
    np.testing.assert_array_equal(out, BINARY_NUMPY[kind](a, b))


def test_binary_auto_broadcast_none_computes_equal_shapes(rng):
    cp = compile_shapes(K.Add, [["n", "m"], ["n", "m"]], attrs={"auto_broadcast": "none"})
    for binding in BINDINGS:
        a = random_float(rng, concrete(["n", "m"], binding), np.float32)
        b = random_float(rng, a.shape, np.float32)
        np.testing.assert_array_equal(run(cp, a, b)[0], a + b)


def test_binary_auto_broadcast_none_refuses_different_shapes():
    with pytest.raises(dg.ShapeError, match="auto_broadcast"):
        compile_shapes(K.Add, [["n", "m"], ["m"]], attrs={"auto_broadcast": "none"})


def test_binary_static_shapes_that_do_not_broadcast_fail_at_finalize():
    with pytest.raises(dg.ShapeError, match="do not broadcast"):
        compile_shapes(K.Multiply, [["n", 4], ["n", 5]])


def test_binary_dynamic_dims_that_differ_at_execution_raise_shape_error(rng):
    # two distinct dynamic dims broadcast against each other must be equal when run
    cp = compile_op(K.Add, [[dg.DYNAMIC_DIM, 4], [dg.DYNAMIC_DIM, 4]])
    a, b = random_float(rng, (3, 4), np.float32), random_float(rng, (5, 4), np.float32)
    with pytest.raises(dg.ShapeError, match="broadcast dimension 0"):
        run(cp, a, b)


@pytest.mark.parametrize("kind", BINARY_NUMPY, ids=lambda k: k.name)
def test_binary_mixed_dtypes_raise_dtype_error(kind):
    with pytest.raises(dg.DTypeError, match="must match"):
        compile_shapes(kind, [["n"], ["n"]], [dg.f32, dg.f16])


@pytest.mark.parametrize("dtype", [dg.i32, dg.i64, dg.boolean])
def test_integer_divide_is_refused(dtype):
    with pytest.raises(dg.DTypeError, match="Divide"):
        compile_shapes(K.Divide, [["n"], ["n"]], dtype)


def test_bool_subtract_is_refused():
    with pytest.raises(dg.DTypeError, match="bool"):
        compile_shapes(K.Subtract, [["n"], ["n"]], dg.boolean)


# -- unary ops -------------------------------------------------------------------------------------------

_erfc = np.vectorize(math.erfc, otypes=[np.float64])


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _gelu_erf(x):
    return 0.5 * x * _erfc(-x / math.sqrt(2.0))  # erfc: no cancellation in 1 + erf for x < 0


def _gelu_tanh(x):
    u = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)
    return x * _sigmoid(2.0 * u)  # = 0.5 x (1 + tanh u), without its cancellation for x < 0


# (op, attrs) -> (float64 reference, input sampler)
def _normal(scale):
    return lambda rng, shape: rng.standard_normal(shape) * scale


def _positive(rng, shape):
    return np.exp(rng.uniform(-7.0, 7.0, shape))  # 1e-3 .. 1e3


UNARY = {
    "ReLU": (K.ReLU, {}, lambda x: np.maximum(x, 0.0), _normal(3.0)),
    "GELU_erf": (K.GELU, {"mode": "erf"}, _gelu_erf, _normal(3.0)),
    "GELU_tanh": (K.GELU, {"mode": "tanh"}, _gelu_tanh, _normal(3.0)),
    "SiLU": (K.SiLU, {}, lambda x: x * _sigmoid(x), _normal(8.0)),
    "Sigmoid": (K.Sigmoid, {}, _sigmoid, _normal(8.0)),
    "Tanh": (K.Tanh, {}, np.tanh, _normal(3.0)),
    "Exp": (K.Exp, {}, np.exp, lambda rng, shape: rng.uniform(-80.0, 80.0, shape)),
    "Log": (K.Log, {}, np.log, _positive),
    "Sqrt": (K.Sqrt, {}, np.sqrt, _positive),
    "Square": (K.Square, {}, np.square, _normal(100.0)),
    "Abs": (K.Abs, {}, np.abs, _normal(3.0)),
    "Neg": (K.Neg, {}, np.negative, _normal(3.0)),
    "Sin": (K.Sin, {}, np.sin, lambda rng, shape: rng.uniform(-200.0, 200.0, shape)),
    "Cos": (K.Cos, {}, np.cos, lambda rng, shape: rng.uniform(-200.0, 200.0, shape)),
}

# f32 error bound relative to the exact result, in ulps of f32 (measured maximum over 64k random inputs
# in brackets). 0: the op rounds once and must equal the correctly rounded result.
F32_ULPS = {
    "ReLU": 0,
    "Abs": 0,
    "Neg": 0,
    "Square": 0,
    "Sqrt": 0,
    "Exp": 1,  # [0.50 ulp] not guaranteed correctly rounded
    "Log": 1,  # [0.62 ulp]
    "Tanh": 2,  # [1.25 ulp] libm tanhf
    "Sigmoid": 3,  # [1.11 ulp] 1 / (1 + exp(-x)): exp, an add and a division each round
    "SiLU": 3,  # [1.92 ulp] x / (1 + exp(-x)) with ggml's vectorized exp (itself up to 1.5 ulp)
    "Sin": 1,  # libm sinf / cosf
    "Cos": 1,
}
# GELU(x) = x * Phi(x) with Phi in [0, 1] computed to absolute f32 precision, so the error is an ulp or
# so of |x|, not of the result: the result is tiny for x << 0, where 1 + erf(x / sqrt 2) cancels in
# ggml's erf form and exp(-2u) is ill-conditioned in the tanh form. [measured: 1.06 ulps of |x| at most for
# erf on a dense grid of [-2, 2] (1.18 without multiply-adds), 1.20 for tanh (1.02 when it called libm's
# expf); before the tanh form had its own kernel, ggml's f16 table gave 4e-3 relative]
GELU_ULPS_OF_X = 2
UNARY_SHAPE = ["n", "?"]


def assert_unary_close(name, out, x, want, round_to=None):
    """|out - want| within the op's bound; round_to=f16 adds the final rounding to f16."""
    out = out.astype(np.float64)
    if name.startswith("GELU"):
        bound = GELU_ULPS_OF_X * F32_EPS * np.abs(x)
    else:
        # half an ulp when correctly rounded; a whole ulp per unit of F32_ULPS otherwise
        bound = max(F32_ULPS[name], 0.5) * F32_EPS * np.abs(want)
    if round_to is np.float16:
        bound = bound + F16_U * np.abs(want) + F16_TINY
    err = np.abs(out - want)
    bad = ~(err <= bound)
    assert not bad.any(), (
        f"{name}: {bad.sum()} of {bad.size} outside the bound; worst at x={x[bad][0]!r}: "
        f"got {out[bad][0]!r}, want {want[bad][0]!r}"
    )


@pytest.mark.parametrize("name", UNARY)
def test_unary_f32_matches_numpy(name, rng):
    kind, attrs, ref, sample = UNARY[name]
    cp = compile_shapes(kind, [UNARY_SHAPE], attrs=attrs)
    for binding in BINDINGS + [{"n": 64, "?": 1024}]:
        x = sample(rng, concrete(UNARY_SHAPE, binding)).astype(np.float32)
        (out,) = run(cp, x)
        assert out.dtype == np.float32 and out.shape == x.shape
        x64 = x.astype(np.float64)
        if F32_ULPS.get(name) == 0:
            np.testing.assert_array_equal(out, ref(x64).astype(np.float32))
        else:
            assert_unary_close(name, out, x64, ref(x64))


@pytest.mark.parametrize("name", UNARY)
def test_unary_f16_matches_numpy(name, rng):
    # computed in f32, rounded to f16 once: the f32 bound plus half an f16 ulp
    kind, attrs, ref, sample = UNARY[name]
    cp = compile_shapes(kind, [UNARY_SHAPE], dg.f16, attrs=attrs)
    for binding in BINDINGS + [{"n": 16, "?": 256}]:
        x = sample(rng, concrete(UNARY_SHAPE, binding))
        if name in ("Exp", "Square"):
            x = x / 8.0  # keep the results below f16's maximum, 65504
        x = x.astype(np.float16)
        (out,) = run(cp, x)
        assert out.dtype == np.float16 and out.shape == x.shape
        x64 = x.astype(np.float64)
        assert_unary_close(name, out, x64, ref(x64), round_to=np.float16)


SPECIAL = np.array(
    [-np.inf, -1e30, -100.0, -1.0, -1e-30, -0.0, 0.0, 1e-30, 1.0, 100.0, 1e30, np.inf, np.nan], np.float32
)


@pytest.mark.parametrize("name", [n for n in UNARY if not n.startswith("GELU")])
def test_unary_special_values_follow_numpy(name):
    # infinities, NaN (ReLU too: NaN stays NaN), signed zeros, overflow and underflow
    kind, attrs, ref, _ = UNARY[name]
    cp = compile_shapes(kind, [["n"]], attrs=attrs)
    (out,) = run(cp, SPECIAL)
    with np.errstate(all="ignore"):
        want = ref(SPECIAL.astype(np.float64)).astype(np.float32)
    # atol: sigmoid(-100) and silu(-100) are subnormal, where exp(100) has overflowed to inf and they come out 0
    tiny = float(np.finfo(np.float32).tiny)
    np.testing.assert_allclose(out, want, rtol=max(F32_ULPS[name], 0.5) * F32_EPS, atol=tiny, equal_nan=True)


@pytest.mark.parametrize("mode", ["erf", "tanh"])
def test_gelu_limits(mode):
    # GELU(x) -> x for large x, -> 0 for very negative x, NaN stays NaN
    x = np.array([-1e30, -200.0, -30.0, 0.0, 30.0, 200.0, 1e30, np.inf, np.nan], np.float32)
    cp = compile_shapes(K.GELU, [["n"]], attrs={"mode": mode})
    (out,) = run(cp, x)
    want = np.array([0, 0, 0, 0, 30.0, 200.0, 1e30, np.inf, np.nan], np.float32)
    np.testing.assert_array_equal(out, want)


def test_gelu_tanh_relative_error_over_the_whole_range():
    # x sigmoid(2u) with our exp (no libm call: vectorized): relative error about 1.5e-6 down to x = -4,
    # from the f32 rounding of 2u (an error of 2u is one of the same size, relatively, in sigmoid(2u)
    # where 2u < 0), growing in the tail as 2u does (1.3e-5 at most, near x = -13); no cancellation anywhere.
    # [measured on a dense grid: 1.5e-6 / 1.6e-6 (AVX2 / without multiply-adds) and 1.34e-5]
    x = np.concatenate([np.linspace(-13.0, 13.0, 20001), -np.geomspace(1e-30, 1e-3, 50), np.geomspace(1e-30, 1e-3, 50)])
    x = x.astype(np.float32)
    cp = compile_shapes(K.GELU, [["n"]], attrs={"mode": "tanh"})
    (out,) = run(cp, x)
    want = _gelu_tanh(x.astype(np.float64))
    tiny = float(np.finfo(np.float32).tiny)
    core = x >= -4.0
    np.testing.assert_allclose(out[core], want[core], rtol=2.5e-6, atol=tiny)
    np.testing.assert_allclose(out[~core], want[~core], rtol=2e-5, atol=tiny)


def test_gelu_tanh_of_the_infinities_and_overflow_are_its_limits():
    # 2u overflows from |x| ~ 1e13 on: GELU is x there (0 below), and -inf gives 0 (x sigmoid(2u) would be -inf * 0)
    cp = compile_shapes(K.GELU, [["n"]], attrs={"mode": "tanh"})
    (out,) = run(cp, np.array([-np.inf, -3e38, -1e14, np.inf, 3e38, 1e14, -0.0], np.float32))
    np.testing.assert_array_equal(out, np.array([0, 0, 0, np.inf, 3e38, 1e14, 0], np.float32))


def test_gelu_erf_of_minus_infinity_is_its_limit():
    # 0, as GELU(x) -> 0 for x -> -inf (PyTorch's x * (1 + erf(x / sqrt 2)) / 2 gives -inf * 0 = NaN)
    cp = compile_shapes(K.GELU, [["n"]], attrs={"mode": "erf"})
    (out,) = run(cp, np.array([-np.inf, -1e4, -1e5, np.inf, 1e5], np.float32))
    np.testing.assert_array_equal(out, np.array([0, 0, 0, np.inf, 1e5], np.float32))


@pytest.mark.parametrize("dtype", [dg.i32, dg.i64, dg.boolean])
@pytest.mark.parametrize("name", ["ReLU", "GELU_tanh", "Exp", "Abs"])
def test_unary_on_integers_raises_dtype_error(name, dtype):
    kind, attrs, _, _ = UNARY[name]
    with pytest.raises(dg.DTypeError, match="floating-point"):
        compile_shapes(kind, [["n"]], dtype, attrs=attrs)


def test_gelu_unknown_mode_is_a_graph_error():
    with pytest.raises(dg.GraphError, match="mode"):
        compile_shapes(K.GELU, [["n"]], attrs={"mode": "quick"})


@pytest.mark.parametrize("name", ["ReLU", "GELU_tanh"])
def test_unary_custom_kernels_split_rows_across_threads(name, rng):
    kind, attrs, ref, sample = UNARY[name]
    shape = ["n", "?", "m"]
    cp = compile_shapes(kind, [shape], attrs=attrs, engine=dg.Engine(dg.Engine.CPU, num_threads=2))
    for binding in BINDINGS:
        x = sample(rng, concrete(shape, binding)).astype(np.float32)
        (out,) = run(cp, x)
        if F32_ULPS.get(name) == 0:
            np.testing.assert_array_equal(out, ref(x.astype(np.float64)).astype(np.float32))
        else:
            assert_unary_close(name, out, x.astype(np.float64), ref(x.astype(np.float64)))


@pytest.mark.parametrize(
    "kind, dtype",
    [(K.Maximum, dg.f32), (K.Minimum, dg.f16), (K.Add, dg.i32), (K.Multiply, dg.i32)],
    ids=lambda v: getattr(v, "name", str(v)),
)
def test_binary_custom_kernels_split_rows_across_threads(kind, dtype, rng):
    sa, sb = ["?", 1, "m"], [1, "n", "m"]
    cp = compile_shapes(kind, [sa, sb], dtype, engine=dg.Engine(dg.Engine.CPU, num_threads=2))
    for binding in BINDINGS:
        a, b = (rng.integers(-99, 99, concrete(s, binding)).astype(dtype.numpy) for s in (sa, sb))
        np.testing.assert_array_equal(run(cp, a, b)[0], BINARY_NUMPY[kind](a, b))


# -- BiasAdd -------------------------------------------------------------------------------------------

# (x shape, bias shape, data_format, numpy axis of the channel)
BIAS_CASES = {
    "NXC_rank1": (["c"], ["c"], "NXC"),
    "NXC_rank2": (["n", "c"], ["c"], "NXC"),
    "NXC_rank4": (["n", 3, "m", "c"], ["c"], "NXC"),
    "NCX_rank2": (["n", "c"], ["c"], "NCX"),
    "NCX_rank3": (["n", "c", "m"], ["c"], "NCX"),
    "NCX_rank4": (["n", "c", "m", 5], ["c"], "NCX"),
}
BIAS_BINDINGS = [{"n": 1, "m": 1, "c": 1}, {"n": 2, "m": 3, "c": 4}, {"n": 5, "m": 7, "c": 32}]


def bias_reference(x, bias, fmt):
    if fmt == "NCX" and x.ndim > 1:
        return x + bias.reshape((-1,) + (1,) * (x.ndim - 2))
    return x + bias


def run_bias_cases(case, dtype, rng):
    sx, sb, fmt = BIAS_CASES[case]
    dims = {"n": dg.Dim("n"), "m": dg.Dim("m"), "c": dg.Dim("c")}
    cp = compile_op(K.BiasAdd, [symbolic(sx, dims), symbolic(sb, dims)], in_dtypes=dtype, attrs={"data_format": fmt})
    for binding in BIAS_BINDINGS:
        x = random_float(rng, concrete(sx, binding), dtype.numpy)
        bias = random_float(rng, concrete(sb, binding), dtype.numpy)
        (out,) = run(cp, x, bias)
        want = bias_reference(x, bias, fmt)
        assert out.dtype == want.dtype
        np.testing.assert_array_equal(out, want, err_msg=f"{case} at {binding}")  # one rounding: exact


@pytest.mark.parametrize("case", BIAS_CASES)
def test_bias_add_f32_matches_numpy_exactly(case, rng):
    run_bias_cases(case, dg.f32, rng)


@pytest.mark.parametrize("case", ["NXC_rank2", "NCX_rank4"])
def test_bias_add_f16_matches_numpy_exactly(case, rng):
    run_bias_cases(case, dg.f16, rng)


@pytest.mark.parametrize("fmt", ["NXC", "NCX"])
def test_bias_add_with_a_constant_bias(fmt, rng):
    bias = random_float(rng, (6,), np.float32)
    shape = ["n", "m", 6] if fmt == "NXC" else ["n", 6, "m"]
    cp = compile_op(K.BiasAdd, [symbolic(shape, named_dims()), [6]], attrs={"data_format": fmt}, constants={1: bias})
    for binding in BINDINGS:
        x = random_float(rng, concrete(shape, binding), np.float32)
        np.testing.assert_array_equal(run(cp, x)[0], bias_reference(x, bias, fmt))


def test_bias_add_bias_must_be_1d():
    with pytest.raises(dg.ShapeError, match="1-D"):
        compile_shapes(K.BiasAdd, [["n", 4], [1, 4]])


@pytest.mark.parametrize("fmt", ["NXC", "NCX"])
def test_bias_add_bias_length_must_match_channels(fmt):
    with pytest.raises(dg.ShapeError, match="bias length"):
        compile_shapes(K.BiasAdd, [["n", 4, 6], [5]], attrs={"data_format": fmt})


def test_bias_add_dynamic_bias_length_is_checked_at_execution(rng):
    cp = compile_op(K.BiasAdd, [[dg.DYNAMIC_DIM, dg.DYNAMIC_DIM], [dg.DYNAMIC_DIM]])
    with pytest.raises(dg.ShapeError, match="bias length"):
        run(cp, random_float(rng, (2, 4), np.float32), random_float(rng, (3,), np.float32))


def test_bias_add_ncx_needs_rank_2():
    with pytest.raises(dg.ShapeError, match="channel axis"):
        compile_shapes(K.BiasAdd, [["n"], ["n"]], attrs={"data_format": "NCX"})


def test_bias_add_on_integers_raises_dtype_error():
    with pytest.raises(dg.DTypeError, match="floating-point"):
        compile_shapes(K.BiasAdd, [["n", 4], [4]], dg.i32)


def test_bias_add_mixed_dtypes_raise_dtype_error():
    with pytest.raises(dg.DTypeError, match="must match"):
        compile_op(K.BiasAdd, [[dg.DYNAMIC_DIM, 4], [4]], in_dtypes=[dg.f16, dg.f32])


def test_gelu_erf_relative_error_over_the_whole_range():
    # the vectorized kernel (erfc through a fitted polynomial + own exp): relative error below 1e-6 down
    # to x = -4 (measured 8e-7 with multiply-adds, 9e-7 without: DYNGRAPH_KERNEL_ISA=generic); in the
    # negative tail (GELU(-13) ~ 1e-37) the f32 rounding of x^2 / 2 inside exp(q - x^2 / 2) grows with x^2
    # (6e-8 * x^2 / 2 = 5e-6 at x = -13; measured 4.4e-6), and nothing cancels
    x = np.concatenate([np.linspace(-13.0, 13.0, 20001), -np.geomspace(1e-30, 1e-3, 50), np.geomspace(1e-30, 1e-3, 50)])
    x = x.astype(np.float32)
    cp = compile_shapes(K.GELU, [["n"]], attrs={"mode": "erf"})
    (out,) = run(cp, x)
    want = np.array([0.5 * v * math.erfc(-v / math.sqrt(2.0)) for v in x.astype(np.float64)])
    tiny = float(np.finfo(np.float32).tiny)
    core = x >= -4.0
    np.testing.assert_allclose(out[core], want[core], rtol=1.5e-6, atol=tiny)
    np.testing.assert_allclose(out[~core], want[~core], rtol=1e-5, atol=tiny)
