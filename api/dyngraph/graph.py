"""Graphs: ops are added, the graph is finalized (checked and shape-inferred),
then split into partitions."""

from __future__ import annotations

from collections import deque
from typing import Dict, List, Optional

from .engine import EngineKind
from .errors import GraphError
from .inference import InferResult, infer_ops, type_of
from .logical_tensor import LogicalTensor
from .op import Op, OpKind
from .ops import schema_of
from .ops.registry import check_arity, normalize_attrs
from .symbolic import DYNAMIC_DIM, UNKNOWN_DIM, Expr, as_expr, format_shape


def merge_declared(a: LogicalTensor, b: LogicalTensor) -> LogicalTensor:
    """Two declarations of one tensor id must agree; the more specific wins."""
    where = f"logical tensor {a.label}"
    if a.dtype is not b.dtype:
        raise GraphError(f"{where} is declared with dtype {a.dtype} and with {b.dtype}")
    if a.property is not b.property:
        raise GraphError(f"{where} is declared {a.property.name} and {b.property.name}")
    if a.shape is None:
        return b
    if b.shape is None:
        return a
    if len(a.shape) != len(b.shape):
        raise GraphError(f"{where} is declared with shapes {format_shape(a.shape)} and {format_shape(b.shape)}")
    dims = []
    for d, (x, y) in enumerate(zip(a.shape, b.shape)):
        if x is UNKNOWN_DIM:
            dims.append(y)
        elif y is UNKNOWN_DIM:
            dims.append(x)
        elif x is DYNAMIC_DIM or y is DYNAMIC_DIM:
            if (x is DYNAMIC_DIM) != (y is DYNAMIC_DIM) and not isinstance(x if y is DYNAMIC_DIM else y, Expr):
                raise GraphError(f"{where}: dimension {d} is declared {x} and {y}")
            dims.append(y if x is DYNAMIC_DIM else x)
        elif as_expr(x) == as_expr(y):
            dims.append(x)
        else:
            raise GraphError(f"{where}: dimension {d} is declared {x} and {y}")
    return a.with_shape(dims)


