"""oneDNN features dyngraph has no one op for, expressed exactly with several
of its ops by the importer (``decompose=True``): PReLU, MatMul of 1-D
inputs, LayerNorm's mean and variance outputs and BatchNormForwardTraining. Each function returns the
ops that replace the file's op; ``r`` is the importer (new tensors and ops,
the list of what was decomposed)."""

from __future__ import annotations

from typing import List

from ..dtypes import DataType
from ..op import Op, OpKind


def prelu(r, rec, ins, outs, data_format: str, per_channel: bool) -> List[Op]:
    """dst = src where src >= 0, else slope * src (oneDNN's PReLU page). A 1-D
    slope goes along the channel axis with ``per_channel_broadcast`` (axis 1
    for NCX, the last for NXC), else along the last axis; an n-D slope
    broadcasts from the right, as numpy does."""
    r.decomposed.append("PReLU from several ops")
    x, slope, y = ins[0], ins[1], outs[0]
    base = rec.name
    ops: List[Op] = []
    rank = len(x.shape) if x.shape is not None else None
    if per_channel and data_format == "NCX" and (rank is None or slope.shape is None):
        r.block("PReLU with a per-channel slope over src or slope of unknown rank")
    elif per_channel and data_format == "NCX" and rank > 2 and len(slope.shape) == 1:
        moved = r.new_lt(slope.dtype, [slope.shape[0]] + [1] * (rank - 2))
        ops.append(r.new_op(OpKind.StaticReshape, [slope], [moved], {"shape": [-1] + [1] * (rank - 2)},
                            f"{base}.slope_per_channel"))
        slope = moved
    zero, nonneg, scaled = r.new_lt(x.dtype, []), r.new_lt(DataType.boolean), r.new_lt(y.dtype)
    return [
        *ops,
        Op(rec.id, OpKind.Full, [], [zero], {"shape": [], "value": 0.0}, f"{base}.zero"),
        r.new_op(OpKind.GreaterEqual, [x, zero], [nonneg], {}, f"{base}.nonneg"),
        r.new_op(OpKind.Multiply, [x, slope], [scaled], {}, f"{base}.scaled"),
        r.new_op(OpKind.Select, [nonneg, x, scaled], [y], {}, base),
    ]


def matmul_1d(r, rec, ins, outs, attrs) -> List[Op]:
    """MatMul with a 1-D src or weights (oneDNN's MatMul page): src [K] is
    taken as [1, K], weights [K] as [K, 1] (transpose attributes ignored for
    them), and the axis each added is dropped from the result."""
    r.decomposed.append("MatMul of a 1-D input")
    a, b, y = ins[0], ins[1], outs[0]
    base = rec.name
    attrs = dict(attrs)
    ops: List[Op] = []
    if len(a.shape) == 1:
        a2 = r.new_lt(a.dtype, [1, a.shape[0]])
        ops.append(r.new_op(OpKind.StaticReshape, [a], [a2], {"shape": [1, -1]}, f"{base}.src_2d"))
        a, attrs["transpose_a"] = a2, False
    if len(b.shape) == 1:
        b2 = r.new_lt(b.dtype, [b.shape[0], 1])
        ops.append(r.new_op(OpKind.StaticReshape, [b], [b2], {"shape": [-1, 1]}, f"{base}.weights_2d"))
        b, attrs["transpose_b"] = b2, False
    rank = max(len(a.shape), len(b.shape))
    full = r.new_lt(y.dtype)
    ops.append(Op(rec.id, OpKind.MatMul, [a, b] + list(ins[2:]), [full], attrs, base))
    # [..., 1, N] or [..., M, 1] (or [1, 1]): the unit axis merged into its neighbour
    ops.append(r.new_op(OpKind.StaticReshape, [full], [y], {"shape": [0] * (rank - 2) + [-1], "special_zero": True},
                        f"{base}.squeezed"))
    return ops


