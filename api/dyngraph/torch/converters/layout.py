"""Ops that move data: views and reshapes, permutes, slices, cat, split,
roll, expand, copies and dtype casts.

Reshape-like ops (view, reshape, unsqueeze, squeeze, flatten) reshape to the
shape torch.export recorded for their result: its dimensions are the
program's size expressions, so the target is never a trace-time number.
"""

from __future__ import annotations

from ...dtypes import DataType
from ...logical_tensor import MAX_RANK
from ...op import OpKind as K
from ...ops.layout import TO_END
from ...symbolic import as_expr
from .common import aten, is_call, norm_dim, number, plain, through_identities
from .registry import Unsupported, converter


@converter(
    aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.view_copy.default,
    aten.unsqueeze.default, aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims,
    aten.flatten.using_ints, aten.unflatten.int,
)
def reshape(cx, node, a):
    repeated = _repeat_pattern(cx, node.args[0])
    if repeated is not None:
        return repeated
    moved = _unit_axis_pattern(cx, node.args[0])
    if moved is not None:
        return moved
    return cx.reshape(cx.tensor(node.args[0]), cx.out_shape())


def _unit_axis_pattern(cx, src):
    """``reshape(permute(unsqueeze(x, d), p))`` (nn.MultiheadAttention's packed
    projection: ``unflatten(-1, (3, E)).unsqueeze(0).transpose(0, -2).squeeze(-2)``):
    a unit axis moves nothing in memory, so this is x transposed by p without
    the new axis, then reshaped. The rank-5 intermediate never exists."""
    e = through_identities(src)
    if not is_call(e, aten.permute.default, aten.permute_copy.default, aten.transpose.int):
        return None
    u = through_identities(e.args[0])
    if not is_call(u, aten.unsqueeze.default) or not cx.is_tensor(u.args[0]):
        return None
    k = len(cx.shape_of(u.args[0]))
    d = norm_dim(u.args[1], k + 1)
    perm = list(e.args[1]) if e.target is not aten.transpose.int else _swapped(k + 1, *e.args[1:3])
    order = [a if a < d else a - 1 for a in (norm_dim(a, k + 1) for a in perm) if a != d]
    return cx.reshape(cx.transpose(cx.tensor(u.args[0]), order), cx.out_shape())


def _swapped(rank: int, d0: int, d1: int) -> list:
    """The permutation of ``transpose(d0, d1)`` (the op as exported, before decomposition)."""
    order = list(range(rank))
    a, b = norm_dim(d0, rank), norm_dim(d1, rank)
    order[a], order[b] = order[b], order[a]
    return order


def _repeat_pattern(cx, src):
    """``reshape(expand(unsqueeze(x, d)))`` that repeats x along a new axis d
    and merges that axis with a neighbour (transformers' ``repeat_kv``): the
    rank-5 intermediate never exists; the copies are a Concat.

    Merged with axis d - 1, each slice of x is repeated in place
    (``repeat_interleave``); merged with axis d + 1, x is tiled."""
    e = through_identities(src)
    if not is_call(e, aten.expand.default, aten.expand_copy.default):
        return None
    u = through_identities(e.args[0])
    if not is_call(u, aten.unsqueeze.default) or not cx.is_tensor(u.args[0]):
        return None
    x_shape = [as_expr(d) for d in cx.shape_of(u.args[0])]
    k = len(x_shape)
    d = norm_dim(u.args[1], k + 1)
    big = [as_expr(v) for v in cx.shape_of(e)]
    r = big[d]
    if not r.is_const or big[:d] + big[d + 1:] != x_shape:
        return None
    out = [as_expr(v) for v in cx.out_shape()]
    x = cx.tensor(u.args[0])
    reps = r.value
    if d > 0 and out == x_shape[:d - 1] + [x_shape[d - 1] * reps] + x_shape[d:]:
        inner = as_expr(1)
        for v in x_shape[d:]:
            inner = inner * v
        xs = cx.reshape(x, tuple(plain(v) for v in x_shape[:d]) + (1, plain(inner)))
        y = cx.emit(K.Concat, [xs] * reps, {"axis": d}) if reps > 1 else xs
        return cx.reshape(y, cx.out_shape())
    if d < k and out == x_shape[:d] + [x_shape[d] * reps] + x_shape[d + 1:]:
        return cx.emit(K.Concat, [x] * reps, {"axis": d}) if reps > 1 else x
    return None


@converter(aten.permute.default, aten.permute_copy.default)
def permute(cx, node, a):
    rank = cx.rank_of(a.self)
    return cx.transpose(cx.tensor(a.self), [norm_dim(d, rank) for d in a.dims])


@converter(aten.transpose.int)
def transpose(cx, node, a):
    rank = cx.rank_of(a.self)
    order = list(range(rank))
    d0, d1 = norm_dim(a.dim0, rank), norm_dim(a.dim1, rank)
    order[d0], order[d1] = order[d1], order[d0]
    return cx.transpose(cx.tensor(a.self), order)


@converter(aten.t.default)
def t(cx, node, a):
    rank = cx.rank_of(a.self)
    return cx.transpose(cx.tensor(a.self), [1, 0] if rank == 2 else list(range(rank)))


