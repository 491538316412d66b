"""Reading and writing by index: embedding, index_select, advanced indexing
(``x[i, j]``), gather, the writes a KV cache makes (index_copy, index_put,
slice_scatter, copy) and scatter / scatter_add / scatter_reduce.

Advanced indexing and gather become one Gather on the flattened table, at
the flat index ``i * stride + j`` (negative indices wrap as in torch unless
the index is known to be non-negative, e.g. an arange). The writes become
ScatterRows (rows of the second-to-last axis) or CopyToSlice; on a buffer
held as STATE they update it in place. A scatter along a dimension is a
ScatterND of one whole coordinate tuple per element of its index.
"""

from __future__ import annotations

from ...dtypes import DataType
from ...logical_tensor import CONSTANT, LogicalTensor
from ...op import OpKind as K
from ...symbolic import as_expr
from .common import aten, non_negative, norm_dim, number
from .registry import Unsupported, converter

I64 = DataType.i64


def _index(cx, arg):
    m = cx.meta(arg)
    if m.dtype.is_floating_point or m.dtype.is_complex:
        raise Unsupported(f"index of dtype {m.dtype}")
    if str(m.dtype) in ("torch.bool", "torch.uint8"):
        raise Unsupported("boolean mask indexing (its size depends on the data)")
    return cx.tensor(arg)


def _wrapped(cx, arg, size):
    """An index tensor with negative entries counted from the end of ``size``."""
    i = cx.cast(_index(cx, arg), I64)
    if non_negative(arg):
        return i
    neg = cx.emit(K.Less, [i, cx.full(0, I64)])
    return cx.emit(K.Select, [neg, cx.emit(K.Add, [i, cx.full(size, I64)]), i])


def _scaled(cx, i, stride):
    s = as_expr(stride)
    if s.is_const and s.value == 1:
        return i
    return cx.emit(K.Multiply, [i, cx.full(s.value if s.is_const else s, I64)])


def _numel(shape):
    n = as_expr(1)
    for d in shape:
        n = n * d
    return n.value if n.is_const else n


@converter(aten.embedding.default)
def embedding(cx, node, a):
    return cx.emit(K.Gather, [cx.tensor(a.weight), _index(cx, a.indices)], {"axis": 0})


@converter(aten.index_select.default)
def index_select(cx, node, a):
    rank = cx.rank_of(a.self)
    d = norm_dim(a.dim, rank)
    size = cx.shape_of(a.self)[d]
    y = cx.emit(K.Gather, [cx.tensor(a.self), _wrapped(cx, a.index, size)], {"axis": d})
    return cx.reshape(y, cx.out_shape())


@converter(aten.index.Tensor)
def index(cx, node, a):
    """x[..., i0, i1, ...] with adjacent index tensors (broadcast together)."""
    idx = list(a.indices)
    pos = [k for k, t in enumerate(idx) if t is not None]
    if not pos:
        return cx.tensor(a.self)
    if pos != list(range(pos[0], pos[-1] + 1)):
        raise Unsupported("index tensors that are not adjacent")
    xs = cx.shape_of(a.self)
    d0, m = pos[0], len(pos)
    if m == 1:
        sliced = _constant_range(cx, idx[d0], xs[d0], d0, cx.tensor(a.self))
        if sliced is not None:
            return cx.reshape(sliced, cx.out_shape())
    flat, stride = None, as_expr(1)
    for k in reversed(range(m)):
        size = xs[d0 + k]
        term = _scaled(cx, _wrapped(cx, idx[d0 + k], size), stride)
        flat = term if flat is None else cx.emit(K.Add, [term, flat])
        stride = stride * size
    x = cx.tensor(a.self)
    if m > 1:
        x = cx.reshape(x, tuple(xs[:d0]) + (_numel(xs[d0:d0 + m]),) + tuple(xs[d0 + m:]))
    y = cx.emit(K.Gather, [x, flat], {"axis": d0})
    return cx.reshape(y, cx.out_shape())


