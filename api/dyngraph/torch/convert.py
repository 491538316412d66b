"""Conversion of an FX graph (of an ExportedProgram) to a dyngraph graph.

("Lowering" is the backend's word, for IR -> ggml, in backend/lower/.)

Every node of the program is converted in order. Placeholders become logical
tensors (user inputs VARIABLE, weights CONSTANT, mutated buffers STATE);
SymInt-valued nodes become dimension expressions; each ATen op is converted
by its function in the converter table (:mod:`dyngraph.torch.converters`).
A node that has no converter, or whose converter refuses it, becomes a
``Wildcard`` op with the output shapes torch.export recorded: the dyngraph
partitioner puts it in an unsupported partition, and the runner executes the
original FX node with PyTorch there.

Each emitted op is shape-inferred at once with dyngraph's own rules, so a
converter that produced something inconsistent is caught at its node (which
then falls back) rather than when the whole graph is finalized. Converters
may look through the nodes that produce their arguments (``x * rsqrt(mean(x
** 2) + eps)`` is one RMSNorm); ops nothing uses are dropped at the end.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.fx as fx
from torch.export.graph_signature import InputKind, OutputKind
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

from ..dtypes import DataType
from ..errors import CompileError, DyngraphError
from ..logical_tensor import CONSTANT, MAX_RANK, STATE, VARIABLE, LogicalTensor
from ..op import Op, OpKind
from ..op_pipeline import Ids, infer_new_op
from ..ops import TensorType, schema_of
from ..partition import backend_supported_kinds
from ..state import state_versions, written_input
from ..symbolic import Expr, Symbol, as_expr
from .converters import Missing, Unsupported, bind, converter_of
from .converters.registry import COMPLEX_CONVERTERS, Complex, FloatScalar, canonical
from .converters.scalar import float_assert
from .dtypes import dg_dtype, to_numpy
from .size_probes import Guard, differ_at, guard_of, program_guards, program_points
from .symbols import SymbolTable

# static fills up to this many elements are constants rather than Full ops
SMALL_CONSTANT = 4096

# nodes that only check things torch already checked at export
IGNORED = {
    torch.ops.aten._assert_tensor_metadata.default,
    torch.ops.aten._assert_scalar.default,
    torch.ops.aten._assert_async.default,
    torch.ops.aten._assert_async.msg,
    torch.ops.aten.sym_constrain_range_for_size.default,
    torch.ops.aten.sym_constrain_range.default,
    torch.ops.aten._functional_sym_constrain_range_for_size.default,
    torch.ops.aten._functional_sym_constrain_range.default,
}


class Fallback(NamedTuple):
    """A node that runs in PyTorch, and why: ``(node, target, reason)``."""

    node: str
    target: str
    reason: str

    def __str__(self) -> str:
        return f"{self.node} ({self.target}): {self.reason}"


@dataclass
class Converted:
    """What the runner needs: the ops (in order), the tensors, data, and where
    the program's inputs and outputs are."""

    ops: List[Op]
    op_nodes: Dict[int, fx.Node]  # op id -> the node it came from
    tensors: Dict[int, LogicalTensor]
    data: Dict[int, np.ndarray]  # CONSTANT data / STATE initial values
    torch_constants: Dict[int, torch.Tensor]  # constants as torch tensors (for fallback nodes)
    inputs: List[Optional[int]]  # flat user input -> tensor id (None for non-tensor inputs)
    input_values: List[Any]  # non-tensor inputs' trace-time values
    outputs: List[Any]  # flat user outputs: Ref (a tensor or a size) or a constant
    input_mutations: List[Tuple[int, int]]  # (flat user input, tensor id of its new value)
    buffer_writes: List[Tuple[str, int, int]]  # runner-owned buffers: (name, input id, new value id)
    buffers: Dict[int, torch.Tensor]  # runner-owned buffers by input id (their current value)
    states: Dict[str, int]  # mutated buffers held as STATE: name -> tensor id
    wildcards: Dict[int, "WildcardInfo"]
    fallbacks: List[Fallback]
    symbols: SymbolTable
    guards: List["Guard"]  # the export's conditions on sizes its ranges do not imply
    size_asserts: List["Guard"]  # torch's runtime assertions on sizes computed from tensor data
    sink_id: Optional[int]
    # torch's runtime assertions on floats from tensor data: (id of a 0-d bool tensor, message)
    value_asserts: List[Tuple[int, str]] = field(default_factory=list)
    torch_dtypes: Dict[int, torch.dtype] = field(default_factory=dict)
    param_names: Dict[int, str] = field(default_factory=dict)  # constant tensor id -> state-dict name
    types: Dict[int, TensorType] = field(default_factory=dict)  # tensor id -> dtype and shape


@dataclass
class WildcardInfo:
    node: fx.Node
    args: Any  # templates (see runner.resolve)
    kwargs: Any
    outputs: Any  # the output structure: tensor ids in place of tensors
    defines: List[Tuple[Symbol, Any]] = field(default_factory=list)  # sizes it computes: (symbol, pytree key path)


