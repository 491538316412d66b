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
from ..graph import Graph
from ..logical_tensor import Property
from ..op import Op
from ..ops import schema_of
from ..ops.registry import normalize_attrs
from ..symbolic import DYNAMIC_DIM, UNKNOWN_DIM, Expr, Symbol
from . import dtypes as odt
from .exprs import format_expr
from .opmap import TO_ONEDNN_KIND, to_onednn_value
from .source import source_of

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


def _shape_fields(shape, syms: _Symbols, where: str) -> Dict[str, Any]:
    """``shape`` and ``stride`` as oneDNN writes them (INT64_MIN where a dimension
    is not a number), with ``dyngraph_dims`` when one is not (``None``: an unknown rank)."""
    if shape is None:
        return {"shape": [-1], "stride": [-1], "dyngraph_dims": None}
    out: List[int] = []
    symbolic = False
    for x in shape:
        if isinstance(x, int):
            out.append(x)
        elif isinstance(x, Expr) and x.is_const:
            out.append(x.value)
        else:
            out.append(UNKNOWN)
            symbolic = True  # (UNKNOWN_DIM too)
    d: Dict[str, Any] = {"shape": out, "stride": _dense_strides(out) if all(s >= 0 for s in out)
                         else [UNKNOWN] * len(out)}
    if symbolic:
        dims = []
        for x in shape:
            if x is DYNAMIC_DIM:
                dims.append("?")
            elif x is UNKNOWN_DIM:
                dims.append(-1)
            elif isinstance(x, Expr) and not x.is_const:
                dims.append(syms.add(x, where))
            else:
                dims.append(int(x))
        d["dyngraph_dims"] = dims
    return d


def _lt(lt, syms: _Symbols, graph_input: bool, where: str) -> dict:
    prop = {Property.CONSTANT: "constant", Property.STATE: "state"}.get(lt.property)
    if prop is None:
        prop = "variable" if graph_input else "undef"
    fields = _shape_fields(lt.shape, syms, f"{where}: tensor {lt.label}")
    d: Dict[str, Any] = {"id": lt.id, "dtype": odt.to_onednn(lt.dtype), "shape": fields["shape"],
                         "stride": fields["stride"], "layout_type": "strided", "property_type": prop}
    if "dyngraph_dims" in fields:
        d["dyngraph_dims"] = fields["dyngraph_dims"]
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


def _copy(v):
    return list(v) if isinstance(v, list) else v


def _given_attr(a) -> dict:
    """An attribute of the file as the file spelled it; one a rewrite set, as oneDNN spells it."""
    if a.given is not None:
        v = _copy(a.given)
    elif a.type == "bool":
        v = int(bool(a.value))  # oneDNN's files write a bool as 0 or 1
    else:
        v = _copy(a.value)
    return {"type": a.type, "value": v}


def _given_lt(rec, shape, syms: _Symbols, where: str) -> dict:
    """A logical tensor of the file as it wrote it (layout, strides, property as given).
    A ``shape`` other than ``_SAME`` replaces the file's (a rewrite changed it): the
    strides are then dense, INT64_MIN where a dimension is not a number."""
    given = rec.given or {}
    keys = list(given) or ["id", "dtype", "shape", "stride", "layout_type", "property_type"]
    fields = None
    if shape is not _SAME or rec.given is None:
        fields = _shape_fields(rec.shape if shape is _SAME else shape, syms, f"{where}: tensor {rec.id}")
        keys += [k for k in fields if k not in keys]
    d: Dict[str, Any] = {}
    for k in keys:
        if k in ("shape", "stride", "dyngraph_dims"):
            if fields is None:
                d[k] = _copy(given[k])
            elif k in fields:
                d[k] = fields[k]
        elif k == "layout_type":
            d[k] = given.get(k, "strided")
        elif k != "dyngraph_name":
            d[k] = {"id": rec.id, "dtype": rec.dtype, "property_type": rec.property}[k]
    if "property_type" not in d and rec.property != "undef":  # (a rewrite set it)
        d["property_type"] = rec.property
    if rec.name is not None:
        d["dyngraph_name"] = rec.name
    return d


_SAME = object()  # a tensor's shape as its record holds it