def _constant_range(cx, arg, size, axis, x):
    """x indexed along ``axis`` by a constant 1-D index whose values step
    evenly upward (``qkv[:, :, :, [-2]]``, ``x[:, [0, 2, 4]]``): a Slice,
    which any rank takes (a Gather takes rank 4 at most). None otherwise."""
    v = cx.value(arg)
    data = cx.data.get(v.id) if isinstance(v, LogicalTensor) and v.property is CONSTANT else None
    if data is None or data.ndim != 1 or data.size == 0:
        return None
    vals = [int(t) for t in data]
    if any(t < 0 for t in vals):
        if not isinstance(size, int):
            return None
        vals = [t + size if t < 0 else t for t in vals]
    step = vals[1] - vals[0] if len(vals) > 1 else 1
    if step < 1 or any(b - a != step for a, b in zip(vals, vals[1:])) or vals[0] < 0:
        return None
    if isinstance(size, int) and vals[-1] >= size:
        return None  # (out of range: torch raises; leave it to the Gather's check)
    return cx.emit(K.Slice, [x], {"begin": [vals[0]], "end": [vals[-1] + 1], "axes": [axis], "steps": [step]})


@converter(aten.gather.default)
def gather(cx, node, a):
    """out[i][j][k] = x[i][index[i][j][k]][k] (for dim 1): a Gather of the
    flattened x at i * stride0 + index * stride1 + k."""
    rank = cx.rank_of(a.self)
    d = norm_dim(a.dim, rank)
    xs = cx.shape_of(a.self)
    index = _index(cx, a.index)
    flat, stride = None, as_expr(1)
    for k in reversed(range(rank)):
        if k == d:
            term = _wrapped(cx, a.index, xs[k])
        elif as_expr(xs[k]) == 1:
            term = None  # the only index along this axis is 0
        else:
            term = cx.emit(K.GenIndex, [index], {"axis": k}, dtype=I64)
        if term is not None:
            term = _scaled(cx, term, stride)
            flat = term if flat is None else cx.emit(K.Add, [term, flat])
        stride = stride * xs[k]
    table = cx.reshape(cx.tensor(a.self), (_numel(xs),))
    y = cx.emit(K.Gather, [table, flat], {"axis": 0})
    return cx.reshape(y, cx.out_shape())


@converter(aten.index_copy.default, keep=True)
def index_copy(cx, node, a):
    """x.index_copy(dim, index, src) along the second-to-last axis: ScatterRows."""
    rank = cx.rank_of(a.self)
    d = norm_dim(a.dim, rank)
    if rank < 2 or d != rank - 2:
        raise Unsupported(f"index_copy along dimension {d} of a rank-{rank} tensor (only the second-to-last)")
    x = cx.tensor(a.self)
    src = cx.cast(cx.tensor(a.source), x.dtype)
    return cx.emit(K.ScatterRows, [x, _index(cx, a.index), src])


@converter(aten.index_put.default)
def index_put(cx, node, a):
    """x[idx...] = v (or += v with accumulate): ScatterRows for one 1-D index on
    the second-to-last axis of a float tensor (in place on a STATE buffer),
    else ScatterND with index tensors of one shape on the leading axes."""
    rank = cx.rank_of(a.self)
    idx = list(a.indices)
    pos = [k for k, t in enumerate(idx) if t is not None]
    if not a.accumulate and rank >= 2 and pos == [rank - 2] and cx.rank_of(idx[rank - 2]) == 1 \
            and cx.meta(a.self).dtype.is_floating_point:
        vs = cx.shape_of(a.values)
        want = list(cx.shape_of(a.self))
        want[rank - 2] = cx.shape_of(idx[rank - 2])[0]
        if len(vs) == rank and all(as_expr(p) == as_expr(q) for p, q in zip(vs, want)):
            x = cx.tensor(a.self)
            src = cx.cast(cx.tensor(a.values), x.dtype)
            return cx.emit(K.ScatterRows, [x, _wrapped(cx, idx[rank - 2], cx.shape_of(a.self)[rank - 2]), src])
    return _scatter_nd(cx, a, idx, pos, rank)


