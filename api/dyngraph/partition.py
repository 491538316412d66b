"""Partitions: the pieces a finalized graph is split into.

Supported ops (those the backend can lower) are grouped into connected
partitions; every other op gets a partition of its own whose
``is_supported()`` is False, for the caller to run itself.

Grouping never creates a cycle between partitions: each op gets a *stage*,
the largest number of unsupported ops on a path leading to it, and only
connected supported ops of the same stage share a partition. A path that
leaves a partition through an unsupported op arrives at a higher stage, so it
cannot come back.

Two policies say which supported ops of one stage share a partition:
``"connected"`` (the default, as oneDNN Graph): those connected through
their tensors, so that two independent graphs are two partitions;
``"fewest"``: all of them, connected or not (what the PyTorch front end
uses: an op it runs itself then costs one boundary, while under
"connected" every supported piece it cuts off - a fill that feeds the ops
after it, a side branch - becomes a partition of its own). Either way the
number of partitions only grows with the chain of unsupported ops: under
"fewest", a graph with one unsupported op has at most three.
"""

from __future__ import annotations

import heapq
from typing import Dict, List, Optional, Sequence, Set

from .errors import CompileError
from .logical_tensor import MAX_RANK, LogicalTensor
from .op import Op, OpKind
from .state import state_versions


def backend_supported_kinds() -> frozenset:
    from . import _backend

    return frozenset(OpKind(k) for k in _backend.supported_op_kinds())


def _op_supported(op: Op, kinds: frozenset, graph) -> bool:
    if op.kind not in kinds:
        return False
    for lt in list(op.inputs) + list(op.outputs):
        shape = graph.logical_tensor(lt.id).shape
        if shape is not None and len(shape) > MAX_RANK:
            return False
    return True


class _UnionFind:
    def __init__(self):
        self.parent: Dict[int, int] = {}

    def find(self, x: int) -> int:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


POLICIES = ("connected", "fewest")


def make_partitions(graph, policy: Optional[str] = None) -> List["Partition"]:
    policy = policy or "connected"
    if policy not in POLICIES:
        raise CompileError(f"partition policy must be one of {list(POLICIES)}, got {policy!r}")
    kinds = backend_supported_kinds()
    order = graph.get_ops()
    pos = {op.id: i for i, op in enumerate(order)}
    producer = {lt.id: op for op in order for lt in op.outputs}
    supported = {op.id: _op_supported(op, kinds, graph) for op in order}
    stage: Dict[int, int] = {}
    uf = _UnionFind()
    first_of_stage: Dict[int, int] = {}
    for op in order:
        s = 0
        for lt in op.inputs:
            p = producer.get(lt.id)
            if p is not None:
                s = max(s, stage[p.id] + (0 if supported[p.id] else 1))
        stage[op.id] = s
        uf.find(op.id)
        if not supported[op.id]:
            continue
        if policy == "fewest":
            uf.union(first_of_stage.setdefault(s, op.id), op.id)
            continue
        for lt in op.inputs:
            p = producer.get(lt.id)
            if p is not None and supported[p.id] and stage[p.id] == s:
                uf.union(p.id, op.id)
    groups: Dict[int, List[Op]] = {}
    for op in order:
        groups.setdefault(uf.find(op.id), []).append(op)
    # order partitions so that every partition comes after those it consumes from
    parts = sorted(groups.values(), key=lambda ops: (stage[ops[0].id], pos[ops[-1].id]))
    parts = _topological(parts, producer)
    consumers = _consumers(order)
    return [Partition(graph, ops, supported[ops[0].id], i, consumers) for i, ops in enumerate(parts)]


def _consumers(ops: Sequence[Op]) -> Dict[int, Set[int]]:
    """tensor id -> ids of the ops that read it (one pass over the graph, shared by every partition)."""
    out: Dict[int, Set[int]] = {}
    for op in ops:
        for lt in op.inputs:
            out.setdefault(lt.id, set()).add(op.id)
    return out


def _topological(parts: List[List[Op]], producer) -> List[List[Op]]:
    """The partitions in dependency order; among those ready, the one first in ``parts``
    (Kahn's algorithm with a heap: time linear in the edges, up to the heap's log)."""
    owner = {op.id: i for i, ops in enumerate(parts) for op in ops}
    waiting = [0] * len(parts)
    users: List[List[int]] = [[] for _ in parts]
    for i, ops in enumerate(parts):
        deps = set()
        for op in ops:
            for lt in op.inputs:
                p = producer.get(lt.id)
                if p is not None and owner[p.id] != i:
                    deps.add(owner[p.id])
        waiting[i] = len(deps)
        for d in deps:
            users[d].append(i)
    ready = [i for i in range(len(parts)) if waiting[i] == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        i = heapq.heappop(ready)
        out.append(parts[i])
        for u in users[i]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, u)
    if len(out) != len(parts):  # grouping by stage never makes a cycle between partitions
        raise CompileError("internal error: the partitions depend on each other in a cycle")
    return out


