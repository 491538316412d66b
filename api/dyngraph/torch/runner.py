"""Running a converted program: its partitions in order.

Supported partitions are compiled once (each a dyngraph CompiledPartition);
each unsupported one is a node that runs in PyTorch (see
:mod:`dyngraph.torch.fallback`). Values pass between them as torch tensors,
and into and out of dyngraph as numpy views of the same memory.
"""

from __future__ import annotations

import functools
import re
from fnmatch import fnmatchcase
from typing import Dict, List, Mapping, Sequence

import numpy as np

from ..errors import CompileError, DyngraphError
from ..graph import Graph
from ..logical_tensor import CONSTANT, STATE, VARIABLE
from ..symbolic import Expr
from .dtypes import DG_TO_TORCH, from_numpy, numpy_out_dtype, to_numpy
from .fallback import TorchStep
from .convert import Converted, Ref, RunnerBuffer, template_symbols


class PartitionFailure(Exception):
    """Supported partitions did not compile: these nodes fall back, each for its reason."""

    def __init__(self, reasons: dict):
        super().__init__("; ".join(dict.fromkeys(reasons.values())))
        self.reasons = reasons  # fx node -> reason


class DgStep:
    """One compiled dyngraph partition. Sizes of the program that none of its
    inputs' shapes give (an arange of the sequence length after a node that ran
    in PyTorch) come in its last input, evaluated from the program's inputs."""

    __slots__ = ("cp", "run", "in_ids", "out_ids", "np_dtypes", "torch_dtypes", "symbols", "op_ids", "guards")

    def __init__(self, cp, in_ids, out_ids, torch_dtypes, op_ids):
        self.cp = cp
        # the raw call, numpy in, numpy out; a model's strided inputs (a transpose, in the
        # model or run in PyTorch between partitions) are copied, as PyTorch's own ops take them
        self.run = functools.partial(cp._impl.run, copy_strided=True)
        self.symbols = cp.symbol_inputs
        self.in_ids = in_ids[:-1] if self.symbols else in_ids
        self.out_ids = out_ids
        self.torch_dtypes = torch_dtypes
        self.np_dtypes = [numpy_out_dtype(dt) for dt in torch_dtypes]
        self.op_ids = list(op_ids)  # the graph ops it runs
        self.guards: list = []  # the export's guards its partition checks (size_checks)

    def __call__(self, env: dict, symenv) -> None:
        ins = [to_numpy(env[i]) for i in self.in_ids]
        if self.symbols:
            values = symenv()
            ins.append(np.array([values[s] for s in self.symbols], np.int64))
        outs = self.run(ins, self.np_dtypes)
        for i, o, dt in zip(self.out_ids, outs, self.torch_dtypes):
            env[i] = from_numpy(o, dt)


_OP_ID = re.compile(r"\bop (\d+) \(")


def build_graph(converted: Converted) -> Graph:
    g = Graph()
    for op in converted.ops:
        g.add_op(op)
    try:
        g.finalize()
    except DyngraphError as e:  # every op was inferred when converted: a converter bug
        raise CompileError(f"the converted graph does not finalize: {e}") from e
    return g


def weight_types_by_id(converted: Converted, ins, patterns: Mapping[str, str], used: set) -> Dict[int, str]:
    """A partition's weight types (tensor id -> type) from glob patterns on the
    state-dict names of its float constants (the first that matches decides);
    the patterns that matched go into ``used``."""
    out: Dict[int, str] = {}
    for lt in ins:
        name = converted.param_names.get(lt.id)
        if lt.property is not CONSTANT or name is None or not lt.dtype.is_float:
            continue
        for pat, wt in patterns.items():
            if fnmatchcase(name, pat):
                used.add(pat)
                out[lt.id] = wt
                break
    return out


def _guards_of(ins, guards) -> list:
    """The export's guards over sizes this partition's runtime inputs give: shape checks the
    compiled partition keeps (a saved program too)."""
    given: set = set()
    for lt in ins:
        if lt.property is VARIABLE:
            for d in lt.shape or ():
                if isinstance(d, Expr):
                    given |= d.free_symbols()
    return [g for g in guards if g.symbols() <= given]