def _scatter_nd(cx, a, idx, pos, rank):
    m = len(pos)
    if not pos or pos != list(range(m)):
        raise Unsupported("index_put with index tensors other than on the leading axes")
    shapes = [tuple(as_expr(d) for d in cx.shape_of(idx[k])) for k in pos]
    if any(s != shapes[0] for s in shapes):
        raise Unsupported(f"index tensors of different shapes {[list(s) for s in shapes]}")
    b = shapes[0]
    want = b + tuple(as_expr(d) for d in cx.shape_of(a.self)[m:])
    vs = tuple(as_expr(d) for d in cx.shape_of(a.values))
    differ = [k for k, (p, q) in enumerate(zip(vs, want)) if p != q]
    if len(vs) != len(want) or len(differ) > 1 or any(vs[k].is_const or want[k].is_const for k in differ):
        raise Unsupported(f"values of shape {list(vs)} for updates of shape {list(want)}")
    comps = [cx.reshape(cx.cast(_index(cx, idx[k]), I64), b + (1,)) for k in pos]
    tuples = comps[0] if m == 1 else cx.emit(K.Concat, comps, {"axis": len(b)})
    x = cx.tensor(a.self)
    # one size written two ways (four sizes from tensor data torch asserts sum to 2*seq): a reshape
    # to the updates' shape, whose element count the partition checks at every call
    src = cx.reshape(cx.cast(cx.tensor(a.values), x.dtype), want)
    return cx.emit(K.ScatterND, [x, tuples, src], {"reduction": "add" if a.accumulate else "none"})


_SCATTER_DTYPES = (DataType.f32, DataType.i32, DataType.i64)
# dtypes whose every value an f32 holds exactly: a scatter that only copies values runs on them in f32
_EXACT_IN_F32 = (DataType.f16, DataType.bf16, DataType.boolean)
_SCATTER_REDUCE = {"sum": "add", "prod": "mul", "amax": "max", "amin": "min"}
_INCLUDE_SELF_IDENTITY = {"add": 0.0, "mul": 1.0}


def _scatter(cx, a, updates, reduction="none", include_self=True):
    """self.scatter(dim, index, src) and its reductions: out[i][index[i][j][k]][k]
    = src[i][j][k] (for dim 1), one ScatterND update per element of index at
    the tuple (i, index[i][j][k], k); ``updates`` is src, or a number. Where
    indices repeat, "none" keeps the last in row-major order (torch leaves it
    unspecified). An index outside [-size, size) is an error at execution
    (ScatterND's check; torch also refuses the negative ones)."""
    rank = cx.rank_of(a.self)
    if rank == 0 or cx.rank_of(a.index) != rank:
        raise Unsupported(f"scatter of a rank-{rank} tensor with a rank-{cx.rank_of(a.index)} index")
    x = cx.tensor(a.self)
    dt = x.dtype
    if dt not in _SCATTER_DTYPES:
        if reduction != "none" or dt not in _EXACT_IN_F32:
            raise Unsupported(f"scatter ({reduction}) of {dt}")
        y = _scatter_as(cx, cx.cast(x, DataType.f32), a, updates, DataType.f32, reduction, include_self)
        return cx.cast(y, dt)
    return _scatter_as(cx, x, a, updates, dt, reduction, include_self)


