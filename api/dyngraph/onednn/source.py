"""What an imported graph was read from: the file's ops, each beside the
dyngraph ops the importer made of it (one op, a decomposition of several,
or a Wildcard), so that :func:`~.writer.to_json` writes the graph the user
gave (oneDNN's op kinds, attributes, ids and logical tensors as the file
had them, benchdnn's rewrites applied) rather than dyngraph's form of it.

A file's op is written back while every dyngraph op made of it is in the
graph as it was made (kind, name, attributes, tensors) and its tensors are
in the graph; otherwise the dyngraph ops are written in its place. The
record lives beside the graph (a weak mapping): the core ``Graph`` does not
know this front end.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set

from ..op import Op
from .document import Document, OpRec


def fingerprint(op: Op) -> str:
    """Everything of an op that the file's op stands for."""
    def lts(ts):
        return [(t.id, t.dtype, repr(t.shape), t.property) for t in ts]

    return repr((op.kind, op.name, sorted(op.attrs.items()), lts(op.inputs), lts(op.outputs)))


@dataclass
class Group:
    rec: OpRec  # the file's op (after benchdnn's rewrites)
    op_ids: List[int]  # the dyngraph ops made of it (none for End)


@dataclass
class Source:
    doc: Document
    groups: List[Group]
    reinferred: bool  # a rewrite changed shapes: the file's shapes of internal tensors no longer hold
    made: Dict[int, str] = field(default_factory=dict)  # dyngraph op id -> its fingerprint as made
    produced: Set[int] = field(default_factory=set)  # the file's tensors that an op produces

    def intact(self, group: Group, ops: Dict[int, Op], tensors: set) -> bool:
        """Whether the graph still holds the file's op as the importer made it."""
        for oid in group.op_ids:
            op = ops.get(oid)
            if op is None or fingerprint(op) != self.made.get(oid):
                return False
        return all(lt.id in tensors for lt in group.rec.inputs + group.rec.outputs)


_SOURCES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def attach(graph, doc: Document, groups: List[Group], reinferred: bool) -> Source:
    src = Source(doc, groups, reinferred, {op.id: fingerprint(op) for op in graph.get_ops()}, set(doc.produced()))
    _SOURCES[graph] = src
    return src


def source_of(graph) -> Optional[Source]:
    """The file a graph was imported from, if it was."""
    try:
        return _SOURCES.get(graph)
    except TypeError:  # not weakly referable: not a graph the importer made
        return None
