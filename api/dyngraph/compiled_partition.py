"""Compiled partitions: compiled once, executed at any shape the dynamic
dimensions allow."""

from __future__ import annotations

import os
from typing import Dict, List, NamedTuple, Sequence

import numpy as np

from . import _backend
from .dtypes import DataType
from .engine import Engine, Stream
from .errors import CompileError, DTypeError, ExecutionError, ShapeError
from .ir_codes import DTYPE_CODE
from .ir_writer import write_program
from .logical_tensor import LogicalTensor, Property
from .program import Program
from .symbolic import format_shape
from .stored_weight import StoredWeight
from .tensor import OutputArray, Tensor, from_dlpack


def check_capacity(capacity) -> int:
    """A graph cache capacity: a positive int."""
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
        raise CompileError(f"the graph cache capacity must be a positive int, got {capacity!r}")
    return capacity


class CacheInfo(NamedTuple):
    """Statistics of a compiled partition's graph cache."""

    hits: int
    misses: int  # graphs built
    evictions: int
    executions: int
    staged_inputs: int  # inputs converted or copied instead of used in place
    staged_outputs: int  # outputs computed aside, then copied into the caller's buffer
    device_copies: int  # on devices: inputs copied into the graph and outputs copied out of it
    device_copy_bytes: int
    host_fallback_ops: int  # on devices, the last graph built: ops no device of theirs could run, on the host CPU
    graph_splits: int  # on devices, the last graph built: runs of ops on one device (copies between runs)
    entries: int
    capacity: int
    build_seconds: float
    last_build_seconds: float
    last_graph_nodes: int  # ggml nodes of the most recently built graph
    metadata_bytes: int  # graph metadata held by the cached entries
    arena_bytes: int  # the compute buffer all entries share
    constant_bytes: int
    borrowed_bytes: int  # constants used in place in a loaded file (part of constant_bytes)
    repacked_bytes: int  # quantized weights in ggml's repacked layout (part of constant_bytes)
    panel_bytes: int  # f32 and quantized (q8_0, q4_x, q5_x, q4_K, q5_K, q6_K, iq4_x) matmul weights in panels for dyngraph's product (part of constant_bytes)
    state_bytes: int
    derived_bytes: int  # computed once from constants in a kernel's own layout (Winograd's transformed weights)

    @property
    def builds(self) -> int:
        return self.misses


class _OpView:
    """An IR op seen with logical tensors (what the state analysis reads)."""

    def __init__(self, op, prog: Program):
        self.kind = op.kind
        self.label = op.name
        self.inputs = [prog.tensors[i].logical_tensor() for i in op.inputs]
        self.outputs = [prog.tensors[i].logical_tensor() for i in op.outputs]


def _value_only_inputs(program: Program) -> list:
    """The symbols of a last input that only carries symbol values (a program
    read from a file: its compile-time list is not stored)."""
    if not program.inputs:
        return []
    last = len(program.inputs) - 1
    tidx = program.inputs[last]
    if any(tidx in op.inputs for op in program.ops):
        return []
    srcs = [s for s in program.sources if s.input == last]
    if not srcs or any(s.kind != "value" for s in srcs):
        return []
    return [s.symbol for s in sorted(srcs, key=lambda s: s.index)]


