"""Serialize a :class:`~dyngraph.program.Program` to FlatBuffers bytes (schema/dyngraph_ir.fbs)."""

from __future__ import annotations

from typing import Dict, List, Mapping, NamedTuple, Optional

import flatbuffers
import numpy as np

from .fb import Attr, ExprNode, Guard, Op, Program as FbProgram, Symbol as FbSymbol, SymbolSource, Tensor, TensorData
from .ir_codes import (
    ATOM_CODE,
    DATA_ALIGN,
    DTYPE_CODE,
    IR_IDENTIFIER,
    IR_VERSION,
    PROPERTY_CODE,
    SOURCE_CODE,
    STORAGE_CODE,
    AttrType as _A,
    ExprOp as _E,
)
from .program import Program
from .symbolic import Expr, Symbol, OpAtom


class ExprTable:
    """Hash-consed expression DAG: each distinct sub-expression is one node."""

    def __init__(self, symbols: List[Symbol]):
        self.nodes: List[tuple] = []
        self._memo: Dict[tuple, int] = {}
        self._sym_index = {s: i for i, s in enumerate(symbols)}

    def _node(self, op: int, a: int, b: int = 0) -> int:
        key = (op, a, b)
        idx = self._memo.get(key)
        if idx is None:
            idx = len(self.nodes)
            self.nodes.append(key)
            self._memo[key] = idx
        return idx

    def const(self, v: int) -> int:
        return self._node(_E.CONST, int(v))

    def add(self, e) -> int:
        e = e if isinstance(e, Expr) else Expr.const(int(e))
        acc: Optional[int] = None
        # the constant term last, so expressions read "seq + 1" in messages
        for mono, coeff in sorted(e._terms, key=lambda mc: len(mc[0]) == 0):
            term: Optional[int] = None
            for atom in mono:
                a = self._atom(atom)
                term = a if term is None else self._node(_E.MUL, term, a)
            if term is None:
                term = self.const(coeff)
            elif coeff != 1:
                term = self._node(_E.MUL, self.const(coeff), term)
            acc = term if acc is None else self._node(_E.ADD, acc, term)
        return self.const(0) if acc is None else acc

    def _atom(self, atom) -> int:
        if isinstance(atom, Symbol):
            return self._node(_E.SYMBOL, self._sym_index[atom])
        assert isinstance(atom, OpAtom)
        return self._node(ATOM_CODE[atom.op], self.add(atom.a), self.add(atom.b))


def _aligned_bytes_vector(b: flatbuffers.Builder, data: np.ndarray) -> int:
    raw = memoryview(np.ascontiguousarray(data)).cast("B")
    n = raw.nbytes
    b.StartVector(1, n, DATA_ALIGN)
    b.head = b.head - n
    b.Bytes[b.head : b.head + n] = raw
    return b.EndVector()


def _int_vector(b: flatbuffers.Builder, start, values, prepend) -> int:
    start(b, len(values))
    for v in reversed(values):
        prepend(int(v))
    return b.EndVector()


class RawAttr(NamedTuple):
    """An attribute written as given, whatever the op's schema says: for
    tests of the reader (``OpSpec.attrs[name] = RawAttr(AttrType.FLOAT, [-1.0])``)."""

    type: int  # ir_codes.AttrType
    values: tuple  # ints, floats, one string, or expressions


