"""Compile a partition: symbolic shape inference with the compile-time input
shapes, a binding plan for the symbols, compile-time passes, the IR, and the
backend's compiled partition."""

from __future__ import annotations

import logging
import time
from typing import Dict, Iterable, List, Mapping, Optional, Tuple

import numpy as np

from .dtypes import DataType
from .engine import split_devices
from .errors import CompileError, DTypeError, ShapeError
from .inference import dim_symbol_name, infer_ops
from .logical_tensor import LogicalTensor, Property
from .op import Op, OpKind
from .ops import TensorType, schema_of
from .passes import run_passes
from .program import OpSpec, Program, SourceSpec, TensorSpec
from .state import check_state_writes
from .stored_weight import StoredWeight
from .symbolic import DYNAMIC_DIM, UNKNOWN_DIM, Expr, Symbol, as_expr, format_shape

log = logging.getLogger(__name__)


def _compile_input_type(lt: LogicalTensor, port: LogicalTensor, symbols: dict) -> TensorType:
    """The type of a runtime input: the compile-time declaration, completed by
    what the graph inferred for the port."""
    where = f"input {lt.label}"
    if lt.dtype is not port.dtype:
        raise DTypeError(f"{where}: compiled as {lt.dtype}, the partition's port is {port.dtype}")
    shape = lt.shape if lt.shape is not None else port.shape
    if shape is None:
        raise CompileError(f"{where}: the rank is unknown; give its shape at compile")
    if port.shape is not None and len(port.shape) != len(shape):
        raise ShapeError(
            f"{where}: compiled with shape {format_shape(shape)}, the partition's port has {format_shape(port.shape)}"
        )
    pshape = port.shape if port.shape is not None else (UNKNOWN_DIM,) * len(shape)
    dims = []
    for d, (c, p) in enumerate(zip(shape, pshape)):
        if c is UNKNOWN_DIM:
            c = p
        if c is UNKNOWN_DIM:
            raise CompileError(f"{where}: dimension {d} is unknown; give it at compile (an int, a Dim or DYNAMIC_DIM)")
        if c is DYNAMIC_DIM:
            if isinstance(p, int):
                raise CompileError(f"{where}: dimension {d} is static ({p}) in the graph but DYNAMIC_DIM at compile")
            if isinstance(p, Expr):
                dims.append(p)
                continue
            key = (lt.id, d)
            if key not in symbols:
                symbols[key] = Symbol(dim_symbol_name(lt, d))
            dims.append(Expr.symbol(symbols[key]))
            continue
        c = as_expr(c)
        if isinstance(p, int) and not (c.is_const and c.value == p):
            raise ShapeError(f"{where}: dimension {d} is {p} in the graph, {c} at compile")
        dims.append(c)
    return TensorType(lt.dtype, tuple(dims))


def _as_data(lt: LogicalTensor, value, what: str) -> np.ndarray:
    if isinstance(value, StoredWeight):
        if lt.property is not Property.CONSTANT or not lt.dtype.is_float:
            raise CompileError(f"{what} {lt.label}: stored weights are float CONSTANTs, the tensor is "
                               f"{lt.property.name} {lt.dtype}")
        return value
    arr = np.asarray(value)
    want = lt.dtype.numpy
    if arr.dtype != want:
        same_kind = (arr.dtype.kind == "f" and lt.dtype.is_float) or (
            arr.dtype.kind in "iu" and lt.dtype.is_int
        ) or (arr.dtype.kind == "b" and lt.dtype is DataType.boolean)
        if (lt.dtype is DataType.bf16 or lt.dtype.is_f8) and lt.dtype.accepts(arr.dtype):
            same_kind, want = True, arr.dtype  # (the bits)
        if not same_kind:
            raise DTypeError(f"{what} {lt.label}: data has dtype {arr.dtype}, the tensor is {lt.dtype}")
    return np.require(arr, dtype=want, requirements="C")  # (ascontiguousarray makes a 0-d array 1-d)


def _data_type(lt: LogicalTensor, arr: Optional[np.ndarray], port: LogicalTensor, what: str) -> TensorType:
    declared = lt.shape if lt.shape is not None else port.shape
    if arr is not None:
        shape = tuple(arr.shape)
        if declared is not None:
            ok = len(declared) == len(shape) and all(
                d is UNKNOWN_DIM or (isinstance(d, int) and d == s) or (isinstance(d, Expr) and d == s)
                for d, s in zip(declared, shape)
            )
            if not ok:
                raise ShapeError(f"{what} {lt.label}: declared shape {format_shape(declared)}, data has shape {list(shape)}")
    else:
        if declared is None or not all(isinstance(d, int) for d in declared):
            raise CompileError(f"{what} {lt.label}: its shape must be static, got {format_shape(declared)}")
        shape = tuple(declared)
    if any(s < 1 for s in shape):
        raise ShapeError(f"{what} {lt.label}: zero-size dimensions are not supported, got {list(shape)}")
    return TensorType(lt.dtype, tuple(Expr.const(s) for s in shape))


