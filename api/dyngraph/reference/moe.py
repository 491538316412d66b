"""MatMulId: each row times the expert matrix its id selects."""

from __future__ import annotations

import numpy as np

from ..op import OpKind as K
from .registry import implements


@implements(K.MatMulId)
def matmul_id(attrs, ins, ctx):
    x, w, ids = ins
    if attrs["transpose_b"]:
        w = np.swapaxes(w, -1, -2)
    if ids.size and (ids.min() < 0 or ids.max() >= w.shape[0]):
        raise IndexError(f"{ctx.op.label}: an expert id is outside [0, {w.shape[0]})")
    if ids.ndim == 1:
        return [np.einsum("tk,tkn->tn", x, w[ids])]
    x = np.broadcast_to(x, ids.shape + x.shape[-1:])
    return [np.einsum("tuk,tukn->tun", x, w[ids])]