def _write_attr(b: flatbuffers.Builder, name: str, spec_kind: str, value, exprs: ExprTable) -> int:
    """One attribute, stored as the IR type of its declared kind (what the C++ reader requires)."""
    name_off = b.CreateString(name)
    ints = floats = s = ex = None
    if isinstance(value, RawAttr):
        kind = value.type
        if kind in (_A.INT, _A.INTS):
            ints = list(value.values)
        elif kind in (_A.FLOAT, _A.FLOATS):
            floats = list(value.values)
        elif kind == _A.STRING:
            s = value.values[0]
        else:
            ex = [exprs.add(v) for v in value.values]
    elif spec_kind in ("int", "bool"):
        kind, ints = _A.INT, [int(value)]
    elif spec_kind == "dtype":
        kind, ints = _A.INT, [DTYPE_CODE[value]]
    elif spec_kind == "float":
        kind, floats = _A.FLOAT, [float(value)]
    elif spec_kind == "str":
        kind, s = _A.STRING, value
    elif spec_kind == "ints":
        kind, ints = _A.INTS, [int(v) for v in value]
    elif spec_kind == "floats":
        kind, floats = _A.FLOATS, [float(v) for v in value]
    elif spec_kind in ("expr", "exprs"):
        kind, ex = _A.EXPRS, [exprs.add(v) for v in value]
    else:
        raise TypeError(f"attribute {name!r}: cannot serialize {value!r} as {spec_kind}")
    ints_off = _int_vector(b, Attr.StartIntsVector, ints, b.PrependInt64) if ints is not None else None
    floats_off = None
    if floats is not None:
        Attr.StartFloatsVector(b, len(floats))
        for v in reversed(floats):
            b.PrependFloat64(v)
        floats_off = b.EndVector()
    s_off = b.CreateString(s) if s is not None else None
    ex_off = _int_vector(b, Attr.StartExprsVector, ex, b.PrependInt32) if ex is not None else None
    Attr.Start(b)
    Attr.AddName(b, name_off)
    Attr.AddType(b, kind)
    if ints_off is not None:
        Attr.AddInts(b, ints_off)
    if floats_off is not None:
        Attr.AddFloats(b, floats_off)
    if s_off is not None:
        Attr.AddStr(b, s_off)
    if ex_off is not None:
        Attr.AddExprs(b, ex_off)
    return Attr.End(b)



