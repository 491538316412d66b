"""DynamicReshape and DynamicTranspose: the target is read from a tensor's values."""

from __future__ import annotations

import numpy as np

from ..op import OpKind as K
from .layout import resolve_reshape
from .registry import implements


@implements(K.DynamicReshape)
def dynamic_reshape(attrs, ins, ctx):
    x, shape = ins
    return [x.reshape(resolve_reshape(x.shape, [int(v) for v in shape.reshape(-1)], attrs["special_zero"]))]


@implements(K.DynamicTranspose)
def dynamic_transpose(attrs, ins, ctx):
    x, order = ins
    perm = [int(a) % x.ndim for a in order.reshape(-1)] if order.size else list(reversed(range(x.ndim)))
    return [np.transpose(x, perm)]