def build_steps(converted: Converted, graph: Graph, engine, options: dict, guards: Sequence = ()):
    """Compile the supported partitions; returns (steps, state owners, partitions).
    ``guards``: the export's conditions on sizes (size_probes.Guard), each checked by the
    partitions whose inputs give its sizes."""
    steps: List = []
    options = dict(options)
    stored = options.pop("weights", None) or {}
    patterns = options.get("weight_type")
    by_name = isinstance(patterns, Mapping)
    used: set = set()
    owners: Dict[str, tuple] = {}
    state_names = {tid: name for name, tid in converted.states.items()}
    state_users: Dict[int, int] = {}
    # the sizes the program's inputs give, and those nodes in PyTorch compute from tensor data: a partition
    # that needs one no input of its own has takes it as a value
    options["symbols"] = [s for s, *_ in symbol_sources(converted)] + [
        sym for info in converted.wildcards.values() for sym, _ in info.defines]
    parts = graph.get_partitions(policy="fewest")  # a node run in PyTorch costs one boundary
    failures: dict = {}  # every partition is tried: one retry handles all that failed
    for part in parts:
        ops = part.get_ops()
        if not part.is_supported():
            if len(ops) == 1 and ops[0].id == converted.sink_id:
                continue
            (op,) = ops
            info = converted.wildcards[op.id]
            for lt in op.inputs:
                if lt.property is STATE:
                    raise RunnerBuffer(state_names.get(lt.id, str(lt.id)), f"{info.node.name} runs in PyTorch and reads it")
            steps.append(TorchStep(info))
            continue
        ins = _in_user_order(part.get_input_ports(), converted.inputs)
        outs = _in_user_order(part.get_output_ports(), [o.value for o in converted.outputs
                                                        if isinstance(o, Ref) and o.kind in (Ref.TENSOR, Ref.SCALAR)])
        for lt in ins:
            if lt.property is STATE:
                if lt.id in state_users:
                    raise RunnerBuffer(state_names.get(lt.id, str(lt.id)), "two compiled partitions use it")
                state_users[lt.id] = part.get_id()
        consts = {lt.id: converted.data[lt.id] for lt in ins if lt.property in (CONSTANT, STATE) and lt.id in converted.data}
        for lt in ins:
            name = converted.param_names.get(lt.id)
            if name in stored:
                consts[lt.id] = stored[name]
        opts = options
        if by_name:
            opts = dict(options, weight_type=weight_types_by_id(converted, ins, patterns, used))
        checked = _guards_of(ins, guards)
        if checked:
            opts = dict(opts, size_checks=[g.as_check() for g in checked])
        try:
            cp = part.compile(ins, outs, engine, constants=consts, **opts)
        except DyngraphError as e:
            failures.update(_failure(e, ops, converted))
            continue
        in_ids = [lt.id for lt in cp.get_inputs()]
        out_ids = [lt.id for lt in cp.get_outputs()]
        tdts = [converted.torch_dtypes.get(i) or DG_TO_TORCH[lt.dtype] for i, lt in zip(out_ids, cp.get_outputs())]
        step = DgStep(cp, in_ids, out_ids, tdts, [op.id for op in ops])
        step.guards = checked
        for lt in ins:
            if lt.property is STATE:
                owners[state_names[lt.id]] = (cp, lt.id)
        steps.append(step)
    if failures:
        raise PartitionFailure(failures)
    steps = order_steps(steps, converted)
    if by_name and set(patterns) - used:
        raise CompileError(f"weight_type patterns {sorted(set(patterns) - used)} match no float parameter of the "
                           f"converted program (names like {sorted(converted.param_names.values())[:4]})")
    return steps, owners, parts


def template_ids(t, out: set) -> set:
    """Adds the ids of the tensors an argument or output template refers to to ``out``."""
    if isinstance(t, Ref):
        if t.kind in (Ref.TENSOR, Ref.COMPLEX, Ref.SCALAR):
            out.add(t.value)
    elif isinstance(t, (list, tuple)):
        for x in t:
            template_ids(x, out)
    elif isinstance(t, dict):
        for x in t.values():
            template_ids(x, out)
    return out


def _size_readers(steps: list, defined: set, converted: Converted) -> dict:
    """The nodes of these partitions whose ops make a size computed from tensor data that no
    input of theirs carries (x[:n], arange(n) for n from .item()): in PyTorch, they come after
    the node computing it, and what follows them reads it from their results."""
    def syms(tids):
        out: set = set()
        for tid in tids:
            t = converted.types.get(tid)
            for d in t.shape if t is not None else ():
                out |= d.free_symbols() if isinstance(d, Expr) else set()
        return out

    ops = {op.id: op for op in converted.ops}
    found = {}
    for s in steps:
        for oid in getattr(s, "op_ids", ()):
            op = ops[oid]
            made = syms(lt.id for lt in op.outputs) - syms(lt.id for lt in op.inputs)
            if made & defined:
                names = ", ".join(sorted(x.name for x in made & defined))
                found[converted.op_nodes[oid]] = f"reads {names} (a size from tensor data) in a partition that feeds it"
    if not found:
        raise CompileError("a partition reads a size computed from tensor data by a node that needs its results; "
                           "not supported")
    return found


