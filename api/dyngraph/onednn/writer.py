"""A dyngraph :class:`~dyngraph.Graph` -> oneDNN Graph JSON.

A graph whose ops, data types and shapes oneDNN has is written exactly as
oneDNN's graph dump writes one (benchdnn's graph driver reads it). What only
dyngraph has goes into keys oneDNN never sees otherwise:

- ``dyngraph_symbols`` (top level): the named dimensions, with their ranges;
- ``dyngraph_dims`` (a logical tensor): its shape when a dimension is not
  a number (an expression such as ``"seq + 1"``, ``"?"`` for
  ``DYNAMIC_DIM``, ``-1`` for ``UNKNOWN_DIM``), or ``null`` when even the
  rank is unknown; ``shape`` and ``stride`` then hold INT64_MIN for those
  dimensions, as oneDNN writes an unknown dimension (``[-1]``: an unknown rank);
- ``dyngraph_name`` (a logical tensor): its name;
- attribute types ``dyngraph_expr`` / ``dyngraph_exprs``: sizes that are
  expressions; ``property_type`` ``"state"``; op kinds oneDNN lacks
  (``RoPE``, ``ScaledDotProductAttention``, ...) under dyngraph's names.

Every attribute is written with its value (defaults included), so the file
means the same under oneDNN's defaults.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any, Dict, List, Optional

from ..errors import GraphError
from ..logical_tensor import Property
from ..op import Op
from ..ops import schema_of
from ..ops.registry import normalize_attrs
from ..symbolic import DYNAMIC_DIM, UNKNOWN_DIM, Expr, Symbol
from . import dtypes as odt
from .exprs import format_expr
from .opmap import TO_ONEDNN_KIND, to_onednn_value

FORMAT_VERSION = "3.0.0"
UNKNOWN = -(2 ** 63)  # oneDNN's DNNL_GRAPH_UNKNOWN_DIM (INT64_MIN): a dimension or stride not known
_SCALAR_TYPE = {"int": "s64", "bool": "bool", "float": "f32", "str": "string"}


class _Symbols:
    def __init__(self):
        self.by_name: Dict[str, Symbol] = {}

    def add(self, e: Expr, where: str) -> str:
        for s in e.free_symbols():
            other = self.by_name.setdefault(s.name, s)
            if other is not s:
                raise GraphError(f"{where}: two different dimensions are named {s.name!r}")
        return format_expr(e, where)


def _float(v: float):
    if math.isnan(v) or math.isinf(v):
        return v  # json writes NaN / Infinity, as oneDNN's dump does for such values
    return float(v)


def _attr(kind_name: str, name: str, spec_kind: Optional[str], v, syms: _Symbols, where: str) -> Optional[dict]:
    if v is None:
        return None
    w = f"{where}: attribute {name!r}"
    if spec_kind in ("expr", "exprs"):
        vals = list(v) if isinstance(v, (list, tuple)) else [v]
        out = [x.value if isinstance(x, Expr) and x.is_const else x for x in vals]
        symbolic = any(isinstance(x, Expr) for x in out)
        if symbolic:
            out = [syms.add(x, w) if isinstance(x, Expr) else int(x) for x in out]
        if spec_kind == "expr":
            return {"type": "dyngraph_expr" if symbolic else "s64", "value": out[0]}
        return {"type": "dyngraph_exprs" if symbolic else "s64[]", "value": out}
    if spec_kind in _SCALAR_TYPE:
        t = _SCALAR_TYPE[spec_kind]
    elif spec_kind == "ints":
        t = "s64[]"
    elif spec_kind == "floats":
        t = "f32[]"
    elif spec_kind == "dtype":
        return {"type": "string", "value": odt.to_onednn(v)}
    else:  # an op without a schema (Wildcard): by the value's own type
        if isinstance(v, bool):
            t = "bool"
        elif isinstance(v, int):
            t = "s64"
        elif isinstance(v, float):
            t = "f32"
        elif isinstance(v, str):
            t = "string"
        elif isinstance(v, (list, tuple)) and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            t = "s64[]"
        elif isinstance(v, (list, tuple)) and all(isinstance(x, (int, float)) for x in v):
            t = "f32[]"
        else:
            raise GraphError(f"{w}: value {v!r} has no oneDNN attribute type")
    if t == "s64[]":
        v = [int(x) for x in v]
    elif t == "f32[]":
        v = [_float(x) for x in v]
    elif t == "f32":
        v = _float(v)
    elif t == "s64":
        v = int(v)
    elif t == "bool":
        v = bool(v)
    elif t == "string":
        v = to_onednn_value(kind_name, name, v)
    return {"type": t, "value": v}


def _dense_strides(shape: List[int]) -> List[int]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= max(d, 1)
    return out[::-1]


def _lt(lt, syms: _Symbols, graph_input: bool, where: str) -> dict:
    prop = {Property.CONSTANT: "constant", Property.STATE: "state"}.get(lt.property)
    if prop is None:
        prop = "variable" if graph_input else "undef"
    d: Dict[str, Any] = {"id": lt.id, "dtype": odt.to_onednn(lt.dtype)}
    dims = None
    if lt.shape is None:
        shape, stride = [-1], [-1]
        dims = "unknown rank"
    else:
        shape = []
        for x in lt.shape:
            if isinstance(x, int):
                shape.append(x)
            elif isinstance(x, Expr) and x.is_const:
                shape.append(x.value)
            else:
                shape.append(UNKNOWN)
                dims = "symbolic"  # (UNKNOWN_DIM too)
        stride = _dense_strides(shape) if all(s >= 0 for s in shape) else [UNKNOWN] * len(shape)
    d.update(shape=shape, stride=stride, layout_type="strided", property_type=prop)
    if dims == "unknown rank":
        d["dyngraph_dims"] = None
    elif dims == "symbolic":
        out = []
        for x in lt.shape:
            if x is DYNAMIC_DIM:
                out.append("?")
            elif x is UNKNOWN_DIM:
                out.append(-1)
            elif isinstance(x, Expr) and not x.is_const:
                out.append(syms.add(x, f"{where}: tensor {lt.label}"))
            else:
                out.append(int(x))
        d["dyngraph_dims"] = out
    if lt.name:
        d["dyngraph_name"] = lt.name
    return d


def _op(op: Op, syms: _Symbols, graph_inputs: set) -> dict:
    where = op.label
    schema = schema_of(op.kind)
    attrs = normalize_attrs(schema, dict(op.attrs), op.label) if schema is not None else dict(op.attrs)
    out_attrs = {}
    for name, v in attrs.items():
        spec = schema.attrs.get(name) if schema is not None else None
        a = _attr(op.kind.name, name, spec.kind if spec else None, v, syms, where)
        if a is not None:
            out_attrs[name] = a
    return {
        "id": op.id,
        "name": op.name,
        "kind": TO_ONEDNN_KIND.get(op.kind.name, op.kind.name),
        "attrs": out_attrs,
        "inputs": [_lt(lt, syms, lt.id in graph_inputs, where) for lt in op.inputs],
        "outputs": [_lt(lt, syms, False, where) for lt in op.outputs],
    }


def to_document(graph) -> dict:
    """The JSON object of a graph (its ops as declared, attributes normalized)."""
    ops = graph.get_ops()
    produced = {lt.id for op in ops for lt in op.outputs}
    consumed = {lt.id for op in ops for lt in op.inputs}
    inputs: List[int] = []
    for op in ops:
        for lt in op.inputs:
            if lt.id not in produced and lt.id not in inputs:
                inputs.append(lt.id)
    syms = _Symbols()
    body = [_op(op, syms, set(inputs)) for op in ops]
    doc: Dict[str, Any] = {
        "version": FORMAT_VERSION,
        "engine_kind": "cpu",
        "fpmath_mode": "strict",
        "input_ports": inputs,
        "output_ports": [lt.id for op in ops for lt in op.outputs if lt.id not in consumed],
    }
    if syms.by_name:
        # in the order they were made: read back, they are made in this order, and
        # expressions over them print (and compare) alike
        doc["dyngraph_symbols"] = [{"name": s.name, "min": s.min, "max": s.max}
                                   for s in sorted(syms.by_name.values(), key=lambda s: s._uid)]
    doc["graph"] = body
    return doc


def to_json(graph, path: "Optional[os.PathLike | str]" = None, indent: Optional[int] = 2) -> str:
    """The graph as oneDNN Graph JSON text; written to ``path`` as well when given."""
    text = json.dumps(to_document(graph), indent=indent)
    if path is not None:
        tmp = f"{os.fspath(path)}.tmp"
        with open(tmp, "w") as f:
            f.write(text)
            f.write("\n")
        os.replace(tmp, path)
    return text
