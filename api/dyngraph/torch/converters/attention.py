"""scaled_dot_product_attention (kept whole by the decomposition table).

Keys and values that were repeated per query group (transformers'
``repeat_kv``: ``unsqueeze(2) -> expand -> clone -> reshape``) are read
before the repetition: dyngraph's attention maps query head ``h`` to key /
value head ``h // (Hq // Hkv)``, which is what the repetition did.
"""

from __future__ import annotations

import torch

from ...op import OpKind as K
from ...symbolic import as_expr
from .common import aten, is_call, number, through_identities
from .registry import Unsupported, converter

_RESHAPES = (aten.view.default, aten._unsafe_view.default, aten.reshape.default)
_EXPANDS = (aten.expand.default, aten.expand_copy.default)


def _ungrouped(cx, kv):
    """The tensor a grouped-query repetition of ``kv`` started from, else ``kv``."""
    n = through_identities(kv)
    if not is_call(n, *_RESHAPES):
        return kv
    e = through_identities(n.args[0])
    if not is_call(e, *_EXPANDS):
        return kv
    u = through_identities(e.args[0])
    if not is_call(u, aten.unsqueeze.default) or u.args[1] not in (2, -3):
        return kv
    src = u.args[0]
    if not isinstance(cx.meta(src), torch.Tensor):
        return kv
    ks, ss, es = cx.shape_of(kv), cx.shape_of(src), cx.shape_of(e)
    if len(ks) != 4 or len(ss) != 4 or len(es) != 5:
        return kv
    b, hkv, s, d = (as_expr(x) for x in ss)
    ks, es = [as_expr(x) for x in ks], [as_expr(x) for x in es]
    if not (es[0] == b and es[1] == hkv and es[3] == s and es[4] == d):
        return kv
    if not (ks[0] == b and ks[1] == hkv * es[2] and ks[2] == s and ks[3] == d):
        return kv
    return src if cx.is_tensor(src) else kv


@converter(aten.scaled_dot_product_attention.default, keep=True)
def sdpa(cx, node, a):
    if number(a.dropout_p) not in (0, 0.0):
        raise Unsupported(f"dropout_p={a.dropout_p}")
    scale = a.scale
    if scale is not None:
        scale = number(scale)
        if scale is None or scale == 0:
            raise Unsupported(f"scale={a.scale!r}")
    dt = cx.out_dtype()
    q = cx.cast(cx.tensor(a.query), dt)
    k = cx.cast(cx.tensor(_ungrouped(cx, a.key)), dt)
    v = cx.cast(cx.tensor(_ungrouped(cx, a.value)), dt)
    ins = [q, k, v]
    if a.attn_mask is not None:
        m = cx.tensor(a.attn_mask)
        if m.dtype.is_float and m.dtype is not dt:
            m = cx.cast(m, dt)
        ins.append(m)
    attrs = {"is_causal": bool(a.is_causal)}
    if scale is not None:
        attrs["scale"] = float(scale)
    return cx.emit(K.ScaledDotProductAttention, ins, attrs)
