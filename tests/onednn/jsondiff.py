"""A structural comparison of two oneDNN Graph JSON documents (not of their
text): the same keys, and values of the same JSON types (``1``, ``1.0`` and
``true`` differ; NaN equals NaN), op for op."""

from __future__ import annotations

import math
from typing import Any, List


def _same(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


def diff(a: Any, b: Any, where: str = "") -> List[str]:
    """Where ``a`` and ``b`` differ (empty: they are the same document)."""
    if _same(a, b):
        return []
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{where}: key {k!r} only in the first" for k in a if k not in b]
        out += [f"{where}: key {k!r} only in the second" for k in b if k not in a]
        for k in a:
            if k in b:
                sub = f"{where}.{k}"
                if k == "graph" and isinstance(a[k], list):
                    sub = where + ".graph"
                out += diff(a[k], b[k], sub)
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            label = f"[{i}]"
            if isinstance(x, dict) and "kind" in x and "id" in x:  # an op: named by id and kind
                label = f"[op {x['id']} {x['kind']}]"
            out += diff(x, y, where + label)
        return out
    return [f"{where}: {_show(a)} != {_show(b)}"]


def _show(v: Any) -> str:
    s = repr(v)
    return s if len(s) <= 120 else s[:117] + "..."
