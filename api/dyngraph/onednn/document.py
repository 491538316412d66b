"""A oneDNN Graph JSON file, read and checked into plain records.

The file is untrusted: every field is type-checked, every integer bounded,
and every problem is a :class:`~dyngraph.GraphError` that says where
(``graph[3].inputs[1].shape``). Nothing of dyngraph's op semantics is
involved here; :mod:`.reader` maps the records to a dyngraph graph.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ..errors import GraphError
from ..symbolic import INT64_MAX, Dim
from .exprs import check_name

MAX_FILE_BYTES = 256 << 20
MAX_RANK = 16
INT64_MIN = -(2**63)


@dataclass
class Attr:
    type: str
    value: Any
    given: Any = None  # the value as the file spelled it (a bool as 0 or 1, an f32 as 2), to write it back so


@dataclass
class LT:
    id: int
    dtype: str
    shape: Optional[List[Any]]  # ints (negative: unknown); dyngraph_dims entries may be exprs / "?"
    property: str = "undef"
    name: Optional[str] = None
    symbolic: bool = False  # shape came from dyngraph_dims
    given: Optional[Dict[str, Any]] = None  # the tensor as the file wrote it (checked): written back while unchanged

    def copy(self) -> "LT":
        return LT(self.id, self.dtype, None if self.shape is None else list(self.shape), self.property, self.name,
                  self.symbolic, self.given)


@dataclass
class OpRec:
    id: int
    name: str
    kind: str
    attrs: Dict[str, Attr]
    inputs: List[LT]
    outputs: List[LT]
    where: str = ""
    keys: Tuple[str, ...] = ("id", "name", "kind", "attrs", "inputs", "outputs")  # the file's, in its order


@dataclass
class Document:
    version: str = ""
    engine_kind: str = "cpu"
    fpmath_mode: str = "strict"
    ops: List[OpRec] = field(default_factory=list)
    input_ports: List[int] = field(default_factory=list)
    output_ports: List[int] = field(default_factory=list)
    symbols: Dict[str, Dim] = field(default_factory=dict)
    source: str = "<json>"
    dim_sizes: Dict[str, int] = field(default_factory=dict)  # size in the file of each dim made dynamic
    header: Dict[str, Any] = field(default_factory=dict)  # the file's top-level keys but the graph, as written

    # -- graph structure --------------------------------------------------------
    def produced(self) -> Dict[int, OpRec]:
        return {lt.id: op for op in self.ops for lt in op.outputs}

    def graph_inputs(self) -> List[int]:
        """Tensors consumed and not produced: input_ports' order first, then by first use."""
        prod = self.produced()
        seen: Dict[int, None] = {}  # (a dict: ordered, and membership in constant time)
        for op in self.ops:
            for lt in op.inputs:
                if lt.id not in prod:
                    seen.setdefault(lt.id)
        ordered = [i for i in self.input_ports if i in seen]
        first = set(ordered)
        return ordered + [i for i in seen if i not in first]

    def graph_outputs(self) -> List[int]:
        """Tensors produced and not consumed (an End op marks an output: it consumes nothing)."""
        consumed = {lt.id for op in self.ops if op.kind != "End" for lt in op.inputs}
        return [lt.id for op in self.ops for lt in op.outputs if lt.id not in consumed]

    def max_tensor_id(self) -> int:
        return max([lt.id for op in self.ops for lt in op.inputs + op.outputs] or [0])

    def max_op_id(self) -> int:
        return max([op.id for op in self.ops] or [0])


# the longest integer literal read: every integer a graph holds fits in 64 bits (20 characters);
# Python's own limit (4,300 digits) would raise an untyped ValueError
MAX_INT_DIGITS = 40


def _parse_int(text: str) -> int:
    if len(text) > MAX_INT_DIGITS:
        raise GraphError(f"an integer literal of {len(text)} characters ({text[:12]}...): "
                         f"no value in a graph file has more than {MAX_INT_DIGITS}")
    return int(text)