def layer_norm_stats(r, rec, ins, outs, attrs) -> List[Op]:
    """LayerNorm's mean and variance outputs (keep_stats): the mean of src over
    the normalized axes and the mean of the squared deviation from it (the
    biased variance, oneDNN's formula), beside the normalized output."""
    r.decomposed.append("LayerNorm mean and variance outputs")
    x, (y, mean, var) = ins[0], outs
    base = rec.name
    rank = len(x.shape)
    begin = attrs.get("begin_norm_axis", -1) % rank
    axes = list(range(begin, rank))
    attrs = dict(attrs, keep_stats=False)
    kept, dev, sq = r.new_lt(x.dtype), r.new_lt(x.dtype), r.new_lt(x.dtype)
    return [
        Op(rec.id, OpKind.LayerNorm, list(ins), [y], attrs, base),
        r.new_op(OpKind.ReduceMean, [x], [mean], {"axes": axes, "keep_dims": False}, f"{base}.mean"),
        r.new_op(OpKind.ReduceMean, [x], [kept], {"axes": axes, "keep_dims": True}, f"{base}.mean_kept"),
        r.new_op(OpKind.Subtract, [x, kept], [dev], {}, f"{base}.deviation"),
        r.new_op(OpKind.Square, [dev], [sq], {}, f"{base}.squared"),
        r.new_op(OpKind.ReduceMean, [sq], [var], {"axes": axes, "keep_dims": False}, f"{base}.variance"),
    ]


def batch_norm_training(r, rec, ins, outs, epsilon: float, momentum: float, data_format: str) -> List[Op]:
    """BatchNormForwardTraining (oneDNN's page): the batch's mean and biased
    variance over every axis but the channel one (1 for NCX, the last for
    NXC), dst normalized with them as BatchNormInference does, and the
    running statistics as oneDNN's graph backend updates them:
    ``running = momentum * given + (1 - momentum) * batch`` (momentum 0.5
    where the file gives none)."""
    r.decomposed.append("BatchNormForwardTraining from several ops")
    x, mean, var, gamma, beta = ins
    y, running_mean, running_var, batch_mean, batch_var = outs
    base = rec.name
    rank = len(x.shape)
    channel = 1 if data_format == "NCX" else rank - 1
    axes = [a for a in range(rank) if a != channel]
    dt, st = x.dtype, mean.dtype
    # batch_mean and batch_variance are graph outputs, which no op of the graph may read: the ops
    # below read copies of them (the same reductions again)
    kept, dev, sq, m, v = (r.new_lt(dt) for _ in range(5))
    red = {"axes": axes, "keep_dims": False}
    ops = [
        Op(rec.id, OpKind.ReduceMean, [x], [batch_mean], red, f"{base}.batch_mean"),
        r.new_op(OpKind.ReduceMean, [x], [m], red, f"{base}.mean"),
        r.new_op(OpKind.ReduceMean, [x], [kept], {"axes": axes, "keep_dims": True}, f"{base}.mean_kept"),
        r.new_op(OpKind.Subtract, [x, kept], [dev], {}, f"{base}.deviation"),
        r.new_op(OpKind.Square, [dev], [sq], {}, f"{base}.squared"),
        r.new_op(OpKind.ReduceMean, [sq], [batch_var], red, f"{base}.batch_variance"),
        r.new_op(OpKind.ReduceMean, [sq], [v], red, f"{base}.variance"),
        r.new_op(OpKind.BatchNormInference, [x, gamma, beta, m, v], [y],
                 {"epsilon": epsilon, "data_format": data_format}, base),
    ]
    keep, take = r.new_lt(st, []), r.new_lt(st, [])
    ops += [r.new_op(OpKind.Full, [], [keep], {"shape": [], "value": float(momentum)}, f"{base}.momentum"),
            r.new_op(OpKind.Full, [], [take], {"shape": [], "value": 1.0 - float(momentum)}, f"{base}.one_minus_momentum")]
    for given, batch, out, name in ((mean, m, running_mean, "running_mean"), (var, v, running_var, "running_variance")):
        a, b = r.new_lt(st), r.new_lt(st)
        ops += [r.new_op(OpKind.Multiply, [given, keep], [a], {}, f"{base}.{name}_kept"),
                r.new_op(OpKind.Multiply, [batch, take], [b], {}, f"{base}.{name}_taken"),
                r.new_op(OpKind.Add, [a, b], [out], {}, f"{base}.{name}")]
    return ops