@converter(aten.clone.default, aten.contiguous.default, aten.alias.default, aten.detach.default,
           aten.lift_fresh_copy.default, aten.alias_copy.default, aten.detach_copy.default)
def identity(cx, node, a):
    return cx.tensor(a.self)


@converter(aten.dropout.default)
def dropout(cx, node, a):
    """Dropout of a program exported in eval mode (as exported, before decomposition): the input."""
    if a.train and number(a.p) != 0:
        raise Unsupported(f"dropout in training mode (p={a.p})")
    return cx.tensor(a.input)


@converter(aten._to_copy.default, aten.to.dtype, aten.to.dtype_layout, aten.to.device, aten.type_as.default)
def to_copy(cx, node, a):
    return cx.cast(cx.tensor(a.self), cx.out_dtype())


def _slice_bound(cx, v, default):
    if v is None:
        return default
    v = cx.size(v)
    if isinstance(v, int) and v >= TO_END:
        return TO_END
    return v


def _is_whole(cx, start, end, step, dim_size) -> bool:
    if step != 1:
        return False
    if not (isinstance(start, int) and start == 0):
        return False
    if isinstance(end, int) and end >= TO_END:
        return True
    return as_expr(end) == as_expr(dim_size) or (
        isinstance(dim_size, int) and isinstance(end, int) and end >= dim_size
    ) or as_expr(dim_size).provably_le(end)


@converter(aten.slice.Tensor, aten.slice_copy.Tensor)
def slice_(cx, node, a):
    return slice_of(cx, a, cx.tensor(a.self))


def slice_of(cx, a, x):
    """``x`` sliced as ``aten.slice`` slices ``a.self`` (x may hold more
    axes after torch's: a complex tensor's parts)."""
    d = norm_dim(a.dim, cx.rank_of(a.self))
    start, end = _slice_bound(cx, a.start, 0), _slice_bound(cx, a.end, TO_END)
    step = cx.size(a.step)
    if not isinstance(step, int):
        raise Unsupported("a symbolic step")
    if _is_whole(cx, start, end, step, cx.shape_of(a.self)[d]):
        return x
    return cx.emit(K.Slice, [x], {"begin": [start], "end": [end], "axes": [d], "steps": [step]})


@converter(aten.narrow.default)
def narrow(cx, node, a):
    rank = cx.rank_of(a.self)
    d = norm_dim(a.dim, rank)
    start, length = cx.size(a.start), cx.size(a.length)
    if isinstance(start, int) and start < 0:  # from the end, like select
        start = as_expr(cx.shape_of(a.self)[d]) + start
    start = as_expr(start)
    return cx.emit(K.Slice, [cx.tensor(a.self)], {"begin": [plain(start)], "end": [plain(start + length)], "axes": [d]})


@converter(aten.select.int, aten.select_copy.int)
def select(cx, node, a):
    return cx.reshape(selected(cx, a, cx.tensor(a.self)), cx.out_shape())


def selected(cx, a, x):
    """The slice of ``x`` at ``aten.select``'s index, its axis kept."""
    d = norm_dim(a.dim, cx.rank_of(a.self))
    i = cx.size(a.index)
    if isinstance(i, int) and i < 0:
        size = cx.shape_of(a.self)[d]
        i = as_expr(size) + i
        i = i.value if i.is_const else i
    return cx.emit(K.Slice, [x], {"begin": [i], "end": [as_expr(i) + 1], "axes": [d]})


@converter(aten.cat.default, aten.concat.default)
def cat(cx, node, a):
    dt = cx.out_dtype()
    parts = []
    for t in a.tensors:
        shape = cx.shape_of(t)
        if any(isinstance(s, int) and s == 0 for s in shape):
            continue  # torch skips empty inputs
        parts.append(cx.cast(cx.tensor(t), dt))
    if not parts:
        raise Unsupported("every input is empty")
    if len(parts) == 1:
        return parts[0]
    rank = cx.out.dim()
    return cx.emit(K.Concat, parts, {"axis": norm_dim(a.dim, rank)})


def _roll_axis(cx, x, d, shift, n):
    """``x`` rolled by ``shift`` along axis ``d`` of size ``n``: out[i] = x[(i - shift) mod n].
    Known sizes: the last entries moved to the front (two slices, a concatenation); else a
    Gather at arange(n) + n - shift % n, less n past the end (no slice that may be empty)."""
    n, s = as_expr(n), as_expr(shift) % as_expr(n)
    if s.is_const and s.value == 0:
        return x
    if n.is_const and s.is_const:
        cut = n.value - s.value
        head = cx.emit(K.Slice, [x], {"begin": [cut], "end": [n.value], "axes": [d]})
        tail = cx.emit(K.Slice, [x], {"begin": [0], "end": [cut], "axes": [d]})
        return cx.emit(K.Concat, [head, tail], {"axis": d})
    i64 = DataType.i64
    idx = cx.emit(K.Add, [cx.emit(K.Arange, [], {"start": 0, "end": plain(n), "step": 1}, dtype=i64),
                          cx.full(plain(n - s), i64)])
    past = cx.emit(K.GreaterEqual, [idx, cx.full(plain(n), i64)])
    idx = cx.emit(K.Select, [past, cx.emit(K.Subtract, [idx, cx.full(plain(n), i64)]), idx])
    return cx.emit(K.Gather, [x, idx], {"axis": d})


