"""benchdnn's rewrites of a graph file (new input shapes, attributes, data
types, op kinds, batch size, tensor properties) and dyngraph's dynamic dims,
applied to a :class:`~.document.Document` before it becomes a graph.

After a shape rewrite the shapes of internal and output tensors are inferred,
as benchdnn does: the file's shapes for them no longer hold.
"""

from __future__ import annotations

import logging
import re
from typing import Dict, List, Optional

from ..errors import GraphError
from ..symbolic import Dim
from .document import Attr, Document, OpRec
from .opmap import kind_info
from .options import Overrides

log = logging.getLogger("dyngraph.onednn")

_FLOAT_RE = re.compile(r"-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\Z|-?inf\Z|nan\Z")


def _typed(kind: str, name: str, text: str, existing: Optional[Attr], where: str) -> Attr:
    info = kind_info(kind)
    t = existing.type if existing else (info.attrs[name].type if info and name in info.attrs else None)
    if t is None:  # not a known attribute of the kind: guess from the text
        if re.fullmatch(r"-?\d+", text):
            t = "s64"
        elif _FLOAT_RE.match(text):
            t = "f32"
        elif re.fullmatch(r"-?\d+(x-?\d+)+", text):
            t = "s64[]"
        elif text.lower() in ("true", "false"):
            t = "bool"
        else:
            t = "string"
    try:
        if t == "bool":
            low = text.lower()
            if low not in ("0", "1", "true", "false"):
                raise ValueError
            return Attr(t, low in ("1", "true"))
        if t == "s64":
            return Attr(t, int(text))
        if t == "f32":
            return Attr(t, float(text))
        if t == "s64[]":
            return Attr(t, [] if text == "" else [int(x) for x in text.split("x")])
        if t == "f32[]":
            return Attr(t, [] if text == "" else [float(x) for x in text.split("x")])
        return Attr("string", text)
    except ValueError:
        raise GraphError(f"{where}: attribute {name!r}: {text!r} is not a {t} value") from None


def _all_lts(doc: Document):
    for op in doc.ops:
        yield from op.inputs
        yield from op.outputs


def _require_tensor(doc: Document, tid: int, opt: str) -> None:
    if not any(lt.id == tid for lt in _all_lts(doc)):
        raise GraphError(f"{opt}: the graph has no tensor {tid}")


def _op(doc: Document, oid: int, opt: str) -> OpRec:
    for op in doc.ops:
        if op.id == oid:
            return op
    raise GraphError(f"{opt}: the graph has no op {oid}")


def _remove_op(doc: Document, op: OpRec) -> None:
    """--op-kind=ID:undef: the op goes; its input (for a binary op, the one with
    a producer) takes the place of its output."""
    prod = doc.produced()
    if len(op.outputs) != 1 or not op.inputs:
        raise GraphError(f"--op-kind {op.id}:undef: only ops with inputs and one output can be removed")
    if len(op.inputs) == 1:
        keep = op.inputs[0]
    else:
        has = [lt for lt in op.inputs[:2] if lt.id in prod]
        if len(has) != 1:
            raise GraphError(f"--op-kind {op.id}:undef: exactly one of the two inputs must have a producer, "
                             f"{len(has)} do")
        keep = has[0]
    out = op.outputs[0].id
    doc.ops.remove(op)
    for o in doc.ops:
        o.inputs = [keep.copy() if lt.id == out else lt for lt in o.inputs]


