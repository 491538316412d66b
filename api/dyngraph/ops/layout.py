"""Shape rules of ops that move data without computing: reshape, transpose,
concat, slice and type cast."""

from __future__ import annotations

from collections import Counter

from ..op import OpKind as K
from ..symbolic import Expr, as_expr, format_shape, sym_max, sym_min, sym_sum
from .common import exact_quotient, normalize_axis, numel
from .registry import ALL_INPUTS, AttrSpec, TensorType, register

# Slice bounds at or above this mean "to the end" (like INT64_MAX in ONNX / torch).
TO_END = 2**62


def reshape_target(src: TensorType, target, special_zero: bool, ctx) -> tuple:
    """Resolve a reshape target (ints / expressions, at most one -1, 0 copies
    the input dimension when special_zero) against the source shape."""
    dims = []
    infer_at = None
    for i, t in enumerate(target):
        e = as_expr(t)
        if e.is_const and e.value == -1:
            if infer_at is not None:
                raise ctx.error(f"shape {list(target)} has more than one -1")
            infer_at = i
            dims.append(None)
        elif e.is_const and e.value == 0 and special_zero:
            if i >= src.rank:
                raise ctx.error(f"shape {list(target)}: 0 at position {i} copies an input dimension the input (rank {src.rank}) does not have")
            dims.append(src.shape[i])
        elif e.is_const and e.value < (0 if special_zero else 1):
            raise ctx.error(f"shape {list(target)}: invalid dimension {e.value} at position {i}")
        else:
            dims.append(e)
    total = numel(src.shape)
    known = numel([d for d in dims if d is not None])
    if infer_at is not None:
        # [seq, 6] -> [seq, -1] is [seq, 6]: divide symbolically when the
        # known dimensions divide the element count as polynomials; otherwise
        # the quotient is an expression and divisibility a runtime check.
        q = exact_quotient(total, known)
        if q is None:
            q = total // known
            rem = total % known
            if rem != Expr.const(0):
                ctx.equal(rem, 0, f"the input's {total} elements divide into the known dimensions {known}")
        dims[infer_at] = q
    else:
        ctx.equal(known, total, f"reshape of {format_shape(src.shape)} to {format_shape(dims)} keeps the element count")
    return tuple(dims)


@register(K.StaticReshape, attrs={"shape": AttrSpec("exprs"), "special_zero": AttrSpec("bool", False)}, out_dtype_of=0,
          high_rank="lowering")
def static_reshape(attrs, ins, ctx):
    """Reshape to `shape`: ints or dimension expressions, one -1 inferred, 0 copies when special_zero."""
    return [TensorType(ins[0].dtype, reshape_target(ins[0], attrs["shape"], attrs["special_zero"], ctx))]


def permutation(order, rank: int, ctx) -> tuple:
    if len(order) == 0:
        return tuple(reversed(range(rank)))
    if len(order) != rank:
        raise ctx.error(f"order {list(order)} has {len(order)} axes, the input has rank {rank}")
    perm = tuple(normalize_axis(a, rank, ctx, "order axis") for a in order)
    if len(set(perm)) != rank:
        raise ctx.error(f"order {list(order)} repeats an axis")
    return perm


@register(K.StaticTranspose, attrs={"order": AttrSpec("ints", perm_of=0)}, out_dtype_of=0, high_rank="lowering")
def static_transpose(attrs, ins, ctx):
    """out.shape[i] = in.shape[order[i]]; negative axes count from the end, empty order reverses."""
    x = ins[0]
    perm = permutation(attrs["order"], x.rank, ctx)
    return [TensorType(x.dtype, tuple(x.shape[p] for p in perm))]


@register(K.Concat, inputs=(1, -1), attrs={"axis": AttrSpec("int", axis_of=0)}, same_dtypes=ALL_INPUTS, out_dtype_of=0,
          high_rank="lowering")
def concat(attrs, ins, ctx):
    """Join inputs along `axis`; every other dimension must match."""
    dt = ins[0].dtype
    rank = ins[0].rank
    axis = normalize_axis(attrs["axis"], rank, ctx)
    shape = list(ins[0].shape)
    # each distinct input once (a program may repeat one thousands of times), in order of first use
    uses = Counter(map(id, ins))
    distinct = {id(t): t for t in ins}
    for t in distinct.values():
        if len(t.shape) != rank or any(d != axis and e is not shape[d] for d, e in enumerate(t.shape)):
            i = next(i for i, x in enumerate(ins) if x is t)
            if t.rank != rank:
                raise ctx.error(f"input {i} has rank {t.rank}, input 0 has rank {rank}")
            for d, e in enumerate(t.shape):
                if d != axis:
                    shape[d] = ctx.equal(shape[d], e, f"input {i} dimension {d}")
    shape[axis] = sym_sum(t.shape[axis] * uses[k] for k, t in distinct.items())
    return [TensorType(dt, tuple(shape))]