class Ref:
    """In a template of a node's arguments or outputs: a tensor (by id), a
    complex tensor (the id of its float32 parts, see ``Complex``), a float
    (the id of its 0-d tensor, see ``FloatScalar``) or a size expression."""

    TENSOR = "tensor"
    COMPLEX = "complex"
    SCALAR = "scalar"  # a 0-d tensor read as a Python float (see ``FloatScalar``)
    EXPR = "expr"
    __slots__ = ("kind", "value")

    def __init__(self, kind: str, value):
        self.kind = kind
        self.value = value

    def __repr__(self) -> str:
        return f"Ref({self.kind}, {self.value})"


def template_symbols(t) -> set:
    """The symbols of the size expressions in an argument template."""
    if isinstance(t, Ref):
        return t.value.free_symbols() if t.kind == Ref.EXPR and isinstance(t.value, Expr) else set()
    if isinstance(t, (list, tuple)):
        return set().union(*(template_symbols(x) for x in t))
    if isinstance(t, dict):
        return template_symbols(list(t.values()))
    return set()


class ForceFallback(Exception):
    """Raised when a node needs the torch value of a node that was converted
    without producing it (e.g. an unused output of a multi-output op)."""

    def __init__(self, node: fx.Node, reason: str):
        super().__init__(reason)
        self.node = node
        self.reason = reason