class CompiledPartition:
    """The executable form of a partition.

    ``infer_outputs(inputs)`` gives the concrete output logical tensors for
    concrete input shapes (and builds the ggml graph for them on a cache
    miss); ``execute(stream, inputs, outputs)`` computes into the caller's
    buffers.
    """

    def __init__(self, program: Program, impl, engine, keepalive=None, engines=None, engine_chosen=True):
        self._program = program
        self._impl = impl
        self._engine = engine  # the engine tensors and streams are made for (the first of several)
        self._engines = list(engines) if engines else [engine]
        # False for load() without an engine: the first stream of any CPU engine takes the partition over
        self._engine_chosen = engine_chosen
        self._keepalive = keepalive  # a loaded file's mapping, when constants are used in place
        self._inputs = [program.tensors[i].logical_tensor() for i in program.inputs]
        self._outputs = [program.tensors[i].logical_tensor() for i in program.outputs]
        self._input_ids = [lt.id for lt in self._inputs]
        self._symbol_inputs = list(program.symbol_inputs) or _value_only_inputs(program)
        self._out_dtypes = [lt.dtype.numpy for lt in self._outputs]
        self._bf16_outputs = [j for j, lt in enumerate(self._outputs) if lt.dtype is DataType.bf16]

    @classmethod
    def create(cls, program: Program, data: Dict[int, np.ndarray], engines, cache_capacity: int,
               repack_weights: bool = True, devices=None) -> "CompiledPartition":
        """``devices``: None for the host CPU path (one CPU engine), else (split rule code, shares, strict
        placement)."""
        engines = list(engines) if isinstance(engines, (list, tuple)) else [engines]
        # stored weights travel in the IR, already in their storage type; the rest is converted on upload
        stored = {i: d.data for i, d in data.items() if isinstance(d, StoredWeight)}
        host = {i: d for i, d in data.items() if not isinstance(d, StoredWeight)}
        ir = write_program(program, stored)
        if devices is None:
            impl = _backend.CompiledPartition(ir, host, engines[0].impl, cache_capacity, False, repack_weights)
        else:
            rule, shares, strict = devices
            impl = _backend.CompiledPartition(ir, host, [e.impl for e in engines], shares, rule, cache_capacity, strict)
        return cls(program, impl, engines[0], engines=engines)

    # -- ports -----------------------------------------------------------------
    def get_inputs(self) -> List[LogicalTensor]:
        """The runtime inputs, in the order execute() takes them (constants and state excluded)."""
        return list(self._inputs)

    def get_outputs(self) -> List[LogicalTensor]:
        return list(self._outputs)

    def query_logical_tensor(self, tid: int) -> LogicalTensor:
        """A tensor of the partition as compiled: dynamic dimensions are expressions."""
        for t in self._program.tensors:
            if t.id == tid:
                return t.logical_tensor()
        raise ShapeError(f"tensor id {tid} is not in this compiled partition")

    @property
    def program(self) -> Program:
        return self._program

    @property
    def symbol_inputs(self) -> List:
        """The dimensions the last runtime input holds (an i64 vector, in this
        order), when compile's ``symbols`` made one: sizes no other input's
        shape gives. Empty otherwise."""
        return list(self._symbol_inputs)

    @property
    def engine(self):
        return self._engine

    @property
    def engines(self) -> list:
        return list(self._engines)

    def placement(self) -> List[tuple]:
        """Where the partition runs: (device, ops, bytes of weights and state held there) per device, the
        host CPU last; [] on the host CPU path. The ops are those of the last graph built (an op its device
        cannot run at that size runs on the host CPU: ``cache_info().host_fallback_ops``), or, before the
        first build, the plan of the compile."""
        return [tuple(p) for p in self._impl.placement()]

    def op_placement(self) -> List[tuple]:
        """(op id, op kind, device) for each op of the partition, in program order, as ``placement()``
        counts them: which ops went to the host CPU (``"CPU (host)"``) because their device cannot run
        them. [] on the host CPU path."""
        devices = self._impl.op_devices()
        return [(op.id, op.kind, dev) for op, dev in zip(self._program.ops, devices)]

    def remote_traffic(self) -> tuple:
        """(bytes sent, bytes received) so far over the connections to the RPC servers the partition
        runs on (shared with everything else using the same connections)."""
        return tuple(self._impl.remote_traffic())

    # -- execution ---------------------------------------------------------------
    def infer_outputs(self, inputs: Sequence, build: bool = True) -> List[LogicalTensor]:
        """Concrete output logical tensors for concrete inputs (logical tensors or
        Tensors, in execute() order). With ``build`` (the default) the graph for
        these shapes is built now on a cache miss, so execute() computes at once;
        ``build=False`` only computes shapes."""
        if len(inputs) != len(self._inputs):
            raise ShapeError(f"expected {len(self._inputs)} inputs {self._input_ids}, got {len(inputs)}")
        if type(inputs) is list:  # the usual call, Tensors in a list: passed as they are
            for x in inputs:
                if type(x) is not Tensor:
                    break
            else:
                shapes = self._impl.infer(inputs, build, True)
                return [lt._with_concrete_shape(s) for lt, s in zip(self._outputs, shapes)]
        specs = []
        for i, x in enumerate(inputs):
            if isinstance(x, Tensor):
                specs.append(x)
                continue
            if not isinstance(x, LogicalTensor):
                raise TypeError(f"input {i}: expected a LogicalTensor or Tensor, got {x!r}")
            if not x.is_concrete():
                raise ShapeError(f"input {i} (tensor {x.label}): shape {format_shape(x.shape)} is not concrete")
            specs.append((x.id, DTYPE_CODE[x.dtype], list(x.shape)))
        shapes = self._impl.infer(specs, build, True)
        return [lt._with_concrete_shape(s) for lt, s in zip(self._outputs, shapes)]

    def execute(self, stream, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> None:
        """Compute: ``inputs`` in get_inputs() order, ``outputs`` shaped as infer_outputs() says.

        ``stream`` and every tensor belong to the engine the partition was compiled for or an equal
        one (``Engine.__eq__``: same kind, devices and threads). A partition loaded without an engine
        (``dyngraph.load(path)``) runs with any CPU engine's stream: the first stream of another CPU
        engine makes that engine the partition's (``engine``), on whose threads it computes from then on.
        A stream of an engine that does not fit raises ``ExecutionError`` naming both engines."""
        if type(stream) is not Stream:
            raise ExecutionError(f"execute needs a Stream of the partition's engine {self._engine!r}, got {stream!r}")
        mine, theirs = self._engine, stream.engine
        if theirs is not mine and theirs != mine:
            if (not self._engine_chosen and len(self._engines) == 1 and mine.kind is Engine.CPU
                    and theirs.kind is Engine.CPU):
                self._impl.use_engine(theirs.impl)
                self._engine = theirs
                self._engines = [theirs]
            else:
                raise ExecutionError(
                    f"execute needs a Stream of the partition's engine {mine!r} or an equal one (same kind, "
                    f"devices and threads), got a Stream of {theirs!r}")
        self._impl.execute(inputs, outputs)

    def __call__(self, *arrays) -> List[np.ndarray]:
        """Run on arrays (numpy, objects with ``__dlpack__`` such as CPU torch
        tensors, or anything numpy can view), in get_inputs() order; returns
        new numpy output arrays (``torch.from_dlpack`` takes them without a
        copy, bf16 as ``torch.bfloat16``). Inputs are used in place: a
        non-contiguous array or tensor is refused (ExecutionError), not copied."""
        for a in arrays:
            if type(a) is not np.ndarray:
                arrays = tuple(from_dlpack(x) if type(x) is not np.ndarray and hasattr(x, "__dlpack__") else x
                               for x in arrays)
                break
        outs = self._impl.run(arrays, self._out_dtypes)
        if self._bf16_outputs:
            for j in self._bf16_outputs:
                outs[j] = outs[j].view(OutputArray)
        return outs

    # -- cache -------------------------------------------------------------------
    def cache_info(self) -> CacheInfo:
        return CacheInfo(**self._impl.stats())

    def clear_cache(self) -> None:
        self._impl.clear_cache()

    def set_cache_capacity(self, capacity: int) -> None:
        self._impl.set_capacity(check_capacity(capacity))

    # -- state -------------------------------------------------------------------
    def _state_index(self, tid: int) -> int:
        if isinstance(tid, bool) or not isinstance(tid, (int, np.integer)):
            raise ShapeError(f"a state tensor is named by its integer id, got {type(tid).__name__} {tid!r:.40}")
        for i, t in enumerate(self._program.tensors):
            if t.id == tid and t.property is Property.STATE:
                return i
        raise ShapeError(f"tensor id {tid} is not a state tensor of this compiled partition")

    def read_state(self, tid: int) -> np.ndarray:
        """A copy of a state tensor's current value."""
        i = self._state_index(tid)
        t = self._program.tensors[i]
        out = np.empty(t.concrete_shape(), dtype=t.dtype.numpy)
        self._impl.read_state(i, out)
        return out

    def write_state(self, tid: int, data) -> None:
        """Set a state tensor's value: a numpy array, an object with ``__dlpack__``
        (taken as ``__call__`` takes it), a number or a nested list of the state's shape.
        Shape and type are checked before anything is converted or copied: a
        ShapeError or DTypeError names what is wrong, and the state is unchanged."""
        i = self._state_index(tid)
        t = self._program.tensors[i]
        where = f"state {t.name or tid}"
        arr = _state_array(data, where)
        if arr.shape != tuple(t.concrete_shape()):
            raise ShapeError(f"{where}: expected shape {list(t.concrete_shape())}, got {list(arr.shape)}")
        if not t.dtype.accepts(arr.dtype) and arr.dtype.kind not in "biuf":
            raise DTypeError(f"{where}: cannot take data of numpy dtype {arr.dtype} for a {t.dtype.name} state "
                             f"(give numbers: bool, integer or floating point)")
        # (bits of bf16 / f8 stay bits; other data is converted to the state's numpy dtype); the shape
        # is the state's, so the copy is at most the state's size
        arr = np.ascontiguousarray(arr, dtype=arr.dtype if t.dtype.accepts(arr.dtype) else t.dtype.numpy)
        self._impl.write_state(i, arr)

    def get_inplace_ports(self) -> List[tuple]:
        """(state id, tensor id) pairs: the tensor is a version of the state,
        written in place into the state's storage."""
        from .state import state_versions

        prog = self._program
        by_id = {t.id: t for t in prog.tensors}
        ops = [_OpView(op, prog) for op in prog.ops]
        versions = state_versions(ops, lambda tid: by_id[tid].property)
        return [(s, t) for t, s in versions.items() if t != s]

    def reset_state(self) -> None:
        """Every state tensor back to its initial value (zeros unless one was given)."""
        self._impl.reset_state()

    # -- persistence -------------------------------------------------------------
    def save(self, path: "os.PathLike | str") -> None:
        """Write this compiled partition (IR and data) to one file (a checksummed
        header and the FlatBuffers IR, see dyngraph.serialization) that
        ``dyngraph.load`` reads back."""
        from .serialization import write_file

        data = {}
        for i, t in enumerate(self._program.tensors):
            if t.property is Property.CONSTANT or t.property is Property.STATE:
                d = self._impl.export_data(i)  # a state's initial value, if it has one
                if d.size:
                    data[i] = d
        write_file(path, write_program(self._program, data))

    def __repr__(self) -> str:
        ins = ", ".join(f"{lt.label}{format_shape(lt.shape)}" for lt in self._inputs)
        outs = ", ".join(f"{lt.label}{format_shape(lt.shape)}" for lt in self._outputs)
        return f"CompiledPartition(inputs=[{ins}], outputs=[{outs}])"


def _state_array(data, where: str) -> np.ndarray:
    """A numpy view of the data given to write_state, without converting its values:
    DTypeError / ShapeError for what cannot be an array of numbers."""
    if type(data) is np.ndarray:
        return data
    if hasattr(data, "__dlpack__"):
        return from_dlpack(data)  # as __call__ takes it (ExecutionError when the producer refuses)
    if isinstance(data, (str, bytes, bytearray)):
        raise DTypeError(f"{where}: cannot take a {type(data).__name__}: give an array of numbers")
    if not isinstance(data, (np.ndarray, np.generic, bool, int, float, list, tuple, memoryview)) and not (
            hasattr(data, "__array__") or hasattr(data, "__array_interface__")):
        raise DTypeError(f"{where}: cannot take a {type(data).__name__}: give a numpy array, an object with "
                         f"__dlpack__, or a nested list of numbers")
    try:
        with np.errstate(all="ignore"):
            arr = np.asarray(data)
    except (ValueError, TypeError, OverflowError) as e:  # ragged lists, numbers past every numpy type
        raise ShapeError(f"{where}: the data is not an array of one shape and type ({e})") from None
    if arr.dtype.kind not in "biufV":
        raise DTypeError(f"{where}: the data holds {arr.dtype} values ({arr.dtype.kind!r}); give numbers")
    return arr
