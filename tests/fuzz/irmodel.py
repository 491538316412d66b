"""The dyngraph IR (schema/dyngraph_ir.fbs) as plain Python data, decoded and
encoded by FlatBuffers offsets.

The fuzzer mutates this model and encodes it again, so a structural mutation
(a dimension, an expression node, an attribute) reaches the parser as a
well-formed FlatBuffer. It does not import dyngraph (the fuzzer's parent
process never loads the extension) and writes whatever values it is given,
including enum codes and indices the schema does not allow.

Field slots follow the schema's declaration order; keep them in step with
schema/dyngraph_ir.fbs (test_irmodel_roundtrips_the_seeds checks a round trip).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import List, Optional

import flatbuffers
from flatbuffers import number_types as N
from flatbuffers.table import Table

IDENTIFIER = b"DGIR"
INT64_MAX = (1 << 63) - 1


@dataclass
class Symbol:
    name: Optional[str] = None
    min: int = 1
    max: int = INT64_MAX


@dataclass
class Tensor:
    id: int = 0
    name: Optional[str] = None
    dtype: int = 0
    shape: Optional[List[int]] = None
    property: int = 0
    storage: int = 0


@dataclass
class Attr:
    name: Optional[str] = None
    type: int = 0
    ints: Optional[List[int]] = None
    floats: Optional[List[float]] = None
    str: Optional[str] = None
    exprs: Optional[List[int]] = None


@dataclass
class Op:
    id: int = 0
    kind: int = 0
    name: Optional[str] = None
    inputs: Optional[List[int]] = None
    outputs: Optional[List[int]] = None
    attrs: Optional[List[Attr]] = None


@dataclass
class Source:
    symbol: int = 0
    kind: int = 0
    input: int = 0
    index: int = 0
    coeff: int = 1
    offset: int = -1
    ref: int = -1
    flag: int = 0


@dataclass
class Guard:
    lhs: int = 0
    rhs: int = 0
    message: Optional[str] = None


@dataclass
class Data:
    tensor: int = 0
    data: Optional[bytes] = None
    align: int = 64  # alignment the encoder gives the byte vector (the writer's DATA_ALIGN)


@dataclass
class Program:
    version: int = 1
    symbols: Optional[List[Symbol]] = None
    exprs: Optional[List[tuple]] = None  # (op, a, b)
    tensors: Optional[List[Tensor]] = None
    ops: Optional[List[Op]] = None
    inputs: Optional[List[int]] = None
    outputs: Optional[List[int]] = None
    sources: Optional[List[Source]] = None
    guards: Optional[List[Guard]] = None
    data: Optional[List[Data]] = None

    def clone(self) -> "Program":
        """A copy whose lists can be mutated (data bytes are shared: they are immutable)."""
        def lst(v):
            return None if v is None else list(v)

        def each(v, f):
            return None if v is None else [f(x) for x in v]

        return Program(
            self.version,
            each(self.symbols, lambda s: Symbol(s.name, s.min, s.max)),
            lst(self.exprs),
            each(self.tensors, lambda t: Tensor(t.id, t.name, t.dtype, lst(t.shape), t.property, t.storage)),
            each(self.ops, lambda o: Op(o.id, o.kind, o.name, lst(o.inputs), lst(o.outputs), each(
                o.attrs, lambda a: Attr(a.name, a.type, lst(a.ints), lst(a.floats), a.str, lst(a.exprs))))),
            lst(self.inputs),
            lst(self.outputs),
            each(self.sources, lambda s: Source(**vars(s))),
            each(self.guards, lambda g: Guard(g.lhs, g.rhs, g.message)),
            each(self.data, lambda d: Data(d.tensor, d.data, d.align)),
        )


# ---------------------------------------------------------------- decoding


def _slot(i: int) -> int:
    return 4 + 2 * i


class _T:
    def __init__(self, buf, pos):
        self.t = Table(buf, pos)

    def _off(self, i):
        return self.t.Offset(_slot(i))

    def scalar(self, i, flags, default):
        o = self._off(i)
        return self.t.Get(flags, o + self.t.Pos) if o else default

    def string(self, i):
        o = self._off(i)
        return self.t.String(o + self.t.Pos).decode("utf-8", "replace") if o else None

    def vector(self, i, fmt, size):
        o = self._off(i)
        if not o:
            return None
        start = self.t.Vector(o)
        n = self.t.VectorLen(o)
        return list(struct.unpack_from(f"<{n}{fmt}", self.t.Bytes, start)) if n else []

    def bytes_(self, i):
        o = self._off(i)
        if not o:
            return None
        start = self.t.Vector(o)
        n = self.t.VectorLen(o)
        return bytes(self.t.Bytes[start : start + n])

    def tables(self, i):
        o = self._off(i)
        if not o:
            return None
        start = self.t.Vector(o)
        n = self.t.VectorLen(o)
        out = []
        for k in range(n):
            p = start + 4 * k
            out.append(_T(self.t.Bytes, self.t.Indirect(p)))
        return out

    def structs(self, i, size):
        o = self._off(i)
        if not o:
            return None
        start = self.t.Vector(o)
        n = self.t.VectorLen(o)
        return [start + size * k for k in range(n)]


def body_offset(buf: bytes) -> int:
    """Where the FlatBuffer starts in a saved file: 0 for a bare IR, else the
    offset of the first plausible root (a header may come first)."""
    if len(buf) >= 8 and buf[4:8] == IDENTIFIER:
        return 0
    i = buf.find(IDENTIFIER, 4)
    while i != -1:
        start = i - 4
        root = struct.unpack_from("<I", buf, start)[0]
        if 8 <= root < len(buf) - start:
            return start
        i = buf.find(IDENTIFIER, i + 1)
    raise ValueError("no dyngraph IR in the buffer")


def decode(buf: bytes) -> Program:
    """Decode a bare IR FlatBuffer (no header). Trusts the buffer: use it on
    files the library wrote, or on bytes the C++ verifier accepted."""
    buf = bytes(buf)
    root = struct.unpack_from("<I", buf, 0)[0]
    p = _T(buf, root)
    prog = Program(version=p.scalar(0, N.Uint32Flags, 1))
    syms = p.tables(1)
    if syms is not None:
        prog.symbols = [Symbol(s.string(0), s.scalar(1, N.Int64Flags, 1), s.scalar(2, N.Int64Flags, INT64_MAX)) for s in syms]
    ex = p.structs(2, 24)
    if ex is not None:
        prog.exprs = [(struct.unpack_from("<b", buf, s)[0],) + struct.unpack_from("<qq", buf, s + 8) for s in ex]
    ts = p.tables(3)
    if ts is not None:
        prog.tensors = [
            Tensor(t.scalar(0, N.Int64Flags, 0), t.string(1), t.scalar(2, N.Int8Flags, 0), t.vector(3, "i", 4),
                   t.scalar(4, N.Int8Flags, 0), t.scalar(5, N.Int8Flags, 0))
            for t in ts
        ]
    ops = p.tables(4)
    if ops is not None:
        prog.ops = []
        for o in ops:
            attrs = o.tables(5)
            if attrs is not None:
                attrs = [Attr(a.string(0), a.scalar(1, N.Int8Flags, 0), a.vector(2, "q", 8), a.vector(3, "d", 8), a.string(4),
                              a.vector(5, "i", 4)) for a in attrs]
            prog.ops.append(Op(o.scalar(0, N.Int64Flags, 0), o.scalar(1, N.Uint16Flags, 0), o.string(2), o.vector(3, "i", 4),
                               o.vector(4, "i", 4), attrs))
    prog.inputs = p.vector(5, "i", 4)
    prog.outputs = p.vector(6, "i", 4)
    srcs = p.tables(7)
    if srcs is not None:
        prog.sources = [
            Source(s.scalar(0, N.Int32Flags, 0), s.scalar(1, N.Int8Flags, 0), s.scalar(2, N.Int32Flags, 0),
                   s.scalar(3, N.Int32Flags, 0), s.scalar(4, N.Int64Flags, 1), s.scalar(5, N.Int32Flags, -1),
                   s.scalar(6, N.Int32Flags, -1), s.scalar(7, N.Int64Flags, 0))
            for s in srcs
        ]
    gs = p.tables(8)
    if gs is not None:
        prog.guards = [Guard(g.scalar(0, N.Int32Flags, 0), g.scalar(1, N.Int32Flags, 0), g.string(2)) for g in gs]
    ds = p.tables(9)
    if ds is not None:
        prog.data = [Data(d.scalar(0, N.Int32Flags, 0), d.bytes_(1)) for d in ds]
    return prog


# ---------------------------------------------------------------- encoding


_EXPR = struct.Struct("<b7xqq")


def _wrap(v: int, bits: int, signed: bool = True) -> int:
    """Two's-complement wrap, so any Python int a mutator made fits its field."""
    v &= (1 << bits) - 1
    if signed and v >= 1 << (bits - 1):
        v -= 1 << bits
    return v