class Converter:
    """The conversion context handed to converters (``cx``)."""

    def __init__(self, ep, symbols: SymbolTable, forced: Dict[fx.Node, str], runner_buffers: set):
        self.ep = ep
        self.sym = symbols
        self.forced = forced
        self.runner_buffers = runner_buffers
        self.kinds = backend_supported_kinds()
        self.ops: List[Op] = []
        self.op_nodes: Dict[int, fx.Node] = {}
        self.tensors: Dict[int, LogicalTensor] = {}
        self.types: Dict[int, TensorType] = {}
        self.values: Dict[fx.Node, Any] = {}
        self.data: Dict[int, np.ndarray] = {}
        self.torch_constants: Dict[int, torch.Tensor] = {}
        self.param_names: Dict[int, str] = {}  # constant tensor id -> state-dict name
        self.torch_dtypes: Dict[int, torch.dtype] = {}
        self.opaque: set = set()  # tensor ids dyngraph cannot hold (float64, rank > 6...)
        self.wildcards: Dict[int, WildcardInfo] = {}
        self.fallbacks: Dict[int, Fallback] = {}
        self.node: Optional[fx.Node] = None
        self.ids = Ids()
        self._full_cache: Dict[tuple, LogicalTensor] = {}
        self.state_root: Dict[int, int] = {}  # version tensor id -> state tensor id
        self._const_cache: Dict[tuple, LogicalTensor] = {}
        self._size_points: Optional[list] = None  # where sizes are compared with torch's (_check_size)
        self._guards: Optional[List[Guard]] = None  # the export's guards (_export_guards)
        self.defined: set = set()  # torch's unbacked symbols a node run in PyTorch computes (from tensor data)
        self.size_tokens: Dict[Symbol, LogicalTensor] = {}  # such a size -> an output of the node computing it
        self.size_asserts: List[Guard] = []  # torch's runtime assertions on those sizes
        self.value_asserts: List[Tuple[LogicalTensor, str]] = []  # and on floats from tensor data

    # ------------------------------------------------------------------ tensors
    def new_tensor(self, dtype: DataType, shape=None, prop=VARIABLE, name=None) -> LogicalTensor:
        lt = LogicalTensor(self.ids.tensor(), dtype, shape, property=prop, name=name)
        self.tensors[lt.id] = lt
        return lt

    def _declare(self, fake, name, prop=VARIABLE) -> LogicalTensor:
        """A tensor with torch's (symbolic) shape; dtypes without a dyngraph form are opaque."""
        dt = dg_dtype(fake.dtype)
        try:
            shape = self.sym.shape(fake)
        except Unsupported:
            shape = None
        lt = self.new_tensor(dt or DataType.f32, shape, prop, name)
        self.torch_dtypes[lt.id] = fake.dtype
        if dt is None or shape is None or len(shape) > MAX_RANK or any(isinstance(d, int) and d == 0 for d in shape):
            self.opaque.add(lt.id)  # (dyngraph sizes are at least 1)
        elif shape is not None:
            self.types[lt.id] = TensorType(dt, tuple(as_expr(d) for d in shape))
        return lt

    # ------------------------------------------------------------- converter API
    def meta(self, node):
        """torch.export's value of a node (a FakeTensor, SymInt, tuple...)."""
        if not isinstance(node, fx.Node):
            return node
        return node.meta.get("val")

    @property
    def out(self):
        """The (fake) value of the node being converted."""
        return self.meta(self.node)

    def out_dtype(self) -> DataType:
        dt = dg_dtype(self.out.dtype)
        if dt is None:
            raise Unsupported(f"dtype {self.out.dtype}")
        return dt

    def out_shape(self) -> tuple:
        return self.sym.shape(self.out)

    def shape_of(self, arg) -> tuple:
        """torch's shape of a tensor argument (ints and Exprs)."""
        return self.sym.shape(self.meta(arg))

    def rank_of(self, arg) -> int:
        return self.meta(arg).dim()

    def value(self, arg):
        if isinstance(arg, fx.Node):
            v = self.values.get(arg)
            if isinstance(v, Missing):
                raise ForceFallback(v.node, f"output {v.index} is used by {self.node.name}")
            return v
        return arg

    def tensor(self, arg) -> LogicalTensor:
        """The logical tensor of a tensor argument."""
        v = self.value(arg)
        if not isinstance(v, LogicalTensor):
            raise Unsupported(f"argument {arg} is not a tensor")
        if v.id in self.opaque:
            why = self.torch_dtypes.get(v.id)
            raise Unsupported(f"input {arg} has no dyngraph form ({why}, shape {self.meta(arg).shape})")
        return v

    def complex(self, arg) -> LogicalTensor:
        """The float32 parts ([..., 2]) of a complex tensor argument."""
        v = self.value(arg)
        if not isinstance(v, Complex):
            raise Unsupported(f"argument {arg} is not a complex tensor dyngraph holds")
        return v.lt

    def is_complex(self, arg) -> bool:
        return isinstance(arg, fx.Node) and isinstance(self.values.get(arg), Complex)

    def is_tensor(self, arg) -> bool:
        return isinstance(arg, fx.Node) and isinstance(self.values.get(arg), LogicalTensor)

    def type(self, lt: LogicalTensor) -> TensorType:
        return self.types[lt.id]

    def size(self, v):
        """An int or Expr for a size argument (int, SymInt node, SymInt)."""
        if isinstance(v, fx.Node):
            got = self.value(v)
            if isinstance(got, (int, Expr)) and not isinstance(got, bool):
                return got.value if isinstance(got, Expr) and got.is_const else got
            raise Unsupported(f"argument {v} is not a size")
        return self.sym.dim_or_int(v)

    def sizes(self, vs) -> tuple:
        return tuple(self.size(v) for v in vs)

    def supports(self, kind: OpKind) -> bool:
        return kind in self.kinds

    def emit(self, kind: OpKind, inputs: Sequence[LogicalTensor], attrs: Optional[dict] = None,
             dtype: Optional[DataType] = None, n_out: int = 1, name: Optional[str] = None):
        """Add an op; returns its output (or outputs). Its shapes are inferred now."""
        if kind not in self.kinds:
            raise Unsupported(f"the backend has no {kind.name}")
        inputs = list(inputs)
        for lt in inputs:
            if lt.id not in self.types:
                raise Unsupported(f"input {lt.label} of {kind.name} has no known type")
        provisional = dtype or (inputs[0].dtype if inputs else DataType.f32)
        outs = [LogicalTensor(self.ids.next_tensor + k, provisional, None) for k in range(n_out)]
        label = name or f"{self.node.name if self.node is not None else 'op'}.{kind.name}"
        op = Op(self.ids.next_op, kind, inputs, outs, attrs or {}, label)
        try:
            in_types = [self.types[lt.id] for lt in inputs]
            types, ctx, _ = infer_new_op(schema_of(kind), op.attrs, in_types, n_out, op.label, op.name, op.outputs)
        except DyngraphError as e:
            raise Unsupported(str(e)) from None
        if ctx.value_symbols:
            raise Unsupported(f"{kind.name} reads sizes from tensor values")
        if dtype is not None and any(t.dtype is not dtype for t in types):
            raise Unsupported(f"{kind.name} produces {types[0].dtype}, not {dtype}")
        outs = [self.new_tensor(t.dtype) for t in types]
        op.outputs = outs
        for lt, t in zip(outs, types):
            self.types[lt.id] = t
        self.ops.append(op)
        self.op_nodes[op.id] = self.node
        self.ids.op()
        w = written_input(op)
        if w is not None and self.is_state(inputs[w]):
            self.state_root[outs[0].id] = self.state_root.get(inputs[w].id, inputs[w].id)
        return outs[0] if n_out == 1 else outs

    def is_state(self, lt: LogicalTensor) -> bool:
        """Whether ``lt`` is a STATE tensor or a version of one (written in place)."""
        return lt.property is STATE or lt.id in self.state_root

    # helpers shared by converters
    def cast(self, lt: LogicalTensor, dtype: DataType) -> LogicalTensor:
        if lt.dtype is dtype:
            return lt
        return self.emit(OpKind.TypeCast, [lt], dtype=dtype)

    def full(self, value, dtype: DataType, shape=()) -> LogicalTensor:
        """A tensor filled with ``value`` (a number, or a size expression: a scalar only).
        Small static ones are constants (data, no op: they join whichever
        partition uses them); others are Full ops sized by their expressions."""
        if isinstance(value, Expr) and value.is_const:
            value = value.value
        if isinstance(value, Expr):
            if tuple(shape) != ():
                raise Unsupported("a symbolic fill value of a non-scalar")
            return self.expr_tensor(value, dtype)
        if isinstance(value, bool):
            value = float(value)
        shape = tuple(shape)
        if all(isinstance(d, int) for d in shape) and dtype is not DataType.bf16 and int(np.prod(shape)) <= SMALL_CONSTANT:
            return self.constant(np.full(shape, value, dtype=dtype.numpy))
        key = (float(value), dtype, shape, self.node)
        hit = self._full_cache.get(key)
        if hit is not None:
            return hit
        lt = self.emit(OpKind.Full, [], {"shape": list(shape), "value": float(value)}, dtype=dtype)
        self._full_cache[key] = lt
        return lt

    def constant(self, data: np.ndarray, name: Optional[str] = None) -> LogicalTensor:
        """A CONSTANT tensor holding ``data`` (made at conversion, e.g. a scalar operand)."""
        if not data.flags.c_contiguous:
            data = data.copy(order="C")  # (np.ascontiguousarray would make a 0-d array 1-d)
        key = (data.dtype.str, data.shape, data.tobytes())
        hit = self._const_cache.get(key)
        if hit is not None:
            return hit
        lt = self.new_tensor(DataType.from_numpy(data.dtype), list(data.shape), CONSTANT, name)
        self.types[lt.id] = TensorType(lt.dtype, tuple(Expr.const(d) for d in data.shape))
        self.data[lt.id] = data
        self.torch_constants[lt.id] = torch.from_numpy(data.copy())
        self._const_cache[key] = lt
        return lt

    def expr_tensor(self, e: Expr, dtype: DataType) -> LogicalTensor:
        """A 0-d tensor holding the value of a size expression (an Arange of one element)."""
        one = self.emit(OpKind.Arange, [], {"start": e, "end": e + 1, "step": 1}, dtype=DataType.i64)
        return self.cast(self.reshape(one, ()), dtype)

    def operand(self, arg, dtype: DataType) -> LogicalTensor:
        """A tensor argument cast to ``dtype``, or a number / size as a 0-d tensor of ``dtype``."""
        if isinstance(arg, fx.Node):
            v = self.value(arg)
            if isinstance(v, LogicalTensor):
                return self.cast(self.tensor(arg), dtype)
            if isinstance(v, FloatScalar):
                return self.cast(v.lt, dtype)
            if isinstance(v, (int, float, Expr)):
                return self.full(v, dtype)
            raise Unsupported(f"argument {arg} is neither a tensor nor a number")
        if isinstance(arg, (int, float, bool)):
            return self.full(arg, dtype)
        if isinstance(arg, torch.SymInt):
            return self.full(self.sym.expr(arg), dtype)
        raise Unsupported(f"argument {arg!r} is neither a tensor nor a number")

    def reshape(self, lt: LogicalTensor, shape) -> LogicalTensor:
        shape = tuple(shape)
        cur = self.types[lt.id].shape
        if len(cur) == len(shape) and all(as_expr(a) == as_expr(b) for a, b in zip(cur, shape)):
            return lt
        return self.emit(OpKind.StaticReshape, [lt], {"shape": list(shape)})

    def transpose(self, lt: LogicalTensor, order) -> LogicalTensor:
        order = list(order)
        if order == list(range(len(order))):
            return lt
        return self.emit(OpKind.StaticTranspose, [lt], {"order": order})

    # --------------------------------------------------------------- conversion
    def run(self) -> Converted:
        ep = self.ep
        sig = ep.graph_signature
        graph = ep.graph
        self.input_specs = {s.arg.name: s for s in sig.input_specs if hasattr(s.arg, "name")}
        self.mutated_buffers = {s.target for s in sig.output_specs if s.kind is OutputKind.BUFFER_MUTATION}
        self.user_inputs: List[Optional[int]] = []
        self.user_input_values: List[Any] = []
        self.states: Dict[str, int] = {}
        self.buffers: Dict[int, torch.Tensor] = {}
        self.buffer_ids: Dict[str, int] = {}
        self.user_input_pos: Dict[str, int] = {}
        for node in graph.nodes:
            self.node = node
            if node.op == "placeholder":
                self._placeholder(node)
            elif node.op == "call_function":
                self._call(node)
            elif node.op == "get_attr":
                obj = ep.graph_module
                for part in node.target.split("."):
                    obj = getattr(obj, part)
                self.values[node] = obj
            elif node.op == "output":
                return self._finish(node)
        raise CompileError("the exported graph has no output node")

    def _placeholder(self, node: fx.Node) -> None:
        spec = self.input_specs.get(node.name)
        fake = node.meta.get("val")
        kind = spec.kind if spec is not None else InputKind.USER_INPUT
        if kind is InputKind.USER_INPUT:
            self.user_input_pos[node.name] = len(self.user_inputs)
            if isinstance(fake, torch.Tensor):
                lt = self._declare(fake, node.name)
                self.values[node] = lt
                self.user_inputs.append(lt.id)
                self.user_input_values.append(None)
            elif isinstance(fake, torch.SymInt):
                raise CompileError(f"input {node.name} is a symbolic int; pass sizes as tensor shapes")
            else:
                self.values[node] = fake
                self.user_inputs.append(None)
                self.user_input_values.append(fake)
            return
        if kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
            t = self.ep.state_dict.get(spec.target) if spec.target in self.ep.state_dict else self.ep.constants.get(spec.target)
            if not isinstance(t, torch.Tensor):
                raise CompileError(f"{node.name}: no data for {spec.target}")
            t = t.detach()
            if kind is InputKind.BUFFER and spec.target in self.mutated_buffers:
                if spec.target in self.runner_buffers:
                    lt = self._declare(t, node.name)
                    self.buffers[lt.id] = t.clone()
                else:
                    lt = self._declare(t, node.name, STATE)
                    self.states[spec.target] = lt.id
                    if lt.id not in self.opaque:
                        self.data[lt.id] = to_numpy(t.contiguous())
                self.buffer_ids[spec.target] = lt.id
                self.torch_constants[lt.id] = t
                self.values[node] = lt
                return
            if t.dtype is torch.complex64:  # held as its float32 parts, with no state-dict name (weights=
                parts = torch.view_as_real(t.resolve_conj()).contiguous()  # and weight_type= name real ones)
                lt = self._declare(parts, node.name, CONSTANT)
                self.torch_constants[lt.id] = parts
                if lt.id not in self.opaque:
                    self.data[lt.id] = to_numpy(parts)
                    self.values[node] = Complex(lt)
                else:
                    self.values[node] = lt
                return
            lt = self._declare(t, node.name, CONSTANT)
            self.torch_constants[lt.id] = t
            self.param_names[lt.id] = spec.target
            if lt.id not in self.opaque:
                self.data[lt.id] = to_numpy(t.contiguous())
            self.values[node] = lt
            return
        raise CompileError(f"input {node.name} of kind {kind.name} is not supported")

    def _call(self, node: fx.Node) -> None:
        target = node.target
        if target in IGNORED:
            self.values[node] = None
            return
        if target is operator.getitem:
            src, idx = node.args
            v = self.values.get(src)
            if isinstance(v, (tuple, list)):
                self.values[node] = v[idx]
                return
        val = node.meta.get("val")
        bindings = node.meta.get("unbacked_bindings")
        if bindings and all(u.is_integer for u in bindings):  # sizes computed from tensor data (x[x > 0])
            self._wildcard(node, "computes sizes from tensor data")
            return
        if isinstance(val, (torch.SymInt, int)) and not isinstance(val, bool) and not isinstance(val, torch.Tensor):
            # a size computed from sizes: its expression is in the node's value
            if isinstance(val, torch.SymInt) and not free_unbacked_symbols(val) <= self.defined:
                raise CompileError(f"{node.name} ({_target_name(target)}) computes a size from tensor data "
                                   f"that no node's result carries; not supported")
            try:
                self.values[node] = self.sym.expr(val)
                return
            except Unsupported as e:
                raise CompileError(f"{node.name}: the size {val} has no dyngraph form ({e})") from None
        if isinstance(val, torch.SymBool) and self._size_assert(node, val):
            return
        if isinstance(val, torch.SymBool) and all(u.target in IGNORED for u in node.users):
            cond = float_assert(self, node)  # (on a float from tensor data: checked after the call)
            if cond is not None:
                self.value_asserts.append(cond)
                self.values[node] = None
                return
        if isinstance(val, torch.SymBool):
            raise CompileError(f"{node.name}: symbolic {type(val).__name__} values are not supported")
        if node in self.forced:
            self._wildcard(node, self.forced[node])
            return
        complex_ = _reads_or_makes_complex(node)
        conv = COMPLEX_CONVERTERS.get(canonical(target)) if complex_ else converter_of(target)
        if conv is None:
            self._wildcard(node, "no converter of complex tensors" if complex_ else "no converter")
            return
        mark_ops = len(self.ops)
        try:
            self._check_types(node, complex_)
            value = conv(self, node, bind(node))
            self._check_value(node, value)
        except Unsupported as e:
            self._rollback(mark_ops)
            self._wildcard(node, str(e) or "unsupported arguments")
            return
        except (ForceFallback, RunnerBuffer):
            raise
        except Exception as e:  # a converter that did not foresee these arguments: the node runs in torch
            self._rollback(mark_ops)
            self._wildcard(node, f"the converter failed: {type(e).__name__}: {e}")
            return
        self.values[node] = value

    def _size_assert(self, node: fx.Node, val) -> bool:
        """A condition torch asserts at run time (``_assert_scalar``) on sizes computed from tensor
        data: checked by the runner once those sizes are known. False for other conditions."""
        unbacked = free_unbacked_symbols(val)
        if not unbacked or not unbacked <= self.defined:
            return False
        if not all(u.target in IGNORED for u in node.users):
            return False
        try:
            self.size_asserts.append(guard_of(val.node.expr, self.sym))
        except (Unsupported, ValueError, ArithmeticError, TypeError):
            return False
        self._size_points = None  # (sizes are compared where it holds)
        self.values[node] = None
        return True

    def _rollback(self, mark_ops: int) -> None:
        for op in self.ops[mark_ops:]:
            self.op_nodes.pop(op.id, None)
        del self.ops[mark_ops:]
        self._full_cache = {k: v for k, v in self._full_cache.items() if k[3] is not self.node}

    def _check_types(self, node: fx.Node, complex_ok: bool = False) -> None:
        def check(v, what):
            if isinstance(v, torch.Tensor):
                cplx = complex_ok and v.dtype is torch.complex64  # held as float32 parts: one more axis
                if dg_dtype(v.dtype) is None and not cplx:
                    raise Unsupported(f"{what} has dtype {v.dtype}")
                if v.dim() + cplx > MAX_RANK:
                    raise Unsupported(f"{what} has rank {v.dim()} (dyngraph tensors have at most {MAX_RANK} dimensions"
                                      f"{', a complex one ' + str(MAX_RANK - 1) if cplx else ''})")
                if v.device.type != "cpu":
                    raise Unsupported(f"{what} is on {v.device}")
                if any(isinstance(d, int) and d == 0 for d in v.shape):
                    raise Unsupported(f"{what} is empty (shape {list(v.shape)}; dyngraph sizes are at least 1)")
            elif isinstance(v, (tuple, list)):
                for x in v:
                    check(x, what)

        val = node.meta.get("val")
        if isinstance(val, (tuple, list)) and all(u.target is operator.getitem for u in node.users):
            read = {u.args[1] for u in node.users}  # outputs nothing reads may be empty (unused statistics)
            for i, v in enumerate(val):
                if i in read:
                    check(v, f"result {i}")
        else:
            check(val, "the result")

    def _check_value(self, node: fx.Node, value) -> None:
        """A converter's result must be torch's value: same dtype, rank and sizes."""
        fake = node.meta.get("val")
        if isinstance(fake, torch.SymFloat):
            t = self.types.get(value.lt.id) if isinstance(value, FloatScalar) else None
            if t is None or t.dtype is not DataType.f32 or t.rank != 0:
                raise Unsupported("the converter produced no float scalar")
            return
        if isinstance(fake, torch.Tensor) and fake.dtype.is_complex:
            if not isinstance(value, Complex):
                raise Unsupported("the converter produced no complex value")
            t = self.types.get(value.lt.id)
            if t is None or t.dtype is not DataType.f32 or t.rank != fake.dim() + 1 or t.shape[-1] != as_expr(2):
                raise Unsupported(f"converted to parts {t}, torch has {fake.dtype}{list(fake.shape)}")
            for e, s in zip(t.shape, fake.shape):
                self._check_size(e, s, t, fake)
            return
        if isinstance(fake, torch.Tensor):
            if not isinstance(value, LogicalTensor):
                raise Unsupported("the converter produced no tensor")
            t = self.types.get(value.id)
            want = dg_dtype(fake.dtype)
            if t is None or t.dtype is not want or t.rank != fake.dim():
                got = "unknown" if t is None else f"{t.dtype}{list(t.shape)}"
                raise Unsupported(f"converted to {got}, torch has {fake.dtype}{list(fake.shape)}")
            for e, s in zip(t.shape, fake.shape):
                self._check_size(e, s, t, fake)

    def _check_size(self, e: Expr, s, t, fake) -> None:
        """One of a converted tensor's sizes against torch's: static or dynamic, they must agree."""
        if isinstance(s, int):
            if e.is_const and e.value != s:
                raise Unsupported(f"converted to shape {list(t.shape)}, torch has {list(fake.shape)}")
            return  # (a converter's expression that torch knows to be this constant: not decided here)
        try:
            want = self.sym.expr(s)
        except Unsupported:
            return
        if self._size_points is None:  # (once the inputs' symbols are known: after the placeholders)
            self._size_points = program_points(self.ep, self.sym, self._export_guards() + self.size_asserts)
        at = differ_at(e, want, self._size_points)
        if at is not None:
            where = ", ".join(f"{k.name}={v}" for k, v in at.items())
            raise Unsupported(f"converted to shape {list(t.shape)}, torch has {list(fake.shape)} "
                              f"(a size differs at {where})")

    def _export_guards(self) -> List[Guard]:
        """The export's guards over the inputs' sizes (read once the placeholders are mapped)."""
        if self._guards is None:
            self._guards = program_guards(self.ep, self.sym)
        return self._guards

    def _template(self, a):
        """How to find an argument's value when the node runs in PyTorch."""
        if isinstance(a, fx.Node):
            v = self.values.get(a)
            if isinstance(v, Missing):
                raise ForceFallback(v.node, f"output {v.index} is used by {self.node.name}")
            return self._value_template(v)
        if isinstance(a, (list, tuple)):
            return type(a)(self._template(x) for x in a)
        if isinstance(a, dict):
            return {k: self._template(x) for k, x in a.items()}
        if isinstance(a, torch.SymInt):
            return Ref(Ref.EXPR, self.sym.expr(a))
        return a

    def _value_template(self, v):
        if isinstance(v, LogicalTensor):
            return Ref(Ref.TENSOR, v.id)
        if isinstance(v, Complex):
            return Ref(Ref.COMPLEX, v.lt.id)
        if isinstance(v, FloatScalar):
            return Ref(Ref.SCALAR, v.lt.id)
        if isinstance(v, Expr):
            return Ref(Ref.EXPR, v)
        if isinstance(v, (list, tuple)):
            return type(v)(self._value_template(x) for x in v)
        return v

    def _wildcard(self, node: fx.Node, reason: str) -> None:
        """The node runs in PyTorch: a Wildcard op with torch's output shapes."""
        self.node = node
        args = self._template(node.args)
        kwargs = self._template(dict(node.kwargs))
        inputs: List[LogicalTensor] = []

        def collect(t):
            if isinstance(t, Ref):
                if t.kind in (Ref.TENSOR, Ref.COMPLEX, Ref.SCALAR):
                    lt = self.tensors[t.value]
                    if lt not in inputs:
                        inputs.append(lt)
            elif isinstance(t, (list, tuple)):
                for x in t:
                    collect(x)
            elif isinstance(t, dict):
                for x in t.values():
                    collect(x)

        collect(args)
        collect(kwargs)
        for sym in template_symbols((args, kwargs)):  # a size from tensor data: after the node computing it
            tok = self.size_tokens.get(sym)
            if tok is not None and tok not in inputs:
                inputs.append(tok)
        outputs: List[LogicalTensor] = []

        def declare(v, path):
            if isinstance(v, torch.Tensor):
                lt = self._declare(v, f"{node.name}{path}")
                outputs.append(lt)
                return lt
            if isinstance(v, (list, tuple)):
                return type(v)(declare(x, f"{path}[{i}]") for i, x in enumerate(v))
            if isinstance(v, torch.SymInt):
                try:
                    return self.sym.expr(v)
                except Unsupported:
                    raise CompileError(f"{node.name} ({node.target}) computes a data-dependent size; not supported") from None
            if isinstance(v, torch.SymFloat):  # (the runner stores the float as a 0-d tensor)
                lt = self.new_tensor(DataType.f32, [], name=f"{node.name}{path}")
                self.types[lt.id] = TensorType(DataType.f32, ())
                self.torch_dtypes[lt.id] = torch.float32
                outputs.append(lt)
                return FloatScalar(lt)
            return v

        bindings = {u: path for u, path in (node.meta.get("unbacked_bindings") or {}).items() if u.is_integer}
        self.defined |= set(bindings)
        if bindings:  # size probes again, over the new sizes too
            self._size_points = None
        value = declare(node.meta.get("val"), "")
        defines = [(self.sym.dim(u).sym, path) for u, path in bindings.items()]
        if defines:  # (no data: an edge of the graph to the nodes that read these sizes in PyTorch)
            tok = self.new_tensor(DataType.u8, [1], name=f"{node.name}.sizes")
            outputs.append(tok)
            for sym, _ in defines:
                self.size_tokens[sym] = tok
        op = Op(self.ids.op(), OpKind.Wildcard, inputs, outputs, {}, node.name)
        self.ops.append(op)
        self.op_nodes[op.id] = node
        self.wildcards[op.id] = WildcardInfo(node, args, kwargs, self._value_template(value), defines)
        self.fallbacks[op.id] = Fallback(node.name, _target_name(node.target), reason)
        self.values[node] = value

    # ------------------------------------------------------------------- finish
    def _finish(self, out_node: fx.Node) -> Converted:
        sig = self.ep.graph_signature
        results = out_node.args[0]
        outputs, roots, user_roots = [], [], []
        input_mutations, buffer_writes = [], []
        state_maps = None  # made again only after a copy into a state
        self.node = out_node
        for spec, v in zip(sig.output_specs, results):
            val = self.values.get(v) if isinstance(v, fx.Node) else v
            if isinstance(val, Missing):
                raise ForceFallback(val.node, "its output is a program output")
            if isinstance(val, Complex):  # (the runner returns tensors of dyngraph's dtypes)
                if v.op != "call_function":
                    raise CompileError(f"output {v.name} returns a complex64 constant as it is; not supported")
                raise ForceFallback(v, "its complex result is a program output")
            if spec.kind is OutputKind.USER_OUTPUT:
                outputs.append(self._value_template(val))
                if isinstance(val, (LogicalTensor, FloatScalar)):
                    user_roots.append(getattr(val, "lt", val))
            elif spec.kind is OutputKind.BUFFER_MUTATION:
                if not isinstance(val, LogicalTensor):
                    raise CompileError(f"buffer {spec.target} is assigned a non-tensor")
                sid = self.states.get(spec.target)
                if sid is not None:
                    if state_maps is None:
                        state_maps = self._state_maps()
                    new_val = self._final_state_write(spec.target, sid, val, *state_maps)
                    if new_val is not val:
                        state_maps = None  # a copy was emitted: a new version of sid
                    val = new_val
                    roots.append(val)
                else:
                    buffer_writes.append((spec.target, self.buffer_ids[spec.target], val.id))
                    user_roots.append(val)
            elif spec.kind is OutputKind.USER_INPUT_MUTATION:
                if not isinstance(val, LogicalTensor):
                    raise CompileError(f"input {spec.target} is assigned a non-tensor")
                input_mutations.append((self.user_input_pos[spec.target], val.id))
                user_roots.append(val)
            else:
                raise CompileError(f"output {v} of kind {spec.kind.name} is not supported")
        user_roots += [lt for lt, _ in self.value_asserts]
        live_ops = self._live_ops(roots + user_roots)
        self._check_in_place(live_ops)
        sink_id = None
        needed = [lt for lt in dict.fromkeys(user_roots) if lt.id in self._produced(live_ops)]
        if needed:
            sink = Op(self.ids.op(), OpKind.Wildcard, needed, [], {}, "outputs")
            live_ops.append(sink)
            sink_id = sink.id
        live_ids = {op.id for op in live_ops}
        used = {lt.id for op in live_ops for lt in op.inputs}
        return Converted(
            ops=live_ops,
            op_nodes={k: v for k, v in self.op_nodes.items() if k in live_ids},
            tensors=self.tensors,
            data={k: v for k, v in self.data.items() if k in used},
            torch_constants=self.torch_constants,
            param_names=self.param_names,
            inputs=self.user_inputs,
            input_values=self.user_input_values,
            outputs=outputs,
            input_mutations=input_mutations,
            buffer_writes=buffer_writes,
            buffers=self.buffers,
            states={k: v for k, v in self.states.items() if v in used},
            wildcards={k: v for k, v in self.wildcards.items() if k in live_ids},
            fallbacks=[f for k, f in self.fallbacks.items() if k in live_ids],
            symbols=self.sym,
            guards=[g for g in self._export_guards() if not g.implied()],
            size_asserts=self.size_asserts,
            value_asserts=[(lt.id, msg) for lt, msg in self.value_asserts],
            sink_id=sink_id,
            torch_dtypes=self.torch_dtypes,
            types=self.types,
        )

    def _state_maps(self):
        """(state versions, the ids of the versions some op writes) of the ops so far, for
        _final_state_write."""
        versions = state_versions(self.ops, lambda tid: self.tensors[tid].property)
        written = {op.inputs[w].id for op in self.ops if (w := written_input(op)) is not None}
        return versions, written

    def _final_state_write(self, name: str, sid: int, val: LogicalTensor, versions, written) -> LogicalTensor:
        """The buffer's new value must be written into its state: a version of
        the state already is; anything else is copied in (whole-buffer assignment).
        ``versions`` and ``written``: _state_maps() of the ops as they are."""
        state_lt = self.tensors[sid]
        if versions.get(val.id) == sid:
            return val
        if val.id in self.opaque or sid in self.opaque:
            raise RunnerBuffer(name, "its new value has no dyngraph form")
        # the latest version of the state (the one no write consumes)
        latest = [t for t, s in versions.items() if s == sid and t not in written] or [sid]
        dst = self.tensors[latest[0]]
        rank = self.types[sid].rank
        try:
            v = self.cast(val, state_lt.dtype)
            return self.emit(OpKind.CopyToSlice, [dst, v], {"starts": [0] * rank}, name=f"{name}.assign")
        except Unsupported as e:
            raise RunnerBuffer(name, str(e)) from None

    def _check_in_place(self, ops) -> None:
        """A state version that is written again in place may not be read by
        anything else (the reader could see the later value): such a buffer is
        kept by the runner instead."""
        versions = state_versions(ops, lambda tid: self.tensors[tid].property)
        names = {sid: name for name, sid in self.states.items()}
        readers: Dict[int, List[Op]] = {}
        for op in ops:
            for t in op.inputs:
                if t.id in versions:
                    readers.setdefault(t.id, []).append(op)
        for op in ops:
            w = written_input(op)
            if w is None or op.inputs[w].id not in versions:
                continue
            dst = op.inputs[w].id
            for other in readers.get(dst, ()):
                if other is not op:
                    name = names.get(versions[dst], str(versions[dst]))
                    raise RunnerBuffer(name, f"{other.name} reads a value that {op.name} then overwrites in place")

    def _produced(self, ops) -> set:
        return {lt.id for op in ops for lt in op.outputs}

    def _live_ops(self, roots: Sequence[LogicalTensor]) -> List[Op]:
        live = {lt.id for lt in roots}
        keep = []
        for op in reversed(self.ops):
            if any(lt.id in live for lt in op.outputs):
                keep.append(op)
                live.update(lt.id for lt in op.inputs)
                if self.size_tokens:  # and the nodes computing the sizes from tensor data it uses
                    for lt in list(op.inputs) + list(op.outputs):
                        t = self.types.get(lt.id)
                        for d in (t.shape if t is not None else lt.shape) or ():
                            for sym in d.free_symbols() if isinstance(d, Expr) else ():
                                if sym in self.size_tokens:
                                    live.add(self.size_tokens[sym].id)
        keep.reverse()
        return keep


class RunnerBuffer(Exception):
    """A mutated buffer cannot live in a compiled partition's state; the runner keeps it."""

    def __init__(self, name: str, reason: str):
        super().__init__(reason)
        self.name = name
        self.reason = reason


def _reads_or_makes_complex(node: fx.Node) -> bool:
    """Whether a node's result, or a tensor among its arguments, is complex."""
    found = []

    def look(v):
        if isinstance(v, torch.Tensor) and v.dtype.is_complex:
            found.append(v)
        elif isinstance(v, (tuple, list)):
            for x in v:
                look(x)

    look(node.meta.get("val"))
    fx.node.map_arg((node.args, node.kwargs), lambda a: look(a.meta.get("val")))
    return bool(found)


def _target_name(target) -> str:
    if isinstance(target, torch._ops.OpOverload):
        return str(target)
    return getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or str(target)