def _clamp(v: Expr, dim: Expr) -> Expr:
    """Resolve a slice bound like Python: a negative bound counts from the
    end, then the result is clamped to [0, dim]. A symbolic bound may be
    negative for some values of its symbols and not for others (``seq - 4``):
    the sign test is then part of the expression."""
    if v.is_const and v.value >= TO_END:
        return dim
    lo, hi = v.bounds()
    if hi < 0:  # always negative (-3, -seq): from the end, so at most dim
        # (a dimension is at least 1, whatever its expression's own bounds: x[..., -1:] is one element)
        if lo > -(1 << 62) and max(dim.bounds()[0], 1) + lo >= 0:
            return dim + v
        v = dim + v
        return v if v.bounds()[0] >= 0 else sym_max(v, 0)
    if lo < 0:  # either sign: v // (|v| + 1) is -1 when v < 0 and 0 when v >= 0
        v = v - (v // (sym_max(v, -v) + 1)) * dim
    if v.bounds()[0] < 0:
        v = sym_max(v, 0)
    return v if v.provably_le(dim) else sym_min(v, dim)


@register(
    K.Slice,
    attrs={
        "begin": AttrSpec("exprs"),
        "end": AttrSpec("exprs"),
        "axes": AttrSpec("ints", (), axes_of=0),
        "steps": AttrSpec("ints", (), min=1),
    },
    resolved={"starts": AttrSpec("exprs", rank_of=0), "strides": AttrSpec("ints", rank_of=0, min=1)},
    out_dtype_of=0,
    high_rank="lowering",
)
def slice_(attrs, ins, ctx):
    """x[begin:end:step] along `axes` (default: the first len(begin) axes).
    Bounds are clamped to the dimension; negative ones count from the end."""
    x = ins[0]
    begin, end = attrs["begin"], attrs["end"]
    axes = attrs["axes"] or tuple(range(len(begin)))
    steps = attrs["steps"] or (1,) * len(axes)
    if not (len(begin) == len(end) == len(axes) == len(steps)):
        raise ctx.error("begin, end, axes and steps must have the same length")
    shape = list(x.shape)
    seen = set()
    starts = [Expr.const(0)] * x.rank
    strides = [1] * x.rank
    for b, e, a, s in zip(begin, end, axes, steps):
        a = normalize_axis(a, x.rank, ctx)
        if a in seen:
            raise ctx.error(f"axis {a} is sliced twice")
        seen.add(a)
        if s < 1:
            raise ctx.error(f"step {s} on axis {a} must be positive")
        lo, hi = _clamp(as_expr(b), x.shape[a]), _clamp(as_expr(e), x.shape[a])
        n = (hi - lo + (s - 1)) // s
        if n.bounds()[1] < 1:
            raise ctx.error(f"axis {a}: slice [{b}:{e}:{s}] of a dimension of {x.shape[a]} is empty")
        shape[a] = n
        starts[a], strides[a] = lo, s
    # the backend gets, per input axis, the resolved (clamped) start and the step
    ctx.backend_attrs.update(starts=tuple(starts), strides=tuple(strides))
    return [TensorType(x.dtype, tuple(shape))]


@register(K.TypeCast, high_rank="elementwise", dtypes=("any_or_f8",), out_dtypes=("any_or_f8",))
def type_cast(attrs, ins, ctx):
    """Convert to the dtype declared on the output logical tensor. An f8
    type converts to and from the floating-point types (and the other f8):
    rounded to nearest even, without saturation, as Quantize with scale 1."""
    if not ctx.declared_outputs or ctx.declared_outputs[0] is None:
        raise ctx.error("TypeCast takes its target dtype from its output logical tensor")
    src, dst = ins[0].dtype, ctx.declared_outputs[0].dtype
    if (src.is_f8 or dst.is_f8) and not ((src.is_f8 or src.is_float) and (dst.is_f8 or dst.is_float)):
        raise ctx.dtype_error(f"{src} -> {dst}: an f8 type converts only to and from f32, f16, bf16 and f8")
    return [TensorType(dst, ins[0].shape)]

