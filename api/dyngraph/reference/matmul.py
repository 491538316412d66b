"""MatMul: numpy matmul with transposes of the last two axes and a bias."""

from __future__ import annotations

import numpy as np

from ..op import OpKind as K
from .registry import implements


@implements(K.MatMul)
def matmul(attrs, ins, ctx):
    a, b = ins[0], ins[1]
    if attrs["transpose_a"]:
        a = np.swapaxes(a, -1, -2)
    if attrs["transpose_b"]:
        b = np.swapaxes(b, -1, -2)
    with np.errstate(all="ignore"):
        out = np.matmul(a, b)
        if len(ins) == 3:
            out = out + ins[2]
    return [out]