def _given_op(rec, graph, src, declared: Dict[int, Any], syms: _Symbols) -> dict:
    """A file's op as the file wrote it (after benchdnn's rewrites)."""
    produced = src.produced

    def lt(t):
        if src.reinferred and t.id in produced:  # the file's shape no longer holds: the graph's inferred one
            return _given_lt(t, graph.logical_tensor(t.id).shape, syms, rec.where)
        if t.given is None or t.shape != t.given.get("dyngraph_dims", t.given["shape"]):
            return _given_lt(t, declared[t.id].shape, syms, rec.where)  # (as the importer read it)
        return _given_lt(t, _SAME, syms, rec.where)

    keys = list(rec.keys)
    if rec.attrs and "attrs" not in keys:  # (a rewrite gave an op attributes)
        keys.insert(keys.index("inputs"), "attrs")
    values = {"id": rec.id, "name": rec.name, "kind": rec.kind}
    d: Dict[str, Any] = {}
    for k in keys:
        if k == "attrs":
            d[k] = {name: _given_attr(a) for name, a in rec.attrs.items()}
        elif k in ("inputs", "outputs"):
            d[k] = [lt(t) for t in getattr(rec, k)]
        else:
            d[k] = values[k]
    return d


def _as_imported(graph, src, ops: List[Op], syms: _Symbols, ports: Dict[str, List[int]]) -> dict:
    """The document an imported graph was read from: the file's ops where the graph
    still holds them as imported, dyngraph's ops where it does not."""
    by_id = {op.id: op for op in ops}
    declared: Dict[int, Any] = {}
    for op in ops:
        for lt in op.inputs + op.outputs:
            declared.setdefault(lt.id, lt)
    for name, dim in src.doc.symbols.items():
        syms.by_name.setdefault(name, dim.sym)
    body, covered, exact = [], set(), True
    for grp in src.groups:
        covered.update(grp.op_ids)
        if src.intact(grp, by_id, declared):
            body.append(_given_op(grp.rec, graph, src, declared, syms))
        else:
            exact = False
            body += [_op(by_id[i], syms, set(ports["input_ports"])) for i in grp.op_ids if i in by_id]
    rest = [op for op in ops if op.id not in covered]
    body += [_op(op, syms, set(ports["input_ports"])) for op in rest]
    exact = exact and not rest
    out: Dict[str, Any] = {}
    for k, v in src.doc.header.items():
        if k == "graph":
            _write_symbols(out, syms)
            out[k] = body
        else:
            out[k] = _copy(v) if exact or k not in ports else ports[k]
    return out


def _write_symbols(doc: Dict[str, Any], syms: _Symbols) -> None:
    if syms.by_name:
        # in the order they were made: read back, they are made in this order, and
        # expressions over them print (and compare) alike
        doc["dyngraph_symbols"] = [{"name": s.name, "min": s.min, "max": s.max}
                                   for s in sorted(syms.by_name.values(), key=lambda s: s._uid)]


def to_document(graph, decomposed: bool = False) -> dict:
    """The JSON object of a graph. An imported graph is written as the file it was
    read from (benchdnn's rewrites applied); with ``decomposed``, or for a graph
    built otherwise, its own ops as declared, attributes normalized."""
    if not isinstance(graph, Graph):
        raise GraphError(f"to_json takes a dyngraph Graph, got {type(graph).__name__}")
    ops = graph.get_ops()
    produced = {lt.id for op in ops for lt in op.outputs}
    consumed = {lt.id for op in ops for lt in op.inputs}
    inputs: Dict[int, None] = {}
    for op in ops:
        for lt in op.inputs:
            if lt.id not in produced:
                inputs.setdefault(lt.id)
    ports = {"input_ports": list(inputs),
             "output_ports": [lt.id for op in ops for lt in op.outputs if lt.id not in consumed]}
    syms = _Symbols()
    src = None if decomposed else source_of(graph)
    if src is not None:
        return _as_imported(graph, src, ops, syms, ports)
    body = [_op(op, syms, set(inputs)) for op in ops]
    doc: Dict[str, Any] = {"version": FORMAT_VERSION, "engine_kind": "cpu", "fpmath_mode": "strict", **ports}
    _write_symbols(doc, syms)
    doc["graph"] = body
    return doc


def to_json(graph, path: "Optional[os.PathLike | str]" = None, indent: Optional[int] = 2,
            decomposed: bool = False) -> str:
    """The graph as oneDNN Graph JSON text; written to ``path`` as well when given.

    A graph :func:`~.reader.from_json` read is written as the file it came from:
    the file's ops, attributes, ids and logical tensors (layout, strides,
    property) as given, with benchdnn's rewrites applied, which benchdnn's
    ``--graph --case=`` reads; an op whose dyngraph form is no longer in the
    graph as imported is written as dyngraph's ops. With ``decomposed`` (and
    for a graph built otherwise) the graph's own ops are written, as dyngraph
    runs them."""
    text = json.dumps(to_document(graph, decomposed), indent=indent)
    if path is not None:
        tmp = f"{os.fspath(path)}.tmp"
        with open(tmp, "w") as f:
            f.write(text)
            f.write("\n")
        os.replace(tmp, path)
    return text
