"""Taking IRs apart and putting them back together, to write hostile ones:
``unpack`` gives the FlatBuffers object tree (api/dyngraph/fb, generated with
flatc's object API), which any field of can be set to anything; ``pack``
writes it back; ``seal`` makes a loadable file of it (header and checksum)."""

from __future__ import annotations

import flatbuffers

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


__all__ = ["ExprOp", "append_nodes", "body_of", "node", "pack", "seal", "unpack"]
