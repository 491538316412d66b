"""ScatterND: updates applied in the order of the index tuples."""

from __future__ import annotations

import numpy as np

from ..op import OpKind as K
from .registry import implements

_COMBINE = {"none": lambda old, new: new, "add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


@implements(K.ScatterND)
def scatter_nd(attrs, ins, ctx):
    data, idx, upd = ins
    out = data.copy()
    q = idx.shape[-1]
    tuples = idx.reshape(-1, q)
    slices = upd.reshape((tuples.shape[0],) + data.shape[q:])
    f = _COMBINE[attrs["reduction"]]
    for t, u in zip(tuples, slices):
        if any(not -n <= i < n for i, n in zip(t, data.shape)):
            raise IndexError(f"{ctx.op.label}: index {list(t)} is outside {list(data.shape[:q])}")
        at = tuple(int(i) % n for i, n in zip(t, data.shape))
        out[at] = f(out[at], u)
    return [out]