def plan_sources(prog: Program, value_sources: List[SourceSpec] = (),
                 given: List[SourceSpec] = ()) -> Tuple[List[SourceSpec], set]:
    """Find, for every symbol, where its value is read at execution: the
    ``given`` sources first, then plain ``dim == symbol`` occurrences in the
    runtime inputs' shapes, then linear ones (``dim == coeff * symbol +
    already-bound expression``) and shape-input values (once the shape of the
    tensor they resolve against is bound), until nothing more can be bound."""
    bound: set = {g.symbol for g in given}
    sources: List[SourceSpec] = list(given)
    pending = list(value_sources)

    def dim_pass(exact: bool) -> bool:
        progress = False
        for i, tidx in enumerate(prog.inputs):
            for d, e in enumerate(prog.tensors[tidx].shape):
                free = e.free_symbols() - bound
                if len(free) != 1:
                    continue
                (s,) = free
                if exact and e.as_symbol() is not s:
                    continue
                lin = e.linear_in(s)
                if lin is None:
                    continue
                coeff, rest = lin
                sources.append(SourceSpec(s, "dim", i, d, coeff, None if rest == 0 else rest))
                bound.add(s)
                progress = True
        return progress

    while dim_pass(exact=True):
        pass
    progress = True
    while progress:
        progress = dim_pass(exact=False)
        for vs in list(pending):
            ref_symbols = set().union(*(d.free_symbols() for d in prog.tensors[vs.ref].shape))
            if ref_symbols <= bound:
                sources.append(vs)
                bound.add(vs.symbol)
                pending.remove(vs)
                progress = True
    return sources, bound


def fold_constant_shape_inputs(ops, data: Mapping[int, np.ndarray]) -> list:
    """A DynamicReshape / DynamicTranspose whose shape input is a constant is a static one."""
    out = []
    for op in ops:
        s = schema_of(op.kind)
        if s is not None and s.shape_inputs and all(op.inputs[i].id in data for i in s.shape_inputs):
            values = [int(v) for v in np.asarray(data[op.inputs[1].id]).reshape(-1)]
            if op.kind is OpKind.DynamicReshape:
                op = Op(op.id, OpKind.StaticReshape, op.inputs[:1], op.outputs,
                        {"shape": values, "special_zero": bool(op.attrs.get("special_zero", False))}, op.name)
            else:
                op = Op(op.id, OpKind.StaticTranspose, op.inputs[:1], op.outputs, {"order": values}, op.name)
        out.append(op)
    return out


def _symbols_used(prog: Program) -> Dict[Symbol, str]:
    """Every symbol the program needs, with where it is first used (for messages)."""
    used: Dict[Symbol, str] = {}
    for t in prog.tensors:
        for d in t.shape:
            for s in d.free_symbols():
                used.setdefault(s, f"tensor {t.name or t.id}")
    for op in prog.ops:
        for v in op.attrs.values():
            if isinstance(v, (tuple, list)):
                for x in v:
                    if isinstance(x, Expr):
                        for s in x.free_symbols():
                            used.setdefault(s, f"attribute of op {op.name}")
    for lhs, rhs, _ in prog.guards:
        for s in lhs.free_symbols() | rhs.free_symbols():
            used.setdefault(s, "a shape check")
    return used


