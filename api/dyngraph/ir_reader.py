"""Read a serialized Program back, and check it as untrusted input.

The C++ runtime verifies the FlatBuffer and every index in it first
(``_backend.check_ir``); this module then rebuilds the Program and infers its
shapes again from its ops, so an IR whose recorded shapes, resolved
attributes or runtime checks disagree with the op rules is refused before
the backend builds anything from it.
"""

from __future__ import annotations

from typing import Dict, List

import numpy as np

from . import _backend
from .errors import DyngraphError, IRError
from .fb.Program import Program as FbProgram
from .inference import infer_op
from .ir_codes import CODE_ATOM, CODE_DTYPE, CODE_PROPERTY, CODE_SOURCE, AttrType, ExprOp
from .logical_tensor import Property
from .op import Op, OpKind
from .ops import TensorType, schema_of
from .program import STORAGE_TYPES, OpSpec, Program, SourceSpec, TensorSpec
from .symbolic import Expr, Symbol, as_expr, format_shape, sym_max, sym_min


# What reading or re-inferring a hostile IR can raise besides dyngraph's own
# errors; all of it becomes IRError (a file never escapes as an untyped error).
UNTRUSTED_ERRORS = (ArithmeticError, AttributeError, IndexError, KeyError, RecursionError, TypeError, ValueError)


def _s(b) -> str:
    return b.decode("utf-8", errors="replace") if b is not None else ""


# Bounds on the polynomials the expression table may build (the C++ reader has
# already bounded the node count, depth and nesting): a shared DAG such as
# x1 = x0*x0, x2 = x1*x1, ... would otherwise build x^(2^k).
MAX_TERMS = 128
MAX_DEGREE = 12
MAX_WORK = 2_000_000  # term products over the whole table
INT64 = 2**63


def _degree(e: Expr) -> int:
    return max((len(m) for m, _ in e._terms), default=0)


class _Budget:
    def __init__(self):
        self.work = 0

    def charge(self, i: int, a: Expr, b: Expr, op: int) -> None:
        if op == ExprOp.MUL:
            if _degree(a) + _degree(b) > MAX_DEGREE:
                raise IRError(f"malformed IR: expression node {i} has a degree above {MAX_DEGREE}")
            self.work += len(a._terms) * len(b._terms)
        else:
            self.work += len(a._terms) + len(b._terms)
        if self.work > MAX_WORK:
            raise IRError("malformed IR: the expression table is too complex to read")

    @staticmethod
    def check(i: int, e: Expr) -> Expr:
        if len(e._terms) > MAX_TERMS:
            raise IRError(f"malformed IR: expression node {i} has more than {MAX_TERMS} terms")
        if any(not -INT64 <= c < INT64 for _, c in e._terms):
            raise IRError(f"malformed IR: expression node {i} has a coefficient outside 64 bits")
        return e


def _expr_nodes(fb: FbProgram, symbols: List[Symbol]) -> List[Expr]:
    nodes: List[Expr] = []
    budget = _Budget()
    for i in range(fb.ExprsLength()):
        n = fb.Exprs(i)
        op, a, b = n.Op(), n.A(), n.B()
        if op == ExprOp.CONST:
            e = Expr.const(a)
        elif op == ExprOp.SYMBOL:
            e = Expr.symbol(symbols[a])
        else:
            budget.charge(i, nodes[a], nodes[b], op)
            if op == ExprOp.ADD:
                e = nodes[a] + nodes[b]
            elif op == ExprOp.SUB:
                e = nodes[a] - nodes[b]
            elif op == ExprOp.MUL:
                e = nodes[a] * nodes[b]
            elif op == ExprOp.MINIMUM:
                e = sym_min(nodes[a], nodes[b])
            elif op == ExprOp.MAXIMUM:
                e = sym_max(nodes[a], nodes[b])
            elif CODE_ATOM.get(op) == "floordiv":
                e = nodes[a] // nodes[b]
            else:
                e = nodes[a] % nodes[b]
        nodes.append(_Budget.check(i, e))
    return nodes