def _load_text(src) -> Tuple[Any, str]:
    if isinstance(src, dict):
        return src, "<dict>"
    if isinstance(src, (bytes, bytearray, memoryview)):
        where = "<bytes>"
        try:
            text = bytes(src).decode("utf-8")
        except UnicodeDecodeError as e:
            raise GraphError(f"{where}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    elif isinstance(src, str) and src.lstrip().startswith("{"):
        text, where = src, "<json text>"
    elif isinstance(src, (str, os.PathLike)):
        path = os.fspath(src)
        try:
            size = os.path.getsize(path)
            if size > MAX_FILE_BYTES:
                raise GraphError(f"{path}: {size} bytes is larger than a graph file may be ({MAX_FILE_BYTES})")
            with open(path, "rb") as f:
                text = f.read().decode("utf-8")
        except OSError as e:
            raise GraphError(f"cannot read graph file {path}: {e.strerror or e}") from None
        except UnicodeDecodeError as e:
            raise GraphError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
        where = path
    else:
        raise GraphError(f"from_json takes a path, JSON text, bytes or a dict, got {type(src).__name__}")
    if len(text) > MAX_FILE_BYTES:
        raise GraphError(f"{where}: the JSON text is larger than a graph file may be ({MAX_FILE_BYTES} bytes)")
    try:
        return json.loads(text, parse_int=_parse_int), where
    except json.JSONDecodeError as e:
        raise GraphError(f"{where}: not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    except RecursionError:
        raise GraphError(f"{where}: the JSON is nested too deeply") from None


def _type(v, types, where: str, what: str):
    types = types if isinstance(types, tuple) else (types,)
    if isinstance(v, bool) and bool not in types:
        raise GraphError(f"{where}: {what} must be {_names(types)}, got {json.dumps(v)}")
    if not isinstance(v, types):
        raise GraphError(f"{where}: {what} must be {_names(types)}, got {_short(v)}")
    return v


def _names(types) -> str:
    names = {int: "an integer", str: "a string", list: "a list", dict: "an object", bool: "a bool",
             float: "a number"}
    types = types if isinstance(types, tuple) else (types,)
    return " or ".join(names.get(t, t.__name__) for t in types)


def _short(v) -> str:
    s = json.dumps(v) if not isinstance(v, float) or math.isfinite(v) else repr(v)
    return s if len(s) <= 60 else s[:57] + "..."


def _int(v, where: str, what: str, lo: int = INT64_MIN, hi: int = INT64_MAX) -> int:
    _type(v, int, where, what)
    if not lo <= v <= hi:
        raise GraphError(f"{where}: {what} {v} is out of range [{lo}, {hi}]")
    return v


def _key(d: dict, k: str, where: str, default=None, required: bool = True):
    if k in d:
        return d[k]
    if required:
        raise GraphError(f"{where}: missing {k!r}")
    return default


def _attr(v, where: str) -> Attr:
    _type(v, dict, where, "an attribute")
    t = _type(_key(v, "type", where), str, where, "'type'")
    if "value" not in v:
        raise GraphError(f"{where}: missing 'value'")
    x = v["value"]
    if t == "bool":
        if isinstance(x, bool) or (isinstance(x, int) and x in (0, 1)):
            return Attr(t, bool(x), x)
        raise GraphError(f"{where}: a bool attribute must be true, false, 0 or 1, got {_short(x)}")
    if t == "s64":
        v = _int(x, where, "an s64 value")
        return Attr(t, v, v)
    if t == "f32":
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            raise GraphError(f"{where}: an f32 attribute must be a number, got {_short(x)}")
        return Attr(t, float(x), x)
    if t == "string":
        v = _type(x, str, where, "a string attribute")
        return Attr(t, v, v)
    if t in ("s64[]", "f32[]", "dyngraph_exprs"):
        _type(x, list, where, f"a {t} attribute")
        if len(x) > 4096:
            raise GraphError(f"{where}: a list attribute of {len(x)} values is too long")
        if t == "s64[]":
            v = [_int(e, where, "an s64[] element") for e in x]
            return Attr(t, v, list(v))
        if t == "f32[]":
            for e in x:
                if isinstance(e, bool) or not isinstance(e, (int, float)):
                    raise GraphError(f"{where}: an f32[] element must be a number, got {_short(e)}")
            return Attr(t, [float(e) for e in x], list(x))
        for e in x:
            if not isinstance(e, str):
                _int(e, where, "a dyngraph_exprs element")
        return Attr(t, list(x), list(x))
    if t == "dyngraph_expr":
        if not isinstance(x, str):
            _int(x, where, "a dyngraph_expr value")
        return Attr(t, x, x)
    raise GraphError(f"{where}: unknown attribute type {t!r} (oneDNN's are bool, s64, s64[], f32, f32[], string)")


def _lt(v, where: str) -> LT:
    _type(v, dict, where, "a logical tensor")
    tid = _int(_key(v, "id", where), where, "'id'", 0)
    dtype = _type(_key(v, "dtype", where), str, where, "'dtype'")
    shape_v = _key(v, "shape", where)
    _type(shape_v, list, where, "'shape'")
    if len(shape_v) > MAX_RANK:
        raise GraphError(f"{where}: rank {len(shape_v)} is above {MAX_RANK}")
    shape = [_int(d, where, "a dimension") for d in shape_v]
    stride = _key(v, "stride", where, required=False)
    if stride is not None:
        _type(stride, list, where, "'stride'")
        for s in stride:
            _int(s, where, "a stride")
    layout = _key(v, "layout_type", where, "strided", required=False)
    _type(layout, str, where, "'layout_type'")
    if layout not in ("strided", "any", "undef", "opaque"):
        raise GraphError(f"{where}: unknown layout_type {layout!r}")
    prop = _type(_key(v, "property_type", where, "undef", required=False), str, where, "'property_type'")
    name = v.get("dyngraph_name")
    if name is not None:
        _type(name, str, where, "'dyngraph_name'")
    lt = LT(tid, dtype, shape, prop, name)
    if "dyngraph_dims" in v:
        dims = v["dyngraph_dims"]
        if dims is not None:
            _type(dims, list, where, "'dyngraph_dims'")
            if len(dims) > MAX_RANK:
                raise GraphError(f"{where}: rank {len(dims)} is above {MAX_RANK}")
            for d in dims:
                if not isinstance(d, str):
                    _int(d, where, "a dyngraph_dims entry")
            dims = list(dims)
        lt.shape = dims
        lt.symbolic = True
    # checked copies of what the file says, in its order: what to_json writes back
    checked = {"id": tid, "dtype": dtype, "shape": list(shape), "stride": None if stride is None else list(stride),
               "layout_type": layout, "property_type": prop, "dyngraph_name": name,
               "dyngraph_dims": list(lt.shape) if lt.symbolic and lt.shape is not None else None}
    lt.given = {k: checked[k] for k in v if k in checked}
    return lt


def _ports(v, where: str) -> List[int]:
    if v is None:
        return []
    _type(v, list, where, "a port list")
    return [_int(x, where, "a port id", 0) for x in v]


def _symbols(v, where: str) -> Dict[str, Dim]:
    _type(v, list, where, "'dyngraph_symbols'")
    out: Dict[str, Dim] = {}
    for i, s in enumerate(v):
        w = f"{where}[{i}]"
        _type(s, dict, w, "a symbol")
        name = _type(_key(s, "name", w), str, w, "'name'")
        check_name(name, w)
        lo = _int(s.get("min", 1), w, "'min'", 1)
        hi = _int(s.get("max", INT64_MAX), w, "'max'", lo)
        if name in out:
            raise GraphError(f"{w}: dimension {name!r} is declared twice")
        out[name] = Dim(name, min=lo, max=hi)
    return out


_OP_KEYS = ("id", "name", "kind", "attrs", "inputs", "outputs")


def read_document(src) -> Document:
    """Parse and check a graph file (a path, JSON text, bytes or a parsed dict)."""
    data, where = _load_text(src)
    _type(data, dict, where, "the top level")
    doc = Document(source=where)
    doc.version = str(data.get("version", ""))[:64]
    doc.engine_kind = _type(data.get("engine_kind", "cpu"), str, where, "'engine_kind'")
    if doc.engine_kind not in ("cpu", "gpu", "any"):
        raise GraphError(f"{where}: unknown engine_kind {doc.engine_kind!r}")
    doc.fpmath_mode = _type(data.get("fpmath_mode", "strict"), str, where, "'fpmath_mode'")
    if doc.fpmath_mode not in ("strict", "bf16", "f16", "tf32", "any"):
        raise GraphError(f"{where}: unknown fpmath_mode {doc.fpmath_mode!r}")
    doc.input_ports = _ports(data.get("input_ports"), f"{where}: input_ports")
    doc.output_ports = _ports(data.get("output_ports"), f"{where}: output_ports")
    if "dyngraph_symbols" in data:
        doc.symbols = _symbols(data["dyngraph_symbols"], f"{where}: dyngraph_symbols")
    apply_to_int = data.get("fpmath_mode_apply_to_int")
    if apply_to_int is not None:
        _type(apply_to_int, (str, bool), where, "'fpmath_mode_apply_to_int'")
    checked = {"version": doc.version, "engine_kind": doc.engine_kind, "fpmath_mode": doc.fpmath_mode,
               "fpmath_mode_apply_to_int": apply_to_int, "input_ports": list(doc.input_ports),
               "output_ports": list(doc.output_ports), "graph": None}
    doc.header = {k: checked[k] for k in data if k in checked and (k == "graph" or data[k] is not None)}
    ops = _key(data, "graph", where)
    _type(ops, list, where, "'graph'")
    if not ops:
        raise GraphError(f"{where}: the graph has no ops")
    for i, o in enumerate(ops):
        w = f"{where}: graph[{i}]"
        _type(o, dict, w, "an op")
        oid = _int(_key(o, "id", w), w, "'id'", 0)
        kind = _type(_key(o, "kind", w), str, w, "'kind'")
        name = _type(o.get("name", f"{kind.lower()}_{oid}"), str, w, "'name'")
        w = f"{where}: op {oid} ({name}, {kind})"
        attrs_v = o.get("attrs", {})
        _type(attrs_v, dict, w, "'attrs'")
        attrs = {k: _attr(v, f"{w}: attribute {k!r}") for k, v in attrs_v.items()}
        ins = _key(o, "inputs", w)
        outs = _key(o, "outputs", w)
        _type(ins, list, w, "'inputs'")
        _type(outs, list, w, "'outputs'")
        inputs = [_lt(t, f"{w}: inputs[{j}]") for j, t in enumerate(ins)]
        outputs = [_lt(t, f"{w}: outputs[{j}]") for j, t in enumerate(outs)]
        doc.ops.append(OpRec(oid, name, kind, attrs, inputs, outputs, w, tuple(k for k in o if k in _OP_KEYS)))
    return doc