def build_program(part, inputs, outputs, constants: Mapping[int, object]):
    """Infer the partition's types for these compile-time inputs and lay out the Program."""
    in_ports = {lt.id: lt for lt in part.get_input_ports()}
    out_ports = {lt.id: lt for lt in part.get_output_ports()}
    given_in = [lt.id for lt in inputs]
    given_out = [lt.id for lt in outputs]
    produced = {lt.id for op in part.get_ops() for lt in op.outputs}
    for what, given, ports in (("inputs", given_in, in_ports), ("outputs", given_out, out_ports)):
        if len(set(given)) != len(given):
            raise CompileError(f"compile {what}: a tensor id is listed twice: {given}")
        missing = [i for i in ports if i not in given]
        # any tensor the partition computes may be an output too, also one its ops read
        extra = [i for i in given if i not in ports and not (what == "outputs" and i in produced)]
        if missing or extra:
            raise CompileError(
                f"compile {what} must be the partition's {what} ports {sorted(ports)}; "
                f"missing {missing}, not ports {extra}"
            )
    unknown = [k for k in constants if k not in in_ports]
    if unknown:
        raise CompileError(f"constants given for tensor ids {unknown}, which are not inputs of this partition")

    symbols: dict = {}
    specialized: Dict[Symbol, Expr] = {}  # graph-time symbols the compile-time inputs pin down
    known: Dict[int, TensorType] = {}
    data: Dict[int, np.ndarray] = {}
    runtime: List[int] = []
    for lt in inputs:
        port = in_ports[lt.id]
        prop = port.property
        if lt.property is not prop:
            raise CompileError(f"input {lt.label} is {lt.property.name} at compile, {prop.name} in the graph")
        if prop is Property.VARIABLE:
            if lt.id in constants:
                raise CompileError(f"input {lt.label} is VARIABLE: pass its data to execute(), not as a constant")
            known[lt.id] = _compile_input_type(lt, port, symbols)
            runtime.append(lt.id)
            for p, c in zip(port.shape or (), known[lt.id].shape):
                s = p.as_symbol() if isinstance(p, Expr) else None
                if s is not None:
                    specialized.setdefault(s, c)
            continue
        what = "constant" if prop is Property.CONSTANT else "state"
        arr = None
        if lt.id in constants:
            arr = _as_data(lt, constants[lt.id], what)
        elif prop is Property.CONSTANT:
            raise CompileError(f"constant {lt.label} has no data: pass constants={{{lt.id}: array}}")
        known[lt.id] = _data_type(lt, arr, port, what)
        if arr is not None:
            data[lt.id] = arr

    props = {lt.id: lt.property for lt in inputs}
    check_state_writes(part.get_ops(), lambda tid: props.get(tid, Property.VARIABLE))
    ops = fold_constant_shape_inputs(part.get_ops(), data)
    res = infer_ops(ops, known, symbols, strict=True)
    types = res.types
    shape_inputs = {vs.input_id for vs in res.value_sources}  # an empty transpose order has length 0
    for tid, t in types.items():
        if tid not in shape_inputs and any(d.is_const and d.value < 1 for d in t.shape):
            raise ShapeError(f"tensor {tid} has shape {format_shape(t.shape)}: zero-size dimensions are not supported")
    for lt in outputs:
        t = types[lt.id]
        if lt.dtype is not t.dtype:
            raise DTypeError(f"output {lt.label}: compiled as {lt.dtype}, the partition produces {t.dtype}")
        if lt.shape is not None:
            if len(lt.shape) != t.rank:
                raise ShapeError(f"output {lt.label}: compiled as {format_shape(lt.shape)}, the partition produces {format_shape(t.shape)}")
            for d, (c, e) in enumerate(zip(lt.shape, t.shape)):
                if c is UNKNOWN_DIM or c is DYNAMIC_DIM or as_expr(c).substitute(specialized) == e:
                    continue
                raise ShapeError(f"output {lt.label}: dimension {d} compiled as {c}, the partition produces {e}")

    order: List[int] = list(runtime)
    order += [lt.id for lt in inputs if lt.id not in runtime]
    for op in ops:
        order += [lt.id for lt in op.outputs]
    decl: Dict[int, LogicalTensor] = {lt.id: lt for lt in inputs}
    for op in ops:
        for lt in list(op.inputs) + list(op.outputs):
            decl.setdefault(lt.id, lt)
    index = {tid: i for i, tid in enumerate(order)}
    prog = Program()
    for tid in order:
        lt = decl[tid]
        prog.tensors.append(TensorSpec(tid, lt.name or "", types[tid].dtype, types[tid].shape, lt.property))
    for op in ops:
        prog.ops.append(
            OpSpec(op.id, op.kind, op.name, [index[lt.id] for lt in op.inputs], [index[lt.id] for lt in op.outputs], res.attrs[op.id])
        )
    prog.inputs = [index[t] for t in runtime]
    prog.outputs = [index[lt.id] for lt in outputs]
    seen = set()
    for lhs, rhs, msg in res.guards:
        key = (lhs, rhs)
        if lhs != rhs and key not in seen:
            seen.add(key)
            prog.guards.append((lhs, rhs, msg))
    value_sources = []
    for vs in res.value_sources:
        if vs.input_id not in runtime:
            raise CompileError(
                f"{vs.op_label}: its shape input {vs.input_id} must be a runtime input of the partition "
                f"(its values are read on the host before computing) or a constant"
            )
        value_sources.append(SourceSpec(vs.symbol, vs.kind, runtime.index(vs.input_id), vs.index, ref=index[vs.ref_id], flag=vs.flag))
    return prog, {index[tid]: arr for tid, arr in data.items()}, value_sources


