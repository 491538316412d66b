"""Read a serialized Program back, and check it as untrusted input.

The C++ runtime verifies the FlatBuffer and every index in it first and
hands over its tables (``_backend.read_ir``); this module then rebuilds the
Program and infers its shapes again from its ops, so an IR whose recorded
shapes, resolved attributes or runtime checks disagree with the op rules is
refused before the backend builds anything from it.
"""

from __future__ import annotations

from typing import Dict, List

from . import _backend
from .errors import DyngraphError, IRError
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


def _expr_nodes(table: list, symbols: List[Symbol]) -> List[Expr]:
    nodes: List[Expr] = []
    budget = _Budget()
    for i, (op, a, b) in enumerate(table):
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


def _attr_value(kind: int, ints: list, floats: list, text: str, expr_ids: list, exprs: List[Expr]):
    if kind == AttrType.INT:
        return ints[0] if ints else 0
    if kind == AttrType.INTS:
        return tuple(ints)
    if kind == AttrType.FLOAT:
        return floats[0] if floats else 0.0
    if kind == AttrType.FLOATS:
        return tuple(floats)
    if kind == AttrType.STRING:
        return text
    return tuple(exprs[i] for i in expr_ids)


def read_program(buf) -> Program:
    """Parse IR bytes into a Program. Raises IRError when they are malformed.

    The C++ reader verifies the FlatBuffer and every index, and hands over its
    tables as Python values (``_backend.read_ir``): read field by field through
    the generated FlatBuffers accessors, a program of 20,000 ops took 3 s."""
    tables = _backend.read_ir(buf)
    try:
        symbols = [Symbol(name or f"s{i}", lo, hi) for i, (name, lo, hi) in enumerate(tables["symbols"])]
        exprs = _expr_nodes(tables["exprs"], symbols)
        prog = Program(symbols=symbols)
        prog.tensors = [
            TensorSpec(tid, name, CODE_DTYPE[dt], tuple(exprs[d] for d in shape), CODE_PROPERTY[prop], STORAGE_TYPES[st])
            for tid, name, dt, shape, prop, st in tables["tensors"]
        ]
        for oid, kind, name, inputs, outputs, attrs in tables["ops"]:
            values = {a[0]: _attr_value(*a[1:], exprs) for a in attrs}
            prog.ops.append(OpSpec(oid, OpKind(kind), name, inputs, outputs, values))
        prog.inputs = tables["inputs"]
        prog.outputs = tables["outputs"]
        for sym, kind, inp, index, coeff, offset, ref, flag in tables["sources"]:
            off = exprs[offset] if offset >= 0 else None
            prog.sources.append(SourceSpec(symbols[sym], CODE_SOURCE[kind], inp, index, coeff, off, ref, flag))
        prog.guards = [(exprs[lhs], exprs[rhs], message) for lhs, rhs, message in tables["guards"]]
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
