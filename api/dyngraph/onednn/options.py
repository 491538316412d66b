"""benchdnn's graph-driver options, parsed into the rewrites they ask for.

The spellings are benchdnn's (``doc/driver_graph.md``), so the lines of its
batch files work as they are:

- ``--in-shapes=ID:SHAPE[*STRIDES][+ID:SHAPE...]``: a new shape for graph
  input ``ID`` (``2x3x4``; ``-`` is a scalar). Strides (a list or a tag like
  ``acbd``) are checked and otherwise ignored: dyngraph tensors are dense and
  row-major, a layout changes no value.
- ``--op-attrs=ID:NAME:VALUE[*NAME:VALUE][+ID:...]``: attribute values of op ``ID``
  (lists as ``1x2x3``).
- ``--dt=DT`` (every f32 tensor becomes DT) or ``--dt=ID:DT[+ID:DT]``.
- ``--op-kind=ID:KIND[+ID:KIND]``: a new kind for op ``ID``; ``undef``
  removes the op, its data passing through.
- ``--mb=N``: a new batch size (dimension 0) for the graph inputs that carry it.
- ``--tensor-property=ID:PROPERTY[+...]``: ``undef``, ``variable``,
  ``constant`` or ``host_scalar``.

and one of dyngraph's own:

- ``--dynamic=ID:AXIS[:NAME][+ID:AXIS[:NAME]]``: dimension ``AXIS`` of graph
  input ``ID`` becomes dynamic; dimensions given one NAME are one dimension.

In benchdnn a comma separates variants of an option (``--op-kind=0:Abs,0:Exp``
runs the case twice): :func:`variants` splits them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple, Union

from ..errors import GraphError

INT_RE = re.compile(r"-?\d+\Z")
PROPERTIES = ("undef", "variable", "constant", "host_scalar")
MAX_INT_CHARS = 40  # longer digit strings are refused before int() (Python's own limit is an untyped error)


class OptionError(GraphError):
    """A malformed option value (``--in-shapes=0:abc``): a usage error of the command line."""


@dataclass
class Overrides:
    """The rewrites of one run of a case, as parsed values."""

    in_shapes: Dict[int, Optional[List[int]]] = field(default_factory=dict)  # None: only strides were given
    op_attrs: Dict[int, Dict[str, str]] = field(default_factory=dict)  # values as text, typed by the reader
    dt: Union[None, str, Dict[int, str]] = None
    op_kind: Dict[int, str] = field(default_factory=dict)
    mb: int = 0
    tensor_property: Dict[int, str] = field(default_factory=dict)
    dynamic: List[Tuple[int, int, Any]] = field(default_factory=list)  # (tensor id, axis, name or Dim or None)

    def is_empty(self) -> bool:
        return not (self.in_shapes or self.op_attrs or self.dt or self.op_kind or self.mb
                    or self.tensor_property or self.dynamic)


def _int(text: str, what: str, lo: int = -(2**63), hi: int = 2**63 - 1) -> int:
    if len(text) > MAX_INT_CHARS + 8 or not INT_RE.match(text.strip()):
        raise OptionError(f"{what}: {text[:MAX_INT_CHARS]!r} is not an integer")
    v = int(text)
    if not lo <= v <= hi:
        raise OptionError(f"{what}: {v} is out of range [{lo}, {hi}]")
    return v


def _split_id(item: str, opt: str) -> Tuple[int, str]:
    if ":" not in item:
        raise OptionError(f"{opt}: {item!r} must be ID:VALUE")
    i, rest = item.split(":", 1)
    return _int(i, f"{opt} id", 0), rest


def parse_dims(text: str, what: str) -> List[int]:
    """``2x3x4`` -> [2, 3, 4]; ``-`` -> [] (a scalar)."""
    text = text.strip()
    if text == "-":
        return []
    if not text:
        raise OptionError(f"{what}: empty shape")
    return [_int(d, what, 0) for d in text.split("x")]


def parse_in_shapes(text: str) -> Dict[int, Optional[List[int]]]:
    out: Dict[int, Optional[List[int]]] = {}
    for item in filter(None, text.split("+")):
        tid, spec = _split_id(item, "--in-shapes")
        shape_text, _, strides = spec.partition("*")
        shape = parse_dims(shape_text, f"--in-shapes {tid}") if shape_text else None
        if strides:
            rank = len(shape) if shape is not None else None
            if re.fullmatch(r"[a-z]+", strides):
                if rank is not None and len(strides) != rank:
                    raise OptionError(f"--in-shapes {tid}: stride tag {strides!r} does not have rank {rank}")
            else:
                st = parse_dims(strides, f"--in-shapes {tid} strides")
                if rank is not None and len(st) != rank:
                    raise OptionError(f"--in-shapes {tid}: {len(st)} strides for rank {rank}")
        out[tid] = shape
    return out


def parse_op_attrs(text: str) -> Dict[int, Dict[str, str]]:
    out: Dict[int, Dict[str, str]] = {}
    for item in filter(None, text.split("+")):
        oid, spec = _split_id(item, "--op-attrs")
        attrs = out.setdefault(oid, {})
        for pair in filter(None, spec.split("*")):
            name, sep, value = pair.partition(":")
            if not sep or not name:
                raise OptionError(f"--op-attrs {oid}: {pair!r} must be NAME:VALUE")
            attrs[name] = value
    return out


def parse_dt(text: str) -> Union[None, str, Dict[int, str]]:
    text = text.strip()
    if text in ("", "undef"):
        return None
    if ":" not in text:
        return text
    return {tid: dt for tid, dt in (_split_id(item, "--dt") for item in filter(None, text.split("+")))}


def parse_op_kind(text: str) -> Dict[int, str]:
    return dict(_split_id(item, "--op-kind") for item in filter(None, text.split("+")))


def parse_mb(text: str) -> int:
    return _int(text, "--mb", 0)


def parse_tensor_property(text: str) -> Dict[int, str]:
    out = {}
    for item in filter(None, text.split("+")):
        tid, prop = _split_id(item, "--tensor-property")
        if prop not in PROPERTIES:
            raise OptionError(f"--tensor-property {tid}: {prop!r} is not one of {', '.join(PROPERTIES)}")
        out[tid] = prop
    return out


def parse_dynamic(specs) -> List[Tuple[int, int, Any]]:
    """``ID:AXIS[:NAME]`` items (a list, or one string joined with '+')."""
    if isinstance(specs, str):
        specs = [specs]
    out = []
    for spec in specs:
        if not isinstance(spec, str):
            if isinstance(spec, tuple) and len(spec) in (2, 3):
                tid, axis, *name = spec
                out.append((_int(str(tid), "dynamic id", 0), _int(str(axis), "dynamic axis"), name[0] if name else None))
                continue
            raise OptionError(f"dynamic: {spec!r} must be 'ID:AXIS[:NAME]' or (id, axis[, name])")
        for item in filter(None, spec.split("+")):
            parts = item.split(":")
            if len(parts) not in (2, 3):
                raise OptionError(f"--dynamic: {item!r} must be ID:AXIS[:NAME]")
            name = parts[2] if len(parts) == 3 else None
            if name is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", name):
                raise OptionError(f"--dynamic: {name!r} is not a dimension name (letters, digits, '_', '.')")
            out.append((_int(parts[0], "--dynamic id", 0), _int(parts[1], "--dynamic axis"), name))
    return out


def parse_bindings(text: str) -> Dict[str, int]:
    """``seq=32,batch=2`` -> {"seq": 32, "batch": 2} (one binding of named dimensions)."""
    out = {}
    for item in filter(None, text.split(",")):
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise OptionError(f"shape binding {item!r} must be NAME=VALUE")
        out[name.strip()] = _int(value, f"value of {name}", 1)
    return out


def variants(text: Optional[str]) -> List[str]:
    """benchdnn's variant lists: ``a,b`` -> ["a", "b"]; ``,a`` -> ["", "a"]."""
    if text is None:
        return [""]
    return text.split(",")
