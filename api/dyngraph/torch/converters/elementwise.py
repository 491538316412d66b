"""Elementwise arithmetic and activations.

Inputs are cast to the dtype torch computes the result in (the node's output
dtype); Python numbers become 0-d constants of that dtype. ``x * 1``,
``x + 0`` and the like are the input itself.
"""

from __future__ import annotations

import math

from ...dtypes import DataType
from ...op import OpKind as K
from .common import aten, number, through_identities, is_call
from .registry import Args, FloatScalar, Unsupported, canonical, converter
from .rope import rotary_pattern


def _binary(cx, kind, a, b):
    dt = cx.out_dtype()
    return cx.emit(kind, [cx.operand(a, dt), cx.operand(b, dt)])


def _is(v, x) -> bool:
    n = number(v)
    return n is not None and not isinstance(n, bool) and n == x


def _alpha(cx, alpha):
    """add's / sub's alpha: a number, or a float read from tensor data (its node)."""
    if alpha is None:
        return 1
    if number(alpha) is None and not isinstance(cx.value(alpha), FloatScalar):
        raise Unsupported("a symbolic alpha")
    return alpha


def _same(cx, a):
    """``a`` itself, when it already is the node's result type."""
    return cx.cast(cx.tensor(a), cx.out_dtype())


@converter(aten.add.Tensor, aten.add.Scalar)
def add(cx, node, a):
    alpha = _alpha(cx, a.alpha)
    if _is(a.other, 0) and cx.is_tensor(a.self):
        return _same(cx, a.self)
    if _is(a.self, 0) and cx.is_tensor(a.other) and _is(alpha, 1):
        return _same(cx, a.other)
    if _is(alpha, 1) and cx.is_tensor(a.self) and cx.is_tensor(a.other):
        y = rotary_pattern(cx, a.self, a.other)
        if y is not None:
            return y
    dt = cx.out_dtype()
    y = cx.operand(a.other, dt)
    if not _is(alpha, 1):
        y = cx.emit(K.Multiply, [y, cx.operand(alpha, dt)])
    return cx.emit(K.Add, [cx.operand(a.self, dt), y])


@converter(aten.sub.Tensor, aten.sub.Scalar)
def sub(cx, node, a):
    alpha = _alpha(cx, a.alpha)
    if _is(a.other, 0) and cx.is_tensor(a.self):
        return _same(cx, a.self)
    dt = cx.out_dtype()
    y = cx.operand(a.other, dt)
    if not _is(alpha, 1):
        y = cx.emit(K.Multiply, [y, cx.operand(alpha, dt)])
    return cx.emit(K.Subtract, [cx.operand(a.self, dt), y])


@converter(aten.rsub.Tensor, aten.rsub.Scalar)
def rsub(cx, node, a):
    alpha = _alpha(cx, a.alpha)
    dt = cx.out_dtype()
    x = cx.operand(a.self, dt)
    if not _is(alpha, 1):
        x = cx.emit(K.Multiply, [x, cx.operand(alpha, dt)])
    return cx.emit(K.Subtract, [cx.operand(a.other, dt), x])


def _rms_norm_pattern(cx, x, r):
    """x * rsqrt(mean(x ** 2, -1, keepdim) + eps) -> RMSNorm(x), else None."""
    r = through_identities(r)
    if not is_call(r, aten.rsqrt.default):
        return None
    s = through_identities(r.args[0])
    if not is_call(s, aten.add.Tensor, aten.add.Scalar) or number(s.args[1]) is None:
        return None
    eps = float(number(s.args[1]))
    m = through_identities(s.args[0])
    if not is_call(m, aten.mean.dim) or len(m.args) < 3 or not m.args[2]:
        return None
    rank = cx.rank_of(x)
    dims = m.args[1]
    if dims is None or len(dims) != 1 or dims[0] % max(rank, 1) != rank - 1:
        return None
    p = through_identities(m.args[0])
    if is_call(p, aten.pow.Tensor_Scalar) and _is(p.args[1], 2):
        base = p.args[0]
    elif is_call(p, aten.mul.Tensor) and p.args[0] is p.args[1]:
        base = p.args[0]
    else:
        return None
    if through_identities(base) is not through_identities(x):
        return None
    if cx.meta(x).dtype != cx.out.dtype:
        return None
    return cx.emit(K.RMSNorm, [cx.tensor(x)], {"epsilon": eps, "begin_norm_axis": -1})


@converter(aten.mul.Tensor, aten.mul.Scalar)
def mul(cx, node, a):
    if _is(a.other, 1) and cx.is_tensor(a.self):
        return _same(cx, a.self)
    if _is(a.self, 1) and cx.is_tensor(a.other):
        return _same(cx, a.other)
    if cx.is_tensor(a.self) and cx.is_tensor(a.other):
        for x, r in ((a.self, a.other), (a.other, a.self)):
            y = _rms_norm_pattern(cx, x, r)
            if y is not None:
                return y
    return _binary(cx, K.Multiply, a.self, a.other)


