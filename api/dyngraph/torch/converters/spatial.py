"""Helpers of the spatial converters (conv, pool, channel_norm, interpolate):
PyTorch's per-axis arguments, unbatched inputs, outputs dyngraph does not
compute. Torch data is NCX, convolution weights OIX, transposed ones IOX."""

from __future__ import annotations

from .registry import Missing, Unsupported


def per_axis(v, n: int, what: str) -> list:
    """An int or a list of 1 or n ints as n ints."""
    if isinstance(v, int) and not isinstance(v, bool):
        return [v] * n
    v = list(v)
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        raise Unsupported(f"{what} {v} is not a list of ints")
    if len(v) == 1:
        return v * n
    if len(v) != n:
        raise Unsupported(f"{what} {v} needs {n} entries")
    return v


def batched(cx, x, n_spatial: int):
    """(the input as [N, C, X...], whether it was unbatched [C, X...])."""
    rank = cx.rank_of(x)
    t = cx.tensor(x)
    if rank == n_spatial + 2:
        return t, False
    if rank == n_spatial + 1:
        return cx.reshape(t, (1,) + cx.shape_of(x)), True
    raise Unsupported(f"input of rank {rank} for {n_spatial} spatial axes")


def unbatch(cx, y, was_unbatched: bool):
    return cx.reshape(y, cx.out_shape()) if was_unbatched else y


def missing(node, index: int):
    """An output of `node` that is not computed (statistics, pooling indices)."""
    return Missing(node, index)