class Graph:
    """``Graph(engine_kind)``: add ops, ``finalize()``, then ``get_partitions()``."""

    def __init__(self, engine_kind: EngineKind = EngineKind.CPU):
        if not isinstance(engine_kind, EngineKind):
            raise GraphError(f"unknown engine kind {engine_kind!r}")
        self.engine_kind = engine_kind
        self._ops: List[Op] = []
        self._op_ids = set()
        self._tensors: Dict[int, LogicalTensor] = {}
        self._producer: Dict[int, Op] = {}
        self._finalized = False
        self._order: List[Op] = []
        self._inferred: Optional[InferResult] = None
        self._symbols: dict = {}

    # -- building ------------------------------------------------------------
    def add_op(self, op: Op) -> None:
        if self._finalized:
            raise GraphError("the graph is finalized: no ops can be added")
        if not isinstance(op, Op):
            raise GraphError(f"add_op takes an Op, got {op!r}")
        if op.id in self._op_ids:
            raise GraphError(f"{op.label}: op id {op.id} is already in the graph")
        schema = schema_of(op.kind)
        if schema is not None:
            check_arity(schema, len(op.inputs), len(op.outputs), op.label)
            normalize_attrs(schema, op.attrs, op.label)
        elif op.kind is not OpKind.Wildcard and not op.outputs:
            raise GraphError(f"{op.label}: an op must have outputs")
        # only this op's tensors change: merge them apart (a copy of every tensor per op is quadratic)
        merged: Dict[int, LogicalTensor] = {}
        for lt in list(op.inputs) + list(op.outputs):
            prev = merged.get(lt.id, self._tensors.get(lt.id))
            merged[lt.id] = merge_declared(prev, lt) if prev is not None else lt
        for lt in op.outputs:
            if lt.id in self._producer:
                raise GraphError(f"{op.label}: tensor {lt.label} is already produced by {self._producer[lt.id].label}")
            if lt.property is not lt.property.VARIABLE:
                raise GraphError(f"{op.label}: output {lt.label} is {lt.property.name}; op outputs are VARIABLE")
        if len({lt.id for lt in op.outputs}) != len(op.outputs):
            raise GraphError(f"{op.label}: an output tensor id appears twice")
        self._tensors.update(merged)
        for lt in op.outputs:
            self._producer[lt.id] = op
        self._ops.append(op)
        self._op_ids.add(op.id)

    # -- finalize ------------------------------------------------------------
    def finalize(self) -> None:
        """Check the graph (acyclic, consistent) and infer shapes symbolically."""
        if self._finalized:
            return
        if not self._ops:
            raise GraphError("the graph has no ops")
        self._order = self._topological_order()
        self._check_dim_names()
        known = {}
        for tid, lt in self._tensors.items():
            if tid not in self._producer:
                known[tid] = type_of(lt, self._symbols)
        self._inferred = infer_ops(self._order, known, self._symbols, strict=False)
        self._finalized = True

    def _check_dim_names(self) -> None:
        """Two different Dim objects with one name would print alike in every
        message and never be equal: refuse them up front."""
        seen: Dict[str, tuple] = {}
        for tid, lt in self._tensors.items():
            for d in lt.shape or ():
                if d is UNKNOWN_DIM or d is DYNAMIC_DIM or isinstance(d, int):
                    continue
                for sym in as_expr(d).free_symbols():
                    other = seen.setdefault(sym.name, (sym, lt))
                    if other[0] is not sym:
                        raise GraphError(
                            f"tensors {other[1].label} and {lt.label} use two different dimensions named "
                            f"{sym.name!r}; a dimension is shared by using the same Dim object")

    def _topological_order(self) -> List[Op]:
        indeg = {op.id: 0 for op in self._ops}
        users: Dict[int, List[Op]] = {}
        for op in self._ops:
            deps = {self._producer[lt.id].id for lt in op.inputs if lt.id in self._producer}
            if op.id in deps:
                raise GraphError(f"{op.label} consumes its own output")
            indeg[op.id] = len(deps)
            for d in deps:
                users.setdefault(d, []).append(op)
        ready = deque(op for op in self._ops if indeg[op.id] == 0)
        order = []
        while ready:
            op = ready.popleft()
            order.append(op)
            for u in users.get(op.id, []):
                indeg[u.id] -= 1
                if indeg[u.id] == 0:
                    ready.append(u)
        if len(order) != len(self._ops):
            stuck = [op.label for op in self._ops if indeg[op.id] > 0]
            raise GraphError(f"the graph has a cycle through {', '.join(stuck[:5])}")
        return order

    # -- queries -------------------------------------------------------------
    @property
    def is_finalized(self) -> bool:
        return self._finalized

    def get_ops(self) -> List[Op]:
        return list(self._order if self._finalized else self._ops)

    def logical_tensor(self, tid: int) -> LogicalTensor:
        """A tensor as declared, with the shape finalize inferred where known."""
        lt = self._tensors.get(tid)
        if lt is None:
            raise GraphError(f"no tensor with id {tid} in the graph")
        t = self._inferred.types.get(tid) if self._inferred else None
        if t is None:
            return lt
        return lt.with_shape(tuple(d.value if d.is_const else d for d in t.shape))

    def get_partitions(self, policy=None):
        """Split the finalized graph into partitions (see :mod:`dyngraph.partition`).
        ``policy``: "connected" (default: supported ops connected through
        their tensors share a partition) or "fewest" (all supported ops
        between the same unsupported ones share one, connected or not)."""
        if not self._finalized:
            raise GraphError("finalize() the graph before asking for partitions")
        from .partition import make_partitions

        return make_partitions(self, policy)

    def __repr__(self) -> str:
        return f"Graph({self.engine_kind.name}, {len(self._ops)} ops{', finalized' if self._finalized else ''})"