def _attr_value(a, exprs: List[Expr]):
    t = a.Type()
    if t == AttrType.INT:
        return int(a.Ints(0)) if a.IntsLength() else 0
    if t == AttrType.INTS:
        return tuple(_values(a.IntsAsNumpy()))
    if t == AttrType.FLOAT:
        return float(a.Floats(0)) if a.FloatsLength() else 0.0
    if t == AttrType.FLOATS:
        return tuple(_values(a.FloatsAsNumpy()))
    if t == AttrType.STRING:
        return _s(a.Str())
    return tuple(exprs[i] for i in _values(a.ExprsAsNumpy()))


def _values(vec) -> list:
    """A FlatBuffers scalar vector as Python numbers, read at once (the generated accessors'
    ``AsNumpy`` give 0 for an absent vector): element by element, a file of a few MB of
    op inputs took a minute."""
    return vec.tolist() if isinstance(vec, np.ndarray) else []


def read_program(buf) -> Program:
    """Parse IR bytes into a Program. Raises IRError when they are malformed."""
    _backend.check_ir(buf)  # verifies the FlatBuffer and every index before Python reads it
    try:
        fb = FbProgram.GetRootAs(buf, 0)
        symbols = []
        for i in range(fb.SymbolsLength()):
            s = fb.Symbols(i)
            symbols.append(Symbol(_s(s.Name()) or f"s{i}", s.Min(), s.Max()))
        exprs = _expr_nodes(fb, symbols)
        prog = Program(symbols=symbols)
        for i in range(fb.TensorsLength()):
            t = fb.Tensors(i)
            shape = tuple(exprs[d] for d in _values(t.ShapeAsNumpy()))
            prog.tensors.append(
                TensorSpec(int(t.Id()), _s(t.Name()), CODE_DTYPE[t.Dtype()], shape, CODE_PROPERTY[t.Property()], STORAGE_TYPES[t.Storage()])
            )
        for i in range(fb.OpsLength()):
            o = fb.Ops(i)
            attrs = {}
            for k in range(o.AttrsLength()):
                a = o.Attrs(k)
                attrs[_s(a.Name())] = _attr_value(a, exprs)
            prog.ops.append(
                OpSpec(
                    int(o.Id()),
                    OpKind(o.Kind()),
                    _s(o.Name()),
                    _values(o.InputsAsNumpy()),
                    _values(o.OutputsAsNumpy()),
                    attrs,
                )
            )
        prog.inputs = _values(fb.InputsAsNumpy())
        prog.outputs = _values(fb.OutputsAsNumpy())
        for i in range(fb.SourcesLength()):
            s = fb.Sources(i)
            off = exprs[s.Offset()] if s.Offset() >= 0 else None
            prog.sources.append(
                SourceSpec(symbols[s.Symbol()], CODE_SOURCE[s.Kind()], s.Input(), s.Index(), s.Coeff(), off, s.Ref(), s.Flag())
            )
        for i in range(fb.GuardsLength()):
            g = fb.Guards(i)
            prog.guards.append((exprs[g.Lhs()], exprs[g.Rhs()], _s(g.Message())))
    except IRError:
        raise
    except DyngraphError as e:
        raise IRError(f"malformed IR: {e}") from e
    except UNTRUSTED_ERRORS as e:
        raise IRError(f"malformed IR: {type(e).__name__}: {e}") from e
    return prog


def _same(a, b) -> bool:
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, (int, Expr)) and isinstance(b, (int, Expr)) and not isinstance(a, bool) and not isinstance(b, bool):
        return as_expr(a) == as_expr(b)
    return a == b