@converter(aten.div.Tensor, aten.div.Scalar)
def div(cx, node, a):
    if _is(a.other, 1) and cx.is_tensor(a.self):
        return _same(cx, a.self)
    return _binary(cx, K.Divide, a.self, a.other)


@converter(aten.div.Tensor_mode, aten.div.Scalar_mode)
def div_mode(cx, node, a):
    if a.rounding_mode is None:
        return _binary(cx, K.Divide, a.self, a.other)
    if a.rounding_mode == "floor":
        return _binary(cx, K.FloorDivide, a.self, a.other)
    if a.rounding_mode == "trunc" and cx.out_dtype().is_float:
        # torch: trunc(a / b), the quotient rounded once
        q = _binary(cx, K.Divide, a.self, a.other)
        neg = cx.emit(K.Less, [q, cx.full(0.0, q.dtype)])
        return cx.emit(K.Select, [neg, cx.emit(K.Ceil, [q]), cx.emit(K.Floor, [q])])
    if a.rounding_mode == "trunc":
        dt = cx.out_dtype()
        return _trunc_quotient(cx, cx.operand(a.self, dt), cx.operand(a.other, dt))
    raise Unsupported(f"rounding_mode={a.rounding_mode!r} on {cx.out_dtype()}")


def _trunc_quotient(cx, x, y):
    """x / y rounded toward 0, on integers: the floor quotient, one up where it is negative
    and inexact."""
    dt = x.dtype
    q = cx.emit(K.FloorDivide, [x, y])
    r = cx.emit(K.Subtract, [x, cx.emit(K.Multiply, [q, y])])
    zero = cx.full(0, dt)
    up = cx.emit(K.LogicalAnd, [cx.emit(K.NotEqual, [r, zero]), cx.emit(K.Less, [q, zero])])
    return cx.emit(K.Select, [up, cx.emit(K.Add, [q, cx.full(1, dt)]), q])


@converter(aten.fmod.Scalar, aten.fmod.Tensor)
def fmod(cx, node, a):
    """x - trunc(x / y) * y with the sign of x, on integers (exact; torch.roll's decomposed
    indices). Floats stay in PyTorch, as remainder's do."""
    dt = cx.out_dtype()
    if dt.is_float:
        raise Unsupported(f"fmod of {dt}")
    x, y = cx.operand(a.self, dt), cx.operand(a.other, dt)
    return cx.emit(K.Subtract, [x, cx.emit(K.Multiply, [_trunc_quotient(cx, x, y), y])])


@converter(aten.floor_divide.default, aten.floor_divide.Scalar)
def floor_divide(cx, node, a):
    return _binary(cx, K.FloorDivide, a.self, a.other)


@converter(aten.remainder.Scalar, aten.remainder.Tensor, aten.remainder.Scalar_Tensor)
def remainder(cx, node, a):
    """x % y with the sign of y, on integers: x - (x // y) * y, exact (the
    floor division rounds toward -inf). Floats stay in PyTorch: x - floor(x / y)
    * y rounds where torch's fmod-based remainder is exact."""
    dt = cx.out_dtype()
    if dt.is_float:
        raise Unsupported(f"remainder of {dt}")
    x, y = cx.operand(a.self, dt), cx.operand(a.other, dt)
    q = cx.emit(K.FloorDivide, [x, y])
    return cx.emit(K.Subtract, [x, cx.emit(K.Multiply, [q, y])])


@converter(aten.maximum.default)
def maximum(cx, node, a):
    return _binary(cx, K.Maximum, a.self, a.other)


@converter(aten.minimum.default)
def minimum(cx, node, a):
    return _binary(cx, K.Minimum, a.self, a.other)


def _clamp(cx, x, lo, hi):
    dt = cx.out_dtype()
    y = cx.cast(cx.tensor(x), dt)
    blo, bhi = number(lo), number(hi)
    if dt.is_float and (lo is None or blo is not None) and (hi is None or bhi is not None):
        return cx.emit(K.Clamp, [y], {"min": -math.inf if lo is None else float(blo),
                                      "max": math.inf if hi is None else float(bhi)})
    if lo is not None:
        y = cx.emit(K.Maximum, [y, cx.operand(lo, dt)])
    if hi is not None:
        y = cx.emit(K.Minimum, [y, cx.operand(hi, dt)])
    return y


@converter(aten.clamp.default, aten.clamp.Tensor)
def clamp(cx, node, a):
    return _clamp(cx, a.self, a.min, a.max)


@converter(aten.clamp_min.default, aten.clamp_min.Tensor)
def clamp_min(cx, node, a):
    return _clamp(cx, a.self, a.min, None)


