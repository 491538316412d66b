"""Symbolic shape inference over a list of ops in execution order.

Used by Graph.finalize (to fill in UNKNOWN_DIMs and reject inconsistent
graphs), by compile (with the compile-time input shapes) and by load (to
re-check an IR read from a file).
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from .errors import DTypeError, GraphError, ShapeError
from .logical_tensor import MAX_RANK, LogicalTensor
from .op import Op
from .ops import InferContext, TensorType, schema_of
from .op_pipeline import infer_new_op
from .ops.registry import check_arity
from .symbolic import DYNAMIC_DIM, UNKNOWN_DIM, Expr, Symbol, as_expr, format_shape

Guard = Tuple[Expr, Expr, str]


def dim_symbol_name(lt: LogicalTensor, d: int) -> str:
    return f"{lt.name or 't' + str(lt.id)}.dim{d}"


def type_of(lt: LogicalTensor, symbols: Dict[Tuple[int, int], Symbol]) -> Optional[TensorType]:
    """The TensorType a declared logical tensor describes, or None when a
    dimension (or the rank) is UNKNOWN. Each DYNAMIC_DIM becomes a symbol of
    its own, remembered in ``symbols`` by (tensor id, dim)."""
    if lt.shape is None:
        return None
    dims = []
    for d, v in enumerate(lt.shape):
        if v is UNKNOWN_DIM:
            return None
        if v is DYNAMIC_DIM:
            key = (lt.id, d)
            if key not in symbols:
                symbols[key] = Symbol(dim_symbol_name(lt, d))
            dims.append(Expr.symbol(symbols[key]))
        else:
            dims.append(as_expr(v))
    return TensorType(lt.dtype, tuple(dims))


def reconcile(declared: LogicalTensor, inferred: TensorType, ctx: InferContext) -> TensorType:
    """Check a declared output logical tensor against what the rule inferred."""
    if declared.dtype is not inferred.dtype:
        raise DTypeError(
            f"{ctx.op_label}: output {declared.label} is declared {declared.dtype}, the op produces {inferred.dtype}"
        )
    if declared.shape is None:
        return inferred
    if len(declared.shape) != inferred.rank:
        raise ShapeError(
            f"{ctx.op_label}: output {declared.label} is declared with shape {format_shape(declared.shape)}, "
            f"the op produces rank {inferred.rank}: {format_shape(inferred.shape)}"
        )
    for d, (v, e) in enumerate(zip(declared.shape, inferred.shape)):
        if v is UNKNOWN_DIM or v is DYNAMIC_DIM:
            continue
        v = as_expr(v)
        if v == e:
            continue
        if v.is_const:
            ctx.equal(e, v, f"output {declared.label} dimension {d} (declared {v})")
            continue
        raise ShapeError(
            f"{ctx.op_label}: output {declared.label} dimension {d} is declared {v}, the op produces {e}"
        )
    return inferred


def check_rank(lt_label: str, t: TensorType) -> None:
    if t.rank > MAX_RANK:
        raise ShapeError(f"tensor {lt_label}: rank {t.rank} is above the supported maximum of {MAX_RANK}")


class ValueSource:
    """A symbol read from the values of a shape input (tensor ids, not op positions)."""

    def __init__(self, vs, op: Op):
        self.symbol = vs.symbol
        self.kind = vs.kind
        self.input_id = op.inputs[vs.input].id
        self.index = vs.index
        self.ref_id = op.inputs[vs.ref].id
        self.flag = vs.flag
        self.op_label = op.label


class InferResult:
    def __init__(self):
        self.types: Dict[int, Optional[TensorType]] = {}
        self.guards: List[Guard] = []
        self.attrs: Dict[int, dict] = {}  # op id -> normalized attrs (+ backend-resolved ones)
        self.value_sources: List[ValueSource] = []


def infer_op(op: Op, in_types: Sequence[TensorType]) -> Tuple[List[TensorType], InferContext, dict]:
    schema = schema_of(op.kind)
    if schema is None:
        raise GraphError(f"{op.label}: no shape rule for op kind {op.kind.name}")
    outs, ctx, attrs = infer_new_op(schema, op.attrs, in_types, len(op.outputs), op.label, op.name, op.outputs)
    outs = [reconcile(lt, t, ctx) for lt, t in zip(op.outputs, outs)]
    return outs, ctx, {**attrs, **ctx.backend_attrs}


def infer_ops(
    ops: Sequence[Op],
    known: Dict[int, Optional[TensorType]],
    symbols: Dict[Tuple[int, int], Symbol],
    strict: bool,
) -> InferResult:
    """Infer every op's output types. ``known`` holds the types of the tensors
    not produced by these ops. With ``strict`` every type must become known."""
    res = InferResult()
    res.types.update(known)
    for op in ops:
        schema = schema_of(op.kind)
        if schema is not None:
            check_arity(schema, len(op.inputs), len(op.outputs), op.label)
        ins = [res.types.get(lt.id) for lt in op.inputs]
        if schema is None or any(t is None for t in ins):
            if strict:
                missing = [lt.label for lt, t in zip(op.inputs, ins) if t is None]
                why = f"no shape rule for {op.kind.name}" if schema is None else f"inputs {missing} have unknown shapes"
                raise ShapeError(f"{op.label}: cannot infer output shapes ({why})")
            for lt in op.outputs:
                res.types[lt.id] = type_of(lt, symbols)
            continue
        outs, ctx, attrs = infer_op(op, ins)
        res.guards.extend(ctx.guards)
        res.value_sources.extend(ValueSource(vs, op) for vs in ctx.value_symbols)
        res.attrs[op.id] = attrs
        for lt, t in zip(op.outputs, outs):
            check_rank(lt.label, t)
            res.types[lt.id] = t
    return res