def _adopt_value_symbols(prog: Program, spec: OpSpec, ctx, outs, attrs, where: str):
    """Re-inference made fresh symbols for values read at execution: match them
    with the ones the IR records (by position), and check their sources."""
    fresh = {vs.symbol for vs in ctx.value_symbols}
    mapping = {}
    recorded = [d for i in spec.outputs for d in prog.tensors[i].shape] + list(spec.attrs.get("perm", ()))
    inferred = [d for t in outs for d in t.shape] + list(attrs.get("perm", ()))
    for e, r in zip(inferred, recorded):
        s, rs = e.as_symbol(), as_expr(r).as_symbol()
        if s in fresh and rs is not None:
            mapping[s] = rs
    sources = {src.symbol: src for src in prog.sources}
    for vs in ctx.value_symbols:
        rs = mapping.get(vs.symbol)
        src = sources.get(rs)
        ok = (
            src is not None
            and src.kind == vs.kind
            and src.index == vs.index
            and src.flag == vs.flag
            and src.ref == spec.inputs[vs.ref]
            and 0 <= src.input < len(prog.inputs)
            and prog.inputs[src.input] == spec.inputs[vs.input]
        )
        if not ok:
            raise IRError(f"malformed IR: {where}: the symbol for its {vs.kind} value {vs.index} has no matching source")
    env = {k: Expr.symbol(v) for k, v in mapping.items()}
    outs = [TensorType(t.dtype, tuple(d.substitute(env) for d in t.shape)) for t in outs]
    attrs = dict(attrs)
    if "perm" in attrs:
        attrs["perm"] = tuple(as_expr(d).substitute(env) for d in attrs["perm"])
    return outs, attrs


def validate_program(prog: Program) -> None:
    """Infer the program's shapes again and compare with what it records.
    Raises IRError (only) when they disagree or the program is malformed."""
    try:
        _validate(prog)
    except IRError:
        raise
    except DyngraphError as e:
        raise IRError(f"malformed IR: {e}") from e
    except UNTRUSTED_ERRORS as e:
        raise IRError(f"malformed IR: {type(e).__name__}: {e}") from e


def _validate(prog: Program) -> None:
    types: Dict[int, TensorType] = {}
    produced = {i for op in prog.ops for i in op.outputs}
    for i, t in enumerate(prog.tensors):
        if i not in produced:
            types[i] = TensorType(t.dtype, t.shape)
    recorded_guards = {(lhs, rhs) for lhs, rhs, _ in prog.guards}
    recorded_guards |= {(rhs, lhs) for lhs, rhs in list(recorded_guards)}
    try:
        lts = [t.logical_tensor() for t in prog.tensors]
    except DyngraphError as e:
        raise IRError(f"malformed IR: {e}") from e
    for spec in prog.ops:
        schema = schema_of(spec.kind)
        where = f"op '{spec.name}' ({spec.kind.name})"
        if schema is None:
            raise IRError(f"malformed IR: {where} has no shape rule")
        user = {k: v for k, v in spec.attrs.items() if k in schema.attrs}
        resolved = {k: v for k, v in spec.attrs.items() if k not in schema.attrs}
        # outputs undeclared: the inferred shapes are compared with the recorded ones below
        outs_decl = [lts[i].with_shape(None) for i in spec.outputs]
        op = Op(max(spec.id, 0), spec.kind, [lts[i] for i in spec.inputs], outs_decl, user, spec.name)
        try:
            outs, ctx, attrs = infer_op(op, [types[i] for i in spec.inputs])
        except DyngraphError as e:
            raise IRError(f"malformed IR: {where}: {e}") from e
        except UNTRUSTED_ERRORS as e:
            raise IRError(f"malformed IR: {where}: {type(e).__name__}: {e}") from e
        if ctx.value_symbols:
            outs, attrs = _adopt_value_symbols(prog, spec, ctx, outs, attrs, where)
        for i, t in zip(spec.outputs, outs):
            rec = prog.tensors[i]
            if t.dtype is not rec.dtype or t.shape != rec.shape:
                raise IRError(
                    f"malformed IR: {where} produces {t.dtype} {format_shape(t.shape)} for tensor {rec.name or rec.id}, "
                    f"the IR records {rec.dtype} {format_shape(rec.shape)}"
                )
            types[i] = t
        for k, v in resolved.items():
            if k not in attrs or not _same(attrs[k], v):
                raise IRError(f"malformed IR: {where}: attribute {k!r} is {v!r}, the op rule resolves {attrs.get(k)!r}")
        for k in ctx.backend_attrs:
            if k not in resolved:
                raise IRError(f"malformed IR: {where}: attribute {k!r} is missing")
        for lhs, rhs, _ in ctx.guards:
            if lhs != rhs and (lhs, rhs) not in recorded_guards:
                raise IRError(f"malformed IR: {where}: the shape check {lhs} == {rhs} is missing")
    for i in prog.inputs:
        if prog.tensors[i].property is not Property.VARIABLE:
            raise IRError("malformed IR: a runtime input is not a VARIABLE tensor")