@converter(aten.clamp_max.default, aten.clamp_max.Tensor)
def clamp_max(cx, node, a):
    return _clamp(cx, a.self, None, a.max)


@converter(aten.hardtanh.default)
def hardtanh(cx, node, a):
    return _clamp(cx, a.self, a.min_val, a.max_val)


_UNARY = {
    aten.relu.default: K.ReLU,
    aten.silu.default: K.SiLU,
    aten.sigmoid.default: K.Sigmoid,
    aten.tanh.default: K.Tanh,
    aten.exp.default: K.Exp,
    aten.log.default: K.Log,
    aten.sqrt.default: K.Sqrt,
    aten.abs.default: K.Abs,
    aten.neg.default: K.Neg,
    aten.sin.default: K.Sin,
    aten.cos.default: K.Cos,
    aten.erf.default: K.Erf,
    aten.square.default: K.Square,
    aten.reciprocal.default: K.Reciprocal,
    aten.rsqrt.default: K.Rsqrt,
    aten.hardswish.default: K.HardSwish,
    aten.mish.default: K.Mish,
    aten.round.default: K.Round,
    aten.ceil.default: K.Ceil,
    aten.floor.default: K.Floor,
    aten.acos.default: K.Acos,
    aten.asin.default: K.Asin,
    aten.atan.default: K.Atan,
}
_IDENTITY_ON_INTEGERS = (K.Round, K.Ceil, K.Floor)


@converter(*_UNARY, keep=(aten.silu.default, aten.hardswish.default))
def unary(cx, node, a):
    x = _same(cx, a.self)
    kind = _UNARY[canonical(node.target)]
    if not x.dtype.is_float and kind in _IDENTITY_ON_INTEGERS:
        return x
    if not x.dtype.is_float and kind in (K.Neg, K.Abs, K.Square):
        # integers: 0 - x, max(x, 0 - x), x * x (dyngraph's unary ops are floating point)
        neg = cx.emit(K.Subtract, [cx.full(0, x.dtype), x])
        if kind is K.Neg:
            return neg
        return cx.emit(K.Maximum, [x, neg]) if kind is K.Abs else cx.emit(K.Multiply, [x, x])
    return cx.emit(kind, [x])


@converter(aten.gelu.default)
def gelu(cx, node, a):
    mode = "tanh" if a.approximate == "tanh" else "erf"
    return cx.emit(K.GELU, [_same(cx, a.self)], {"mode": mode})


@converter(aten.round.decimals)
def round_decimals(cx, node, a):
    if number(a.decimals) != 0:
        raise Unsupported(f"decimals={a.decimals}")
    return cx.emit(K.Round, [_same(cx, a.self)])


def _reciprocal(cx, x):
    return cx.emit(K.Reciprocal, [x])


@converter(aten.pow.Tensor_Scalar)
def pow_scalar(cx, node, a):
    e = number(a.exponent)
    if isinstance(cx.value(a.exponent), FloatScalar):
        return pow_tensor(cx, node, Args(self=a.self, exponent=a.exponent))
    if e is None or isinstance(e, bool):
        raise Unsupported("a non-numeric exponent")
    x = _same(cx, a.self)
    if e == 1:
        return x
    if not x.dtype.is_float:
        if not (isinstance(e, int) and 1 < e <= 4):
            raise Unsupported(f"integer power {e}")
        y = x
        for _ in range(e - 1):
            y = cx.emit(K.Multiply, [y, x])
        return y
    if e == 2:
        return cx.emit(K.Square, [x])
    if e == 3:
        return cx.emit(K.Multiply, [cx.emit(K.Square, [x]), x])
    if e == 4:
        return cx.emit(K.Square, [cx.emit(K.Square, [x])])
    if e == 0.5:
        return cx.emit(K.Sqrt, [x])
    if e == -0.5:
        return _reciprocal(cx, cx.emit(K.Sqrt, [x]))
    if e == -1:
        return _reciprocal(cx, x)
    if e == -2:
        return _reciprocal(cx, cx.emit(K.Square, [x]))
    return cx.emit(K.Pow, [x], {"beta": float(e)})


@converter(aten.pow.Tensor_Tensor, aten.pow.Scalar)
def pow_tensor(cx, node, a):
    """base ** exponent elementwise (powf; a number becomes a 0-d constant)."""
    dt = cx.out_dtype()
    if not dt.is_float:
        raise Unsupported(f"integer power ({dt})")
    return cx.emit(K.Pow, [cx.operand(a.self, dt), cx.operand(a.exponent, dt)])


