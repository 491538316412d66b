"""State tensors and the ops that update them in place.

A STATE tensor is owned by the compiled partition. An op that writes it
(ScatterRows, CopyToSlice with the state as destination) updates it in place,
and its output is the state's new version; a later write may take that
version as its destination, and so on. Because the write happens in place, a
version that is written again may not be read by anything else (the reader
would see the later value): readers use the last version.
"""

from __future__ import annotations

from typing import Callable, Dict, Iterable

from .errors import CompileError
from .logical_tensor import Property
from .op import Op
from .ops import schema_of


def written_input(op) -> "int | None":
    """The input an op writes in place when it is state (its schema's trait), or None."""
    s = schema_of(op.kind)
    return s.writes_input if s is not None else None


def state_versions(ops: Iterable[Op], property_of: Callable[[int], Property]) -> Dict[int, int]:
    """tensor id -> id of the state tensor it is a version of (states map to themselves)."""
    root: Dict[int, int] = {}
    for op in ops:
        w = written_input(op)
        if w is not None:
            dst = op.inputs[w].id
            s = dst if property_of(dst) is Property.STATE else root.get(dst)
            if s is not None:
                root.setdefault(dst, s)
                root[op.outputs[0].id] = s
    return root


def check_state_writes(ops, property_of: Callable[[int], Property]) -> Dict[int, int]:
    """Refuse reads of a state version that is written again; return the versions."""
    ops = list(ops)
    versions = state_versions(ops, property_of)
    readers: Dict[int, list] = {}  # version id -> the ops reading it, in order (one scan, not one per write)
    for op in ops:
        for t in op.inputs:
            if t.id in versions:
                readers.setdefault(t.id, []).append(op)
    for op in ops:
        w = written_input(op)
        if w is None or op.inputs[w].id not in versions:
            continue
        written = op.inputs[w].id
        for other in readers[written]:
            if other is not op:
                raise CompileError(
                    f"state tensor {versions[written]}: {other.label} reads a version that {op.label} then writes "
                    f"in place; read the written result instead"
                )
    return versions