def apply(doc: Document, ov: Overrides) -> bool:
    """Apply the rewrites in benchdnn's order. Returns True when the shapes of
    internal and output tensors must be inferred again."""
    reshaped = bool(ov.op_kind or ov.op_attrs)  # a new kind or attribute may change what an op produces
    for oid, kind in ov.op_kind.items():
        op = _op(doc, oid, "--op-kind")
        if kind == "undef":
            _remove_op(doc, op)
        else:
            op.kind = kind
    if ov.dt:
        if isinstance(ov.dt, str):
            for lt in _all_lts(doc):
                if lt.dtype == "f32":
                    lt.dtype = ov.dt
        else:
            for tid, dt in ov.dt.items():
                _require_tensor(doc, tid, "--dt")
                for lt in _all_lts(doc):
                    if lt.id == tid:
                        lt.dtype = dt
    for oid, attrs in ov.op_attrs.items():
        op = _op(doc, oid, "--op-attrs")
        for name, text in attrs.items():
            op.attrs[name] = _typed(op.kind, name, text, op.attrs.get(name), op.where)
    inputs = doc.graph_inputs()
    for tid, shape in ov.in_shapes.items():
        if tid not in inputs:  # benchdnn passes over these too (oneDNN's own batch files have some)
            log.warning("--in-shapes: tensor %d is not an input of the graph (inputs: %s): ignored", tid, inputs)
            continue
        if shape is None:
            continue  # strides only: a layout, which dyngraph does not keep
        for lt in _all_lts(doc):
            if lt.id == tid:
                lt.shape, lt.symbolic = list(shape), False
        reshaped = True
    if ov.mb:
        reshaped |= _apply_mb(doc, ov.mb, inputs)
    for tid, prop in ov.tensor_property.items():
        _require_tensor(doc, tid, "--tensor-property")
        for lt in _all_lts(doc):
            if lt.id == tid:
                lt.property = prop
    if ov.dynamic:
        _apply_dynamic(doc, ov.dynamic, inputs)
        reshaped = True
    return reshaped


def _apply_mb(doc: Document, mb: int, inputs: List[int]) -> bool:
    """Dimension 0 of the variable inputs that carry the batch (those whose
    dimension 0 is that of the first input) becomes mb. (benchdnn decides
    per consuming op; this is the common case of it.)"""
    first = _first_decl(doc, inputs[0]) if inputs else None
    if first is None or not first.shape:
        return False
    batch = first.shape[0]
    changed = False
    for tid in inputs:
        lt = _first_decl(doc, tid)
        if lt.property == "constant" or not lt.shape or lt.shape[0] != batch:
            continue
        for t in _all_lts(doc):
            if t.id == tid:
                t.shape[0] = mb
        changed = True
    return changed


def _first_decl(doc: Document, tid: int):
    for lt in _all_lts(doc):
        if lt.id == tid:
            return lt
    return None


def _apply_dynamic(doc: Document, specs, inputs: List[int]) -> None:
    dims: Dict[str, Dim] = dict(doc.symbols)
    orig = {lt.id: list(lt.shape) if lt.shape is not None else None for lt in _all_lts(doc)}
    for tid, axis, name in specs:
        if tid not in inputs:
            raise GraphError(f"--dynamic: tensor {tid} is not an input of the graph (inputs: {inputs})")
        lt = _first_decl(doc, tid)
        if lt.shape is None or not -len(lt.shape) <= axis < len(lt.shape):
            raise GraphError(f"--dynamic {tid}:{axis}: tensor {tid} has shape {lt.shape}, no axis {axis}")
        if lt.property == "constant":
            raise GraphError(f"--dynamic {tid}:{axis}: tensor {tid} is a constant; constants have static shapes")
        axis %= len(lt.shape)
        size = lt.shape[axis]
        if isinstance(name, Dim):
            dim = dims.setdefault(name.name, name)
            if dim is not name:
                raise GraphError(f"--dynamic: two different dimensions are named {name.name!r}")
        else:
            key = name or f"t{tid}_d{axis}"
            dim = dims.setdefault(key, Dim(key))
        if isinstance(size, int) and size > 0:
            if doc.dim_sizes.setdefault(dim.name, size) != size:
                raise GraphError(f"--dynamic {tid}:{axis}: dimension {dim.name!r} is {doc.dim_sizes[dim.name]} "
                                 f"elsewhere in the file, {size} here")
        for t in _all_lts(doc):
            if t.id == tid:
                t.shape[axis] = dim
                t.symbolic = True
    doc.symbols = dims
    # a static reshape that keeps a dimension where it was copies it instead
    # (special_zero), so it follows the dimension when it is dynamic
    for op in doc.ops:
        if op.kind != "StaticReshape" or "shape" not in op.attrs or not op.inputs:
            continue
        src = orig.get(op.inputs[0].id)
        target = op.attrs["shape"].value
        special = op.attrs.get("special_zero", Attr("bool", False)).value
        if src is None or not isinstance(target, list) or (not special and 0 in target):
            continue
        new = [0 if i < len(src) and t == src[i] and t > 0 else t for i, t in enumerate(target)]
        if new != target:
            op.attrs["shape"] = Attr("s64[]", new)
            op.attrs["special_zero"] = Attr("bool", True)


__all__ = ["apply"]