def order_steps(steps: list, converted: Converted) -> list:
    """The steps in an order in which every size computed from tensor data (by a node in
    PyTorch) is known before a step reads it, each such node given torch's runtime assertions
    on its sizes to check (TorchStep.asserts). The partitions' order, unless a partition reads
    such a size with no tensor of the node's before it (a slice to a length from ``.item()``).
    Where no order does it (a partition both feeds the node and reads its size), the ops of
    that partition that make the size go to PyTorch (PartitionFailure: the caller converts
    again) or, if none does, CompileError."""
    if not any(isinstance(s, TorchStep) and s.defines for s in steps):
        return steps
    definer = {sym: k for k, s in enumerate(steps) if isinstance(s, TorchStep) for sym, _ in s.defines}
    producer = {}
    for k, s in enumerate(steps):
        outs = s.out_ids if isinstance(s, DgStep) else template_ids(s.outputs, set())
        for tid in outs:
            producer[tid] = k
    deps = []
    for k, s in enumerate(steps):
        if isinstance(s, DgStep):
            ins, syms = set(s.in_ids), set(s.symbols)
        else:
            ins, syms = template_ids((s.args, s.kwargs), set()), template_symbols((s.args, s.kwargs))
        deps.append({producer[t] for t in ins if t in producer} | {definer[x] for x in syms if x in definer})
    order, done = [], set()
    while len(order) < len(steps):  # the earliest step whose dependencies have run (the steps are few)
        k = next((k for k in range(len(steps)) if k not in done and deps[k] <= done), None)
        if k is None:  # a partition both feeds such a node and reads its size: its readers go to PyTorch
            raise PartitionFailure(_size_readers([steps[j] for j in range(len(steps)) if j not in done],
                                                 set(definer), converted))
        order.append(k)
        done.add(k)
    steps = [steps[k] for k in order]
    known, pending = {s for s, *_ in symbol_sources(converted)}, list(converted.size_asserts)
    for s in steps:
        if isinstance(s, TorchStep) and s.defines:
            known |= {sym for sym, _ in s.defines}
            s.asserts = [g for g in pending if g.symbols() <= known]
            pending = [g for g in pending if not g.symbols() <= known]
    return steps


def _in_user_order(ports, user_ids):
    """The ports that are the program's flat inputs (or outputs) first, in
    that order, then the others as they were: a partition that runs the whole
    program takes and returns its tensors in the torch program's order."""
    rank = {}
    for k, tid in enumerate(user_ids):
        if tid is not None:
            rank.setdefault(tid, k)
    return sorted(ports, key=lambda lt: rank.get(lt.id, len(rank)))


def _failure(e: DyngraphError, ops, converted: Converted) -> dict:
    """Which nodes to run in PyTorch when a partition does not compile: ops
    that make tensors from sizes alone when the partition's inputs do not
    tell those sizes (in PyTorch, their results become inputs that do); the
    op an error names; else the whole partition."""
    msg = str(e)
    nodes_of = converted.op_nodes
    if "cannot be determined" in msg:
        gens = list(dict.fromkeys(nodes_of[op.id] for op in ops if not op.inputs and op.id in nodes_of))
        if gens:
            return {n: "its sizes are not known to its dyngraph partition (no input has them)" for n in gens}
    m = _OP_ID.search(msg)
    node = nodes_of.get(int(m.group(1))) if m else None
    nodes = [node] if node is not None else list(dict.fromkeys(nodes_of[op.id] for op in ops if op.id in nodes_of))
    return {n: f"its partition did not compile: {msg}" for n in nodes}


def symbol_sources(converted: Converted) -> list:
    """(symbol, flat input index, dimension, coeff, offset) for every symbol a
    user input's dimension gives (``dim == coeff * symbol + offset``): how
    sizes are known when nodes run in PyTorch."""
    found = {}
    for exact in (True, False):
        for k, tid in enumerate(converted.inputs):
            if tid is None:
                continue
            for d, e in enumerate(converted.tensors[tid].shape or ()):
                if not hasattr(e, "free_symbols"):
                    continue
                free = e.free_symbols()
                if len(free) != 1:
                    continue
                (s,) = free
                if s in found or (exact and e.as_symbol() is not s):
                    continue
                lin = e.linear_in(s)
                if lin is not None and lin[1].is_const:
                    found[s] = (k, d, lin[0], lin[1].value)
    return [(s, *src) for s, src in found.items()]


def symbol_env(sources, flat: Sequence) -> dict:
    return {s: (flat[k].shape[d] - off) // coeff for s, k, d, coeff, off in sources}


__all__ = ["DgStep", "PartitionFailure", "build_graph", "build_steps", "symbol_env", "symbol_sources", "template_ids"]