def write_program(prog: Program, data: Optional[Mapping[int, np.ndarray]] = None) -> bytes:
    """Serialize ``prog``. ``data`` maps tensor index -> bytes in the tensor's
    storage type (for CONSTANT tensors, and STATE tensors with an initial value)."""
    from .ops import schema_of

    data = dict(data or {})
    size_hint = sum(int(np.asarray(d).nbytes) + DATA_ALIGN for d in data.values()) + (1 << 16)
    b = flatbuffers.Builder(size_hint)
    exprs = ExprTable(prog.symbols)

    # tensor shapes, attrs, sources and guards add expression nodes: serialize them first
    tensor_shapes = [[exprs.add(d) for d in t.shape] for t in prog.tensors]
    op_attrs = []
    for op in prog.ops:
        schema = schema_of(op.kind)
        specs = {**schema.attrs, **schema.resolved}
        items = []
        for name in sorted(op.attrs):
            v = op.attrs[name]
            spec = specs.get(name)
            if isinstance(v, RawAttr):
                items.append((name, None, v))
                continue
            if spec is None:
                raise TypeError(f"op {op.name}: {op.kind.name} has no attribute {name!r}")
            if spec.kind in ("expr", "exprs"):
                v = tuple(Expr.const(x) if isinstance(x, int) else x for x in v)
            items.append((name, spec.kind, v))
        op_attrs.append(items)
    source_offsets = [exprs.add(s.offset) if s.offset is not None else -1 for s in prog.sources]
    guard_nodes = [(exprs.add(lhs), exprs.add(rhs)) for lhs, rhs, _ in prog.guards]

    # data (largest first is not needed: alignment is per vector)
    data_offs = []
    for tidx in sorted(data):
        vec = _aligned_bytes_vector(b, np.asarray(data[tidx]))
        TensorData.Start(b)
        TensorData.AddTensor(b, tidx)
        TensorData.AddData(b, vec)
        data_offs.append(TensorData.End(b))

    sym_offs = []
    for s in prog.symbols:
        n = b.CreateString(s.name)
        FbSymbol.Start(b)
        FbSymbol.AddName(b, n)
        FbSymbol.AddMin(b, s.min)
        FbSymbol.AddMax(b, s.max)
        sym_offs.append(FbSymbol.End(b))

    tensor_offs = []
    for t, shape in zip(prog.tensors, tensor_shapes):
        n = b.CreateString(t.name or "")
        sh = _int_vector(b, Tensor.StartShapeVector, shape, b.PrependInt32)
        Tensor.Start(b)
        Tensor.AddId(b, t.id)
        Tensor.AddName(b, n)
        Tensor.AddDtype(b, DTYPE_CODE[t.dtype])
        Tensor.AddShape(b, sh)
        Tensor.AddProperty(b, PROPERTY_CODE[t.property])
        Tensor.AddStorage(b, STORAGE_CODE[t.storage])
        tensor_offs.append(Tensor.End(b))

    op_offs = []
    for op, items in zip(prog.ops, op_attrs):
        attr_offs = [_write_attr(b, name, kind, v, exprs) for name, kind, v in items]
        n = b.CreateString(op.name or "")
        ins = _int_vector(b, Op.StartInputsVector, op.inputs, b.PrependInt32)
        outs = _int_vector(b, Op.StartOutputsVector, op.outputs, b.PrependInt32)
        Op.StartAttrsVector(b, len(attr_offs))
        for a in reversed(attr_offs):
            b.PrependUOffsetTRelative(a)
        attrs_vec = b.EndVector()
        Op.Start(b)
        Op.AddId(b, op.id)
        Op.AddKind(b, int(op.kind))
        Op.AddName(b, n)
        Op.AddInputs(b, ins)
        Op.AddOutputs(b, outs)
        Op.AddAttrs(b, attrs_vec)
        op_offs.append(Op.End(b))

    src_offs = []
    for s, off in zip(prog.sources, source_offsets):
        SymbolSource.Start(b)
        SymbolSource.AddSymbol(b, prog.symbols.index(s.symbol))
        SymbolSource.AddKind(b, SOURCE_CODE[s.kind])
        SymbolSource.AddInput(b, s.input)
        SymbolSource.AddIndex(b, s.index)
        SymbolSource.AddCoeff(b, s.coeff)
        SymbolSource.AddOffset(b, off)
        SymbolSource.AddRef(b, s.ref)
        SymbolSource.AddFlag(b, s.flag)
        src_offs.append(SymbolSource.End(b))

    guard_offs = []
    for (lhs, rhs), (_, _, msg) in zip(guard_nodes, prog.guards):
        m = b.CreateString(msg)
        Guard.Start(b)
        Guard.AddLhs(b, lhs)
        Guard.AddRhs(b, rhs)
        Guard.AddMessage(b, m)
        guard_offs.append(Guard.End(b))

    def table_vector(start, offs):
        start(b, len(offs))
        for o in reversed(offs):
            b.PrependUOffsetTRelative(o)
        return b.EndVector()

    FbProgram.StartExprsVector(b, len(exprs.nodes))
    for op, a, c in reversed(exprs.nodes):
        ExprNode.CreateExprNode(b, op, a, c)
    exprs_vec = b.EndVector()
    syms_vec = table_vector(FbProgram.StartSymbolsVector, sym_offs)
    tensors_vec = table_vector(FbProgram.StartTensorsVector, tensor_offs)
    ops_vec = table_vector(FbProgram.StartOpsVector, op_offs)
    ins_vec = _int_vector(b, FbProgram.StartInputsVector, prog.inputs, b.PrependInt32)
    outs_vec = _int_vector(b, FbProgram.StartOutputsVector, prog.outputs, b.PrependInt32)
    src_vec = table_vector(FbProgram.StartSourcesVector, src_offs)
    guard_vec = table_vector(FbProgram.StartGuardsVector, guard_offs)
    data_vec = table_vector(FbProgram.StartDataVector, data_offs)

    FbProgram.Start(b)
    FbProgram.AddVersion(b, IR_VERSION)
    FbProgram.AddSymbols(b, syms_vec)
    FbProgram.AddExprs(b, exprs_vec)
    FbProgram.AddTensors(b, tensors_vec)
    FbProgram.AddOps(b, ops_vec)
    FbProgram.AddInputs(b, ins_vec)
    FbProgram.AddOutputs(b, outs_vec)
    FbProgram.AddSources(b, src_vec)
    FbProgram.AddGuards(b, guard_vec)
    FbProgram.AddData(b, data_vec)
    root = FbProgram.End(b)
    b.Finish(root, file_identifier=IR_IDENTIFIER)
    return b.Output()