def _ints(b: flatbuffers.Builder, values, bits: int) -> int:
    size = bits // 8
    raw = struct.pack(f"<{len(values)}{'i' if bits == 32 else 'q'}", *(_wrap(int(v), bits) for v in values))
    b.StartVector(size, len(values), size)
    b.head = b.head - len(raw)
    b.Bytes[b.head : b.head + len(raw)] = raw
    return b.EndVector()


def _floats(b: flatbuffers.Builder, values) -> int:
    b.StartVector(8, len(values), 8)
    for v in reversed(values):
        b.PrependFloat64(float(v))
    return b.EndVector()


def _bytes(b: flatbuffers.Builder, data: bytes, align: int) -> int:
    n = len(data)
    b.StartVector(1, n, max(1, align))
    b.head = b.head - n
    b.Bytes[b.head : b.head + n] = data
    return b.EndVector()


def _tables(b: flatbuffers.Builder, offs) -> int:
    b.StartVector(4, len(offs), 4)
    for o in reversed(offs):
        b.PrependUOffsetTRelative(o)
    return b.EndVector()


class _Memo:
    """With share on, a vector or string equal to one already written is not written again:
    every table that holds it refers to the one copy (FlatBuffers allows it, the verifier
    does not look, and a reader that copies per reference must count the copies)."""

    def __init__(self, b: flatbuffers.Builder, share: bool):
        self.b, self.seen = b, {} if share else None

    def __call__(self, key, make):
        if self.seen is None:
            return make()
        if key not in self.seen:
            self.seen[key] = make()
        return self.seen[key]

    def ints(self, values, bits):
        return None if values is None else self(("i", bits, tuple(values)), lambda: _ints(self.b, values, bits))

    def str(self, s):
        return None if s is None else self(("s", s), lambda: self.b.CreateString(s))