@converter(aten.leaky_relu.default)
def leaky_relu(cx, node, a):
    slope = number(a.negative_slope)
    if slope is None or isinstance(slope, bool):
        raise Unsupported(f"negative_slope {a.negative_slope!r}")
    return cx.emit(K.LeakyReLU, [_same(cx, a.self)], {"alpha": float(slope)})


@converter(aten.hardsigmoid.default)
def hardsigmoid(cx, node, a):
    """relu6(x + 3) / 6 = max(0, min(1, x / 6 + 1 / 2))"""
    return cx.emit(K.HardSigmoid, [_same(cx, a.self)], {"alpha": 1.0 / 6.0, "beta": 0.5})


@converter(aten.elu.default)
def elu(cx, node, a):
    alpha, scale, input_scale = number(a.alpha), number(a.scale), number(a.input_scale)
    if alpha is None or alpha < 0 or scale != 1 or input_scale != 1:
        raise Unsupported(f"alpha={a.alpha}, scale={a.scale}, input_scale={a.input_scale}")
    return cx.emit(K.Elu, [_same(cx, a.self)], {"alpha": float(alpha)})


@converter(aten.softplus.default, keep=True)
def softplus(cx, node, a):
    """log(1 + exp(beta x)) / beta, x where beta x > threshold (as torch).
    Above a threshold of 16 the switch changes no f32 value (log1p(e^-16) / 16
    is below half an ulp) when beta is a power of two, so SoftPlus alone is
    torch's result."""
    beta, threshold = number(a.beta), number(a.threshold)
    if beta is None or threshold is None or beta == 0:
        raise Unsupported(f"beta={a.beta}, threshold={a.threshold}")
    x = _same(cx, a.self)
    sp = cx.emit(K.SoftPlus, [x], {"beta": float(beta)})
    if threshold >= 16 and beta > 0 and math.frexp(beta)[0] == 0.5:  # (a power of two scales exactly)
        return sp
    bx = x if beta == 1 else cx.emit(K.Multiply, [x, cx.full(beta, x.dtype)])
    big = cx.emit(K.Greater, [bx, cx.full(float(threshold), x.dtype)])
    return cx.emit(K.Select, [big, x, sp])


def _in_f32(cx, a):
    """The input as f32 (half types are computed in f32 and rounded once, as torch does)."""
    return cx.cast(_same(cx, a), DataType.f32)


@converter(aten.expm1.default)
def expm1(cx, node, a):
    """e^x - 1 without the cancellation of exp(x) - 1 near 0: there (|x| <
    0.5) 2t / (1 - t) with t = tanh(x / 2), a few ulps; elsewhere exp(x) - 1
    loses at most a factor 2.6 of exp's error (e^x / |e^x - 1| there)."""
    x = _in_f32(cx, a.self)
    f = lambda v: cx.full(v, DataType.f32)  # noqa: E731
    t = cx.emit(K.Tanh, [cx.emit(K.Multiply, [x, f(0.5)])])
    near = cx.emit(K.Divide, [cx.emit(K.Add, [t, t]), cx.emit(K.Subtract, [f(1.0), t])])
    far = cx.emit(K.Subtract, [cx.emit(K.Exp, [x]), f(1.0)])
    small = cx.emit(K.Less, [cx.emit(K.Abs, [x]), f(0.5)])
    return cx.cast(cx.emit(K.Select, [small, near, far]), cx.out_dtype())


@converter(aten.log1p.default)
def log1p(cx, node, a):
    """log(1 + x) accurate near 0: with u = 1 + x rounded, log(u) * x / (u - 1)
    (u - 1 is exact; x itself where u is 1), for |x| < 0.5; log(1 + x)
    elsewhere (an error of a few ulps there, and log's own results at -1,
    below it, at inf and NaN)."""
    x = _in_f32(cx, a.self)
    f = lambda v: cx.full(v, DataType.f32)  # noqa: E731
    u = cx.emit(K.Add, [x, f(1.0)])
    lu = cx.emit(K.Log, [u])
    um1 = cx.emit(K.Subtract, [u, f(1.0)])
    exact = cx.emit(K.Equal, [um1, f(0.0)])
    safe = cx.emit(K.Select, [exact, f(1.0), um1])
    near = cx.emit(K.Select, [exact, x, cx.emit(K.Multiply, [lu, cx.emit(K.Divide, [x, safe])])])
    small = cx.emit(K.Less, [cx.emit(K.Abs, [x]), f(0.5)])
    return cx.cast(cx.emit(K.Select, [small, near, lu]), cx.out_dtype())


@converter(aten.sign.default)
def sign(cx, node, a):
    x = _same(cx, a.self)
    dt = x.dtype
    zero = cx.full(0.0, dt)
    pos = cx.cast(cx.emit(K.Greater, [x, zero]), dt)
    neg = cx.cast(cx.emit(K.Less, [x, zero]), dt)
    return cx.emit(K.Subtract, [pos, neg])

