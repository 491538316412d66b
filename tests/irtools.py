"""Taking IRs apart and putting them back together, to write hostile ones:
``unpack`` gives the FlatBuffers object tree (api/dyngraph/fb, generated with
flatc's object API), which any field of can be set to anything; ``pack``
writes it back; ``seal`` makes a loadable file of it (header and checksum)."""

from __future__ import annotations

import flatbuffers
import numpy as np

from dyngraph.fb import Op as FbOp
from dyngraph.fb.ExprNode import ExprNodeT
from dyngraph.fb.Program import Program, ProgramT
from dyngraph.ir_codes import ExprOp, IR_IDENTIFIER
from dyngraph.serialization import HEADER_SIZE, seal


def unpack(body: bytes) -> ProgramT:
    return ProgramT.InitFromBuf(body, Program.GetRootAs(body, 0)._tab.Pos)


def pack(t: ProgramT) -> bytes:
    b = flatbuffers.Builder(1024)
    b.Finish(t.Pack(b), file_identifier=IR_IDENTIFIER)
    return bytes(b.Output())


def body_of(file_bytes: bytes) -> bytes:
    return file_bytes[HEADER_SIZE:]


def node(op: int, a: int = 0, b: int = 0) -> ExprNodeT:
    n = ExprNodeT()
    n.op, n.a, n.b = op, a, b
    return n


def append_nodes(t: ProgramT, nodes) -> int:
    """Append expression nodes; returns the index of the last one."""
    t.exprs = list(t.exprs or []) + list(nodes)
    return len(t.exprs) - 1


class _OpSharing:
    """An op of a ProgramT packed by pack_sharing: its inputs vector and name string are those of the first op
    packed (FlatBuffers lets any number of tables refer to one vector; dyngraph's writer never does)."""

    def __init__(self, op, shared: dict):
        self.op, self.shared = op, shared

    def Pack(self, b):
        o, shared = self.op, self.shared
        if "inputs" not in shared:
            shared["inputs"] = b.CreateNumpyVector(np.asarray(o.inputs, np.int32))
            shared["name"] = b.CreateString(o.name or "")
        outputs = b.CreateNumpyVector(np.asarray(o.outputs, np.int32))
        attrs = [a.Pack(b) for a in (o.attrs or [])]
        FbOp.StartAttrsVector(b, len(attrs))
        for a in reversed(attrs):
            b.PrependUOffsetTRelative(a)
        attrs_vec = b.EndVector()
        FbOp.Start(b)
        FbOp.AddId(b, o.id)
        FbOp.AddKind(b, o.kind)
        FbOp.AddName(b, shared["name"])
        FbOp.AddInputs(b, shared["inputs"])
        FbOp.AddOutputs(b, outputs)
        FbOp.AddAttrs(b, attrs_vec)
        return FbOp.End(b)


def pack_sharing(t: ProgramT) -> bytes:
    """pack, with every op referring to the first op's inputs vector and name string."""
    shared: dict = {}
    ops = t.ops
    t.ops = [_OpSharing(o, shared) for o in ops]
    try:
        return pack(t)
    finally:
        t.ops = ops


__all__ = ["ExprOp", "append_nodes", "body_of", "node", "pack", "pack_sharing", "seal", "unpack"]