def _i(b, slot, v, default, bits=32):
    (b.PrependInt32Slot if bits == 32 else b.PrependInt64Slot)(slot, _wrap(int(v), bits), default)


def _i8(b, slot, v, default):
    b.PrependInt8Slot(slot, _wrap(int(v), 8), default)


def _off(b, slot, o):
    if o is not None:
        b.PrependUOffsetTRelativeSlot(slot, o, 0)


def encode(prog: Program, misalign_data: bool = False, share: bool = False) -> bytes:
    """Encode the model as a bare IR FlatBuffer with the 'DGIR' identifier; with `share`,
    equal int vectors and strings are written once and referred to by every table that
    holds them."""
    size = sum(len(d.data or b"") + 64 for d in prog.data or []) + (1 << 16)
    b = flatbuffers.Builder(size)
    memo = _Memo(b, share)

    data_offs = None
    if prog.data is not None:
        data_offs = []
        for d in prog.data:
            vec = _bytes(b, d.data, 1 if misalign_data else d.align) if d.data is not None else None
            if misalign_data and d.data is not None:
                b.Pad(1)  # the next object shifts the vector off its natural alignment
            b.StartObject(2)
            _i(b, 0, d.tensor, 0)
            _off(b, 1, vec)
            data_offs.append(b.EndObject())

    sym_offs = None
    if prog.symbols is not None:
        sym_offs = []
        for s in prog.symbols:
            n = memo.str(s.name)
            b.StartObject(3)
            _off(b, 0, n)
            _i(b, 1, s.min, 1, 64)
            _i(b, 2, s.max, INT64_MAX, 64)
            sym_offs.append(b.EndObject())

    tensor_offs = None
    if prog.tensors is not None:
        tensor_offs = []
        for t in prog.tensors:
            n = memo.str(t.name)
            sh = memo.ints(t.shape, 32)
            b.StartObject(6)
            _i(b, 0, t.id, 0, 64)
            _off(b, 1, n)
            _i8(b, 2, t.dtype, 0)
            _off(b, 3, sh)
            _i8(b, 4, t.property, 0)
            _i8(b, 5, t.storage, 0)
            tensor_offs.append(b.EndObject())

    op_offs = None
    if prog.ops is not None:
        op_offs = []
        for o in prog.ops:
            attr_vec = None
            if o.attrs is not None:
                aoffs = []
                for a in o.attrs:
                    n = memo.str(a.name)
                    iv = memo.ints(a.ints, 64)
                    fv = _floats(b, a.floats) if a.floats is not None else None
                    sv = memo.str(a.str)
                    ev = memo.ints(a.exprs, 32)
                    b.StartObject(6)
                    _off(b, 0, n)
                    _i8(b, 1, a.type, 0)
                    _off(b, 2, iv)
                    _off(b, 3, fv)
                    _off(b, 4, sv)
                    _off(b, 5, ev)
                    aoffs.append(b.EndObject())
                attr_vec = _tables(b, aoffs)
            n = memo.str(o.name)
            ins = memo.ints(o.inputs, 32)
            outs = memo.ints(o.outputs, 32)
            b.StartObject(6)
            _i(b, 0, o.id, 0, 64)
            b.PrependUint16Slot(1, int(o.kind) & 0xFFFF, 0)
            _off(b, 2, n)
            _off(b, 3, ins)
            _off(b, 4, outs)
            _off(b, 5, attr_vec)
            op_offs.append(b.EndObject())

    src_offs = None
    if prog.sources is not None:
        src_offs = []
        for s in prog.sources:
            b.StartObject(8)
            _i(b, 0, s.symbol, 0)
            _i8(b, 1, s.kind, 0)
            _i(b, 2, s.input, 0)
            _i(b, 3, s.index, 0)
            _i(b, 4, s.coeff, 1, 64)
            _i(b, 5, s.offset, -1)
            _i(b, 6, s.ref, -1)
            _i(b, 7, s.flag, 0, 64)
            src_offs.append(b.EndObject())

    guard_offs = None
    if prog.guards is not None:
        guard_offs = []
        for g in prog.guards:
            m = memo.str(g.message)
            b.StartObject(3)
            _i(b, 0, g.lhs, 0)
            _i(b, 1, g.rhs, 0)
            _off(b, 2, m)
            guard_offs.append(b.EndObject())

    exprs_vec = None
    if prog.exprs is not None:
        raw = b"".join(_EXPR.pack(_wrap(int(op), 8), _wrap(int(a), 64), _wrap(int(c), 64)) for op, a, c in prog.exprs)
        b.StartVector(24, len(prog.exprs), 8)
        b.head = b.head - len(raw)
        b.Bytes[b.head : b.head + len(raw)] = raw
        exprs_vec = b.EndVector()
    syms_vec = _tables(b, sym_offs) if sym_offs is not None else None
    tensors_vec = _tables(b, tensor_offs) if tensor_offs is not None else None
    ops_vec = _tables(b, op_offs) if op_offs is not None else None
    ins_vec = memo.ints(prog.inputs, 32)
    outs_vec = memo.ints(prog.outputs, 32)
    src_vec = _tables(b, src_offs) if src_offs is not None else None
    guard_vec = _tables(b, guard_offs) if guard_offs is not None else None
    data_vec = _tables(b, data_offs) if data_offs is not None else None

    b.StartObject(10)
    b.PrependUint32Slot(0, int(prog.version) & 0xFFFFFFFF, 1)
    for slot, o in enumerate((syms_vec, exprs_vec, tensors_vec, ops_vec, ins_vec, outs_vec, src_vec, guard_vec, data_vec), 1):
        _off(b, slot, o)
    root = b.EndObject()
    b.Finish(root, file_identifier=IDENTIFIER)
    return bytes(b.Output())


__all__ = ["Attr", "Data", "Guard", "IDENTIFIER", "Op", "Program", "Source", "Symbol", "Tensor", "body_offset", "decode",
           "encode"]