class Partition:
    """A group of ops compiled and executed together."""

    def __init__(self, graph, ops: Sequence[Op], supported: bool, pid: int,
                 consumers: Optional[Dict[int, Set[int]]] = None):
        # time linear in this partition's ops: which ops read a tensor comes from ``consumers``
        # (computed once for the whole graph by make_partitions)
        self._graph = graph
        self._ops = list(ops)
        self._supported = supported
        self._id = pid
        if consumers is None:
            consumers = _consumers(graph.get_ops())
        produced = {lt.id for op in self._ops for lt in op.outputs}
        mine = {op.id for op in self._ops}
        ins: List[int] = []
        seen_ins = set()
        for op in self._ops:
            for lt in op.inputs:
                if lt.id not in produced and lt.id not in seen_ins:
                    seen_ins.add(lt.id)
                    ins.append(lt.id)
        # a state write's result is a port only when another partition reads it:
        # the update itself stays in the compiled partition's state
        versions = state_versions(self._ops, lambda tid: graph.logical_tensor(tid).property)
        outs: List[int] = []
        for op in self._ops:
            for lt in op.outputs:
                readers = consumers.get(lt.id, ())
                if any(r not in mine for r in readers) or (not readers and lt.id not in versions):
                    outs.append(lt.id)
        self._inputs = [graph.logical_tensor(i) for i in ins]
        self._outputs = [graph.logical_tensor(i) for i in outs]

    def is_supported(self) -> bool:
        return self._supported

    def get_id(self) -> int:
        return self._id

    def get_ops(self) -> List[Op]:
        return list(self._ops)

    def get_ops_num(self) -> int:
        return len(self._ops)

    def get_input_ports(self) -> List[LogicalTensor]:
        return list(self._inputs)

    def get_output_ports(self) -> List[LogicalTensor]:
        return list(self._outputs)

    @property
    def graph(self):
        return self._graph

    def compile(
        self,
        inputs: Sequence[LogicalTensor],
        outputs: Sequence[LogicalTensor],
        engine,
        constants: Optional[dict] = None,
        **options,
    ):
        """Compile once for every shape the dynamic dimensions allow.

        ``constants`` maps the id of each CONSTANT input to its data (and,
        optionally, of each STATE input to its initial value). ``options``:
        ``cache_capacity`` (graphs kept per compiled partition), ``weight_type``
        (storage of matmul/embedding weights: "f32", "f16", "q8_0", "q4_0"),
        ``repack_weights`` (default True: matmul weights in the layout of the
        faster CPU kernels: quantized ones in ggml's, where ggml supports it,
        f32, q8_0, q4_0, q4_1, q5_0, q5_1, q4_K, q5_K, q6_K, iq4_nl and iq4_xs
        ones in dyngraph's panels, ``cache_info().panel_bytes``), ``symbols``
        (dimensions, ``dg.Dim``, whose values the caller knows: a dimension the
        partition uses that no input's shape gives - an Arange of a program's
        length in a partition that does not see it - is then read from one more
        runtime input, last: an i64 vector holding the values of
        ``cp.symbol_inputs`` in that order), ``size_checks`` (conditions on
        sizes beyond the dimensions' ranges: ``(lhs, rhs, message)`` each, two
        size expressions that must be equal at execution, say ``(seq % 8, 0,
        "seq is a multiple of 8")``; sizes that break one raise a ShapeError
        starting with ``message``; a saved partition keeps them).

        ``engine`` is an Engine or a list of them. One CPU engine runs the host
        CPU path. Otherwise the partition runs on the engines' devices through
        ggml-backend, its ops split over them in program order (``split="layer"``:
        whole layers, or ``"memory"``: by the bytes of weights and state; see
        backend/placement.h), in proportion to ``shares`` (one positive number
        per device, default equal); inputs and outputs are Tensors of the
        first engine. An op that its device cannot run (ggml's backend for it
        does not implement the op at those types and shapes, or the lowering
        needs one of dyngraph's CPU kernels) runs on the host CPU, the
        scheduler copying its inputs and outputs (``placement="auto"``, the
        default; ``placement()`` and ``cache_info().host_fallback_ops`` show
        it); ``placement="strict"`` refuses such an op with a CompileError. An
        op that writes state (a KV cache) always runs where the state lives.
        """
        if not self._supported:
            kinds = sorted({op.kind.name for op in self._ops})
            raise CompileError(
                f"partition {self._id} ({', '.join(kinds)}) is not supported by the backend: run its ops yourself"
            )
        from .compiler import compile_partition

        return compile_partition(self, inputs, outputs, engine, constants or {}, **options)

    def __repr__(self) -> str:
        kinds = ", ".join(op.kind.name for op in self._ops[:6]) + (", ..." if len(self._ops) > 6 else "")
        return f"Partition({self._id}, supported={self._supported}, ops=[{kinds}])"
