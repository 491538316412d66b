"""A numpy reference interpreter of dyngraph's op set.

``run(graph, feeds)`` computes every tensor of a finalized graph from the
data of its inputs, op by op, in float64 (integers in int64), rounding each
op's results to its output's dtype as the backend stores them. It is the
reference ``dyngraph run`` and the conformance tests compare the backend
with: written from the op rules' definitions (``dyngraph/ops``), one short
function per op kind (one module per family, as ``dyngraph/ops``), sharing
no code with the backend.
"""

from __future__ import annotations

from typing import Dict, Mapping

import numpy as np

from ..errors import DyngraphError
from ..ops import schema_of
from ..ops.registry import normalize_attrs
from ..symbolic import Expr, Symbol
from . import attention, compare, dynamic_shape, elementwise, generate, indexing, layout, matmul, norm, reduce  # noqa: F401
from . import moe, quantize, scatter, sort  # noqa: F401  (opsquant)
from . import spatial  # noqa: F401  (convolution, pooling, channel norms, interpolation)
from .registry import IMPLS, Ctx, NoReferenceError
from .values import round_to, to_compute, to_storage

__all__ = ["NoReferenceError", "bind_symbols", "check_supported", "last_uses", "run", "to_compute", "to_storage",
           "supported_kinds"]


def supported_kinds() -> frozenset:
    return frozenset(IMPLS)


def check_supported(graph) -> None:
    """Raise NoReferenceError naming the op kinds the reference cannot compute."""
    missing = sorted({op.kind.name for op in graph.get_ops() if op.kind not in IMPLS})
    if missing:
        raise NoReferenceError(f"the numpy reference has no implementation of op kind {', '.join(missing)}",
                               [f"no reference for op kind {k}" for k in missing])


def bind_symbols(graph, shapes: Mapping[int, tuple]) -> Dict[Symbol, int]:
    """Values of the dimension symbols, read from the concrete shapes of graph inputs."""
    env: Dict[Symbol, int] = {}
    for tid, shape in shapes.items():
        lt = graph.logical_tensor(tid)
        for d, n in zip(lt.shape or (), shape):
            if isinstance(d, Expr):
                s = d.as_symbol()
                if s is not None:
                    env.setdefault(s, int(n))
    return env


def last_uses(graph, keep) -> Dict[int, list]:
    """For each op's position, the tensors no later op reads and ``keep`` does not hold."""
    last: Dict[int, int] = {}
    ops = graph.get_ops()
    for i, op in enumerate(ops):
        for lt in list(op.inputs) + list(op.outputs):
            last[lt.id] = i
    dead: Dict[int, list] = {}
    for tid, i in last.items():
        if tid not in keep:
            dead.setdefault(i, []).append(tid)
    return dead


def run(graph, feeds: Mapping[int, np.ndarray], env: Mapping[Symbol, int] = None,
        keep=None) -> Dict[int, np.ndarray]:
    """Every tensor's value (compute form: float64 / int64 / bool) for these
    inputs (tensor id -> data as dyngraph takes it); with ``keep`` (tensor
    ids), only those: a value is dropped after the last op that reads it,
    so that at most the live values are held at once."""
    check_supported(graph)
    dead = last_uses(graph, set(keep)) if keep is not None else {}
    vals: Dict[int, np.ndarray] = {}
    for tid, data in feeds.items():
        vals[tid] = round_to(to_compute(data, graph.logical_tensor(tid).dtype), graph.logical_tensor(tid).dtype)
    if env is None:
        env = bind_symbols(graph, {tid: np.shape(v) for tid, v in feeds.items()})
    for position, op in enumerate(graph.get_ops()):
        missing = [lt.label for lt in op.inputs if lt.id not in vals]
        if missing:
            raise DyngraphError(f"{op.label}: no value for inputs {missing}")
        attrs = normalize_attrs(schema_of(op.kind), dict(op.attrs), op.label)
        out_dtypes = [graph.logical_tensor(lt.id).dtype for lt in op.outputs]
        out_shapes = [graph.logical_tensor(lt.id).shape for lt in op.outputs]
        outs = IMPLS[op.kind](attrs, [vals[lt.id] for lt in op.inputs], Ctx(op, out_dtypes, env, out_shapes))
        for lt, dt, v in zip(op.outputs, out_dtypes, outs):
            vals[lt.id] = round_to(v, dt)
        for tid in dead.get(position, ()):
            vals.pop(tid, None)
    return vals