def _scatter_as(cx, x, a, updates, dt, reduction, include_self):
    rank = cx.rank_of(a.self)
    d = norm_dim(a.dim, rank)
    index = _index(cx, a.index)
    ids = cx.shape_of(a.index)
    comps = []
    for k in range(rank):
        c = cx.cast(index, I64) if k == d else cx.emit(K.GenIndex, [index], {"axis": k}, dtype=I64)
        comps.append(cx.reshape(c, tuple(ids) + (1,)))
    tuples = cx.emit(K.Concat, comps, {"axis": rank})
    if isinstance(updates, (int, float)):
        src = cx.full(float(updates), dt, ids)
    else:
        src = cx.cast(cx.tensor(updates), dt)
        ss = cx.shape_of(updates)
        cut = [k for k in range(rank) if as_expr(ss[k]) != as_expr(ids[k])]
        if cut:  # src may be larger than index: its leading corner is read
            src = cx.emit(K.Slice, [src], {"begin": [0] * len(cut), "end": [ids[k] for k in cut], "axes": cut})
    if not include_self:  # the written positions start from the reduction's identity (or any src value)
        first = _INCLUDE_SELF_IDENTITY.get(reduction)
        first = src if first is None else cx.full(first, dt, ids)
        x = cx.emit(K.ScatterND, [x, tuples, first], {"reduction": "none"})
    return cx.emit(K.ScatterND, [x, tuples, src], {"reduction": reduction})


@converter(aten.scatter.src, aten.scatter.value)
def scatter(cx, node, a):
    if node.target is aten.scatter.src:
        return _scatter(cx, a, a.src)
    v = number(a.value)
    if v is None:
        raise Unsupported(f"a scatter value {a.value!r}")
    return _scatter(cx, a, v)


@converter(aten.scatter_add.default)
def scatter_add(cx, node, a):
    return _scatter(cx, a, a.src, "add")


@converter(aten.scatter_reduce.two)
def scatter_reduce(cx, node, a):
    r = _SCATTER_REDUCE.get(a.reduce)
    if r is None:
        raise Unsupported(f"reduce={a.reduce!r}")
    return _scatter(cx, a, a.src, r, bool(a.include_self))


def _copy_into(cx, x, src, starts):
    return cx.emit(K.CopyToSlice, [x, cx.cast(src, x.dtype)], {"starts": list(starts)})


@converter(aten.slice_scatter.default)
def slice_scatter(cx, node, a):
    """x[..., start:end, ...] = src: CopyToSlice."""
    rank = cx.rank_of(a.self)
    d = norm_dim(a.dim, rank)
    step = number(a.step) if a.step is not None else 1
    if step != 1:
        raise Unsupported(f"step {a.step}")
    start = cx.size(a.start) if a.start is not None else 0
    if isinstance(start, int) and start < 0:
        start = as_expr(cx.shape_of(a.self)[d]) + start
        start = start.value if start.is_const else start
    starts = [0] * rank
    starts[d] = start
    return _copy_into(cx, cx.tensor(a.self), cx.tensor(a.src), starts)


@converter(aten.select_scatter.default)
def select_scatter(cx, node, a):
    rank = cx.rank_of(a.self)
    d = norm_dim(a.dim, rank)
    i = cx.size(a.index)
    if isinstance(i, int) and i < 0:
        i = as_expr(cx.shape_of(a.self)[d]) + i
        i = i.value if i.is_const else i
    shape = list(cx.shape_of(a.src))
    shape.insert(d, 1)
    starts = [0] * rank
    starts[d] = i
    return _copy_into(cx, cx.tensor(a.self), cx.reshape(cx.tensor(a.src), shape), starts)


@converter(aten.copy.default)
def copy(cx, node, a):
    """The value of ``self.copy_(src)``: src in self's dtype and shape. When self
    is a buffer held as STATE the copy is written into it (CopyToSlice)."""
    x = cx.tensor(a.self)
    xs, ss = cx.shape_of(a.self), cx.shape_of(a.src)
    same = len(xs) == len(ss) and all(as_expr(p) == as_expr(q) for p, q in zip(xs, ss))
    if cx.is_state(x):
        if not same:
            raise Unsupported(f"a copy of {list(ss)} into the state's {list(xs)}")
        return _copy_into(cx, x, cx.tensor(a.src), [0] * len(xs))
    y = cx.cast(cx.tensor(a.src), x.dtype)
    if same:
        return y
    if x.dtype is DataType.boolean:
        return cx.emit(K.LogicalOr, [y, cx.full(0, x.dtype, xs)])
    return cx.emit(K.Add, [y, cx.full(0, x.dtype, xs)])
