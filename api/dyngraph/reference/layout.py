"""StaticReshape, StaticTranspose, Concat, Slice and TypeCast."""

from __future__ import annotations

import numpy as np

from ..op import OpKind as K
from ..ops.layout import TO_END
from .registry import implements


def resolve_reshape(src_shape, target, special_zero: bool):
    dims = [src_shape[i] if t == 0 and special_zero else t for i, t in enumerate(target)]
    if -1 in dims:
        known = int(np.prod([d for d in dims if d != -1], dtype=np.int64))
        dims[dims.index(-1)] = int(np.prod(src_shape, dtype=np.int64)) // max(known, 1)
    return dims


@implements(K.StaticReshape)
def static_reshape(attrs, ins, ctx):
    x = ins[0]
    target = [ctx.value(t) for t in attrs["shape"]]
    return [x.reshape(resolve_reshape(x.shape, target, attrs["special_zero"]))]


@implements(K.StaticTranspose)
def static_transpose(attrs, ins, ctx):
    x = ins[0]
    order = attrs["order"]
    perm = [a % x.ndim for a in order] if order else list(reversed(range(x.ndim)))
    return [np.transpose(x, perm)]


@implements(K.Concat)
def concat(attrs, ins, ctx):
    return [np.concatenate(ins, axis=attrs["axis"])]


def _bound(v: int, n: int) -> int:
    if v >= TO_END:
        return n
    if v < 0:
        v += n
    return min(max(v, 0), n)


@implements(K.Slice)
def slice_(attrs, ins, ctx):
    x = ins[0]
    begin = [ctx.value(b) for b in attrs["begin"]]
    end = [ctx.value(e) for e in attrs["end"]]
    axes = attrs["axes"] or tuple(range(len(begin)))
    steps = attrs["steps"] or (1,) * len(axes)
    index = [slice(None)] * x.ndim
    for b, e, a, s in zip(begin, end, axes, steps):
        a %= x.ndim
        index[a] = slice(_bound(b, x.shape[a]), _bound(e, x.shape[a]), s)
    return [x[tuple(index)]]


@implements(K.TypeCast)
def type_cast(attrs, ins, ctx):
    return [ins[0]]  # the interpreter rounds to the output's dtype (floats to integers toward zero)