@converter(aten.roll.default)
def roll(cx, node, a):
    x, shape = cx.tensor(a.self), cx.shape_of(a.self)
    shifts, dims = [cx.size(v) for v in a.shifts], list(a.dims)
    if not dims:  # the flattened tensor rolled, then its shape again
        if len(shifts) != 1:
            raise Unsupported(f"{len(shifts)} shifts without dims")
        total = as_expr(1)
        for d in shape:
            total = total * as_expr(d)
        y = _roll_axis(cx, cx.reshape(x, (plain(total),)), 0, shifts[0], total)
        return cx.reshape(y, cx.out_shape())
    if len(shifts) != len(dims):
        raise Unsupported(f"{len(shifts)} shifts for {len(dims)} dims")
    for shift, d in zip(shifts, dims):
        d = norm_dim(d, len(shape))
        x = _roll_axis(cx, x, d, shift, shape[d])
    return x


def _split(cx, x, d, sizes):
    outs, start = [], as_expr(0)
    for s in sizes:
        end = start + s
        st = start.value if start.is_const else start
        en = end.value if end.is_const else end
        if len(sizes) == 1:
            outs.append(x)
        else:
            outs.append(cx.emit(K.Slice, [x], {"begin": [st], "end": [en], "axes": [d]}))
        start = end
    return tuple(outs)


@converter(aten.split.Tensor, aten.split_with_sizes.default, aten.split_copy.Tensor, aten.split_with_sizes_copy.default)
def split(cx, node, a):
    rank = cx.rank_of(a.self)
    d = norm_dim(a.dim, rank)
    sizes = [cx.sym.dim_or_int(o.shape[d]) for o in cx.out]
    return _split(cx, cx.tensor(a.self), d, sizes)


@converter(aten.chunk.default)
def chunk(cx, node, a):
    rank = cx.rank_of(a.self)
    d = norm_dim(a.dim, rank)
    sizes = [cx.sym.dim_or_int(o.shape[d]) for o in cx.out]
    return _split(cx, cx.tensor(a.self), d, sizes)


@converter(aten.unbind.int)
def unbind(cx, node, a):
    rank = cx.rank_of(a.self)
    d = norm_dim(a.dim, rank)
    n = cx.shape_of(a.self)[d]
    if not isinstance(n, int):
        raise Unsupported("unbind along a dynamic dimension")
    x = cx.tensor(a.self)
    outs = []
    for i, o in enumerate(cx.out):
        y = cx.emit(K.Slice, [x], {"begin": [i], "end": [i + 1], "axes": [d]}) if n > 1 else x
        outs.append(cx.reshape(y, cx.sym.shape(o)))
    return tuple(outs)


@converter(aten.expand.default, aten.expand_copy.default, aten.broadcast_to.default, aten.expand_as.default)
def expand(cx, node, a):
    """Broadcast to the result's shape: nothing when the shape does not change,
    else the input plus a zero (or false) of the result's shape."""
    x = cx.tensor(node.args[0])
    want = cx.out_shape()
    have = cx.type(x).shape
    if len(have) == len(want) and all(as_expr(h) == as_expr(w) for h, w in zip(have, want)):
        return x
    if cx.supports(K.Expand):
        return cx.emit(K.Expand, [x], {"shape": list(want)})
    if x.dtype is DataType.boolean:
        return cx.emit(K.LogicalOr, [x, cx.full(0, x.dtype, want)])
    return cx.emit(K.Add, [x, cx.full(0, x.dtype, want)])


@converter(aten.repeat.default)
def repeat(cx, node, a):
    """x.repeat(r0, r1, ...) (counts may be sizes of the program): each
    repeated axis gets a new axis of its count in front of it, the input is
    broadcast over those (Expand) and the pairs are merged (a reshape)."""
    x = cx.tensor(a.self)
    reps = [cx.size(r) for r in a.repeats]
    shape = [1] * (len(reps) - cx.rank_of(a.self)) + list(cx.shape_of(a.self))
    src, target = [], []
    for r, d in zip(reps, shape):
        if not (isinstance(r, int) and r == 1):
            src.append(1)
            target.append(r)
        src.append(d)
        target.append(d)
    if len(target) == len(shape):
        return cx.reshape(x, cx.out_shape())
    if len(target) > MAX_RANK:
        if not all(isinstance(r, int) for r in reps):
            raise Unsupported(f"repeats {reps} of a rank-{len(shape)} tensor need rank {len(target)}")
        x = cx.reshape(x, shape)
        for d, r in enumerate(reps):
            if r > 1:
                x = cx.emit(K.Concat, [x] * r, {"axis": d})
        return x
    y = cx.emit(K.Expand, [cx.reshape(x, src)], {"shape": target})
    return cx.reshape(y, cx.out_shape())