def _as_symbol(d) -> Symbol:
    if isinstance(d, Symbol):
        return d
    s = as_expr(d).as_symbol() if isinstance(d, Expr) else None
    if s is None:
        raise CompileError(f"symbols: {d!r} is not a dimension (a dg.Dim)")
    return s


def add_size_checks(prog: Program, checks) -> None:
    """The caller's conditions on sizes, each ``(lhs, rhs, message)``: two size
    expressions that must be equal at execution (a ShapeError starting with
    ``message`` where they are not), kept with the program's own checks."""
    if isinstance(checks, (str, bytes)) or not isinstance(checks, Iterable):
        raise CompileError(f"size_checks must be a list of (lhs, rhs, message), got {checks!r}")
    have = {(lhs, rhs) for lhs, rhs, _ in prog.guards}
    for c in checks:
        if not (isinstance(c, (tuple, list)) and len(c) == 3 and isinstance(c[2], str)):
            raise CompileError(f"size_checks: each check is (lhs, rhs, message), got {c!r}")
        try:
            lhs, rhs = as_expr(c[0]), as_expr(c[1])
        except (TypeError, ValueError) as e:
            raise CompileError(f"size_checks: {c!r}: {e}") from None
        if lhs != rhs and (lhs, rhs) not in have:
            have.add((lhs, rhs))
            prog.guards.append((lhs, rhs, c[2]))


def finish_program(prog: Program, value_sources: List[SourceSpec] = (), symbols=()) -> None:
    """Symbols and their binding plan; fails if a symbol cannot be determined.
    Symbols no input's shape gives but ``symbols`` lists are read from one
    more runtime input (an i64 vector, last)."""
    used = _symbols_used(prog)
    names: Dict[str, Symbol] = {}
    for s in used:
        other = names.setdefault(s.name, s)
        if other is not s:
            raise CompileError(f"two different dimensions are both named {s.name!r}; give them distinct names")
    sources, bound = plan_sources(prog, value_sources)
    given = {_as_symbol(d) for d in symbols}
    missing = [s for s in used if s not in bound and s in given]
    if missing:  # the caller passes their values: an i64 vector, one more runtime input
        tid = max((t.id for t in prog.tensors), default=-1) + 1
        prog.tensors.append(TensorSpec(tid, "symbols", DataType.i64, (Expr.const(len(missing)),), Property.VARIABLE))
        prog.inputs.append(len(prog.tensors) - 1)
        prog.symbol_inputs = missing
        pos = len(prog.inputs) - 1
        sources, bound = plan_sources(prog, value_sources, [SourceSpec(s, "value", pos, j) for j, s in enumerate(missing)])
    unbound = [s for s in used if s not in bound]
    if unbound:
        desc = ", ".join(f"{s.name!r} (used by {used[s]})" for s in unbound)
        raise CompileError(f"dimension symbols {desc} cannot be determined from the runtime inputs' shapes")
    prog.symbols = sorted(used, key=lambda s: s._uid)
    prog.sources = sources


def compile_partition(
    part, inputs, outputs, engine, constants, cache_capacity: int = 16, weight_type: Optional[str] = None,
    repack_weights: bool = True, symbols=(), split: str = "layer", shares=None, placement: str = "auto",
    size_checks=(),
):
    from .compiled_partition import CompiledPartition
    from .engine import Engine

    engines = list(engine) if isinstance(engine, (list, tuple)) else [engine]
    if not engines or not all(isinstance(e, Engine) for e in engines):
        raise CompileError(f"compile needs an Engine or a list of Engines, got {engine!r}")
    devices = split_devices(engines, split, shares, placement)
    if isinstance(cache_capacity, bool) or not isinstance(cache_capacity, int) or cache_capacity < 1:
        raise CompileError(f"cache_capacity must be a positive int, got {cache_capacity!r}")
    t0 = time.perf_counter()
    prog, data, value_sources = build_program(part, list(inputs), list(outputs), constants)
    add_size_checks(prog, size_checks)
    run_passes(prog, data, weight_type=weight_type)
    finish_program(prog, value_sources, symbols)
    t1 = time.perf_counter()
    cp = CompiledPartition.create(prog, data, engines, cache_capacity, repack_weights, devices)
    log.info("compiled partition %d: %d ops, %d inputs, %d outputs, symbols [%s]: %.1f ms in Python, %.1f ms in the backend",
             part.get_id(), len(prog.ops), len(prog.inputs), len(prog.outputs),
             ", ".join(s.name for s in prog.symbols), (t1 - t0) * 1e3, (time.perf_counter() - t1) * 1e3)
    return cp
