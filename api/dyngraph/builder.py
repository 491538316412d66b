"""GraphBuilder: a graph built with one call per op.

::

    import dyngraph as dg

    seq = dg.Dim("seq", max=4096)
    b = dg.GraphBuilder()
    x = b.input("x", dg.f32, [seq, 512])
    y = b.gelu(b.matmul(x, b.constant("w", w_array)))
    b.output(y)
    cp = b.compile(dg.Engine())          # the graph's one partition, compiled
    (out,) = cp(x_array)

Every op kind of the registry (``api/dyngraph/ops/``) is a method, named
after the kind in snake case (``MatMul`` -> ``matmul``, ``StaticReshape`` ->
``static_reshape``, ``LeakyReLU`` -> ``leaky_relu``; :func:`method_name`):
its inputs positionally, its attributes as keywords (checked against the
kind's declaration: an unknown, missing or ill-typed attribute is a
GraphError at the call), ``name=``, and ``dtype=`` for the kinds whose
output dtype is declared rather than inferred (``TypeCast``, ``Arange``,
``Full``, ``GenIndex``). The methods are made from the registry, so a new op
kind has one without code here; ``b.op(kind, inputs, attrs)`` is the
generic form. Each call infers the op's output types at once, so a mistake
is reported where the op is added, and the returned logical tensor carries
its dtype and (named-dimension) shape.

Tensor and op ids are handed out in order; ``compile`` passes the runtime
inputs in the order they were declared, then the constants, then the state.
"""

from __future__ import annotations

import inspect
import re
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np

from .dtypes import DataType
from .engine import EngineKind
from .errors import CompileError, GraphError
from .graph import Graph
from .inference import type_of
from .logical_tensor import CONSTANT, STATE, VARIABLE, LogicalTensor
from .op import Op, OpKind
from .op_pipeline import Ids, infer_new_op
from .ops import TensorType, schema_of
from .ops.registry import REQUIRED, check_arity, normalize_attrs, registered_kinds
from .stored_weight import StoredWeight
from .symbolic import UNKNOWN_DIM, Expr

# words of op kind names that are one word in snake case
_WORDS = ("MatMul", "SoftMax", "ReLU", "SiLU", "GELU", "RoPE", "ArgMax", "SoftPlus")
_TOKEN = re.compile("|".join(_WORDS) + r"|[A-Z]+(?![a-z])|[A-Z][a-z0-9]*|[a-z0-9]+")


def method_name(kind: OpKind) -> str:
    """The GraphBuilder method of an op kind: ``ScaledDotProductAttention`` ->
    ``scaled_dot_product_attention``, ``RMSNorm`` -> ``rms_norm``."""
    return "_".join(t.lower() for t in _TOKEN.findall(kind.name))


class GraphBuilder:
    """Build a graph op by op; see the module documentation."""

    def __init__(self, engine_kind: EngineKind = EngineKind.CPU):
        self.graph = Graph(engine_kind)
        self._ids = Ids()
        self._types: Dict[int, Optional[TensorType]] = {}
        self._mine: Dict[int, LogicalTensor] = {}  # the logical tensors handed out, by id
        self._symbols: dict = {}  # DYNAMIC_DIM symbols of the inputs, by (tensor id, dim)
        self._named: set = set()  # the symbols of named Dims (shown in output shapes)
        self.inputs: List[LogicalTensor] = []  # runtime inputs, in declaration order
        self.constant_tensors: List[LogicalTensor] = []
        self.state_tensors: List[LogicalTensor] = []
        self.constants: Dict[int, Any] = {}  # tensor id -> data (constants, and states given an initial value)
        self.outputs: List[LogicalTensor] = []

    # -- leaves ----------------------------------------------------------------
    def _leaf(self, name: str, dtype: DataType, shape, prop) -> LogicalTensor:
        if self.graph.is_finalized:
            raise GraphError("the graph is finalized: nothing can be added")
        if not isinstance(dtype, DataType):
            raise GraphError(f"{name!r}: dtype must be a dyngraph DataType, got {dtype!r}")
        lt = LogicalTensor(self._ids.tensor(), dtype, shape, property=prop, name=name)
        for d in lt.shape or ():
            if isinstance(d, Expr):  # a Dim, or an expression of Dims
                self._named.update(d.free_symbols())
        self._types[lt.id] = type_of(lt, self._symbols)
        self._mine[lt.id] = lt
        return lt

    def input(self, name: str, dtype: DataType, shape: Sequence) -> LogicalTensor:
        """A runtime input: ints, ``dg.Dim`` expressions and ``DYNAMIC_DIM``."""
        lt = self._leaf(name, dtype, list(shape), VARIABLE)
        self.inputs.append(lt)
        return lt

    def constant(self, name: str, data, dtype: Optional[DataType] = None) -> LogicalTensor:
        """A CONSTANT (a weight) holding ``data``: an array (its dtype, float64
        as f32, unless ``dtype`` is given, e.g. ``dg.bf16``) or a
        :class:`dyngraph.StoredWeight`."""
        if isinstance(data, StoredWeight):
            lt = self._leaf(name, dtype or DataType.f32, list(data.shape), CONSTANT)
        else:
            arr = np.asarray(data)
            if dtype is None:
                dtype = _dtype_of(arr, name)
            lt = self._leaf(name, dtype, list(arr.shape), CONSTANT)
            data = arr
        self.constant_tensors.append(lt)
        self.constants[lt.id] = data
        return lt

    def state(self, name: str, dtype: DataType, shape: Sequence[int], init=None) -> LogicalTensor:
        """A STATE tensor (a KV cache) of a static shape; zeros unless ``init`` is given."""
        lt = self._leaf(name, dtype, list(shape), STATE)
        self.state_tensors.append(lt)
        if init is not None:
            self.constants[lt.id] = init
        return lt

    def output(self, *tensors: LogicalTensor) -> None:
        """Mark results as the graph's outputs (in this order, at compile)."""
        for t in tensors:
            if self._mine.get(getattr(t, "id", None)) is not t:
                raise GraphError(f"output takes logical tensors of this builder, got {t!r}")
            self.outputs.append(t)

    # -- ops -------------------------------------------------------------------
    def op(self, kind: Union[OpKind, str], inputs: Sequence[LogicalTensor] = (), attrs: Optional[dict] = None, *,
           name: Optional[str] = None, dtype=None, n_outputs: Optional[int] = None):
        """Add an op of ``kind``; returns its output (a tuple when it has several).
        ``dtype``: the output's declared dtype, or a sequence of one per output
        (TopK's indices may be declared i32), else inferred."""
        if self.graph.is_finalized:
            raise GraphError("the graph is finalized: no ops can be added")
        if isinstance(kind, str):
            try:
                kind = OpKind[kind]
            except KeyError:
                raise GraphError(f"unknown op kind {kind!r}") from None
        schema = schema_of(kind)
        if schema is None:
            raise GraphError(f"op kind {kind.name} has no shape rule; it cannot be built")
        inputs = list(inputs)
        n_out = n_outputs if n_outputs is not None else schema.outputs[0]
        op = Op(self._ids.next_op, kind, inputs, [], attrs or {}, name)
        check_arity(schema, len(inputs), n_out, op.label)
        for i, lt in enumerate(inputs):
            if self._mine.get(getattr(lt, "id", None)) is not lt:
                raise GraphError(f"{op.label}: input {i} ({lt.label}) does not come from this builder")
        ins = [self._types[lt.id] for lt in inputs]
        known = all(t is not None for t in ins)
        if not known:
            normalize_attrs(schema, op.attrs, op.label)  # (checked now all the same)
        dtypes = list(dtype) if isinstance(dtype, (list, tuple)) else [dtype] * n_out
        if len(dtypes) != n_out or any(d is not None and not isinstance(d, DataType) for d in dtypes):
            raise GraphError(f"{op.label}: dtype= must be a DataType or one per output ({n_out}), got {dtype!r}")
        if known:
            declared = [LogicalTensor(self._ids.next_tensor + k, d) if d is not None else None
                        for k, d in enumerate(dtypes)]
            types, _, _ = infer_new_op(schema, op.attrs, ins, n_out, op.label, op.name, declared, counted="asked")
            for t, d in zip(types, dtypes):
                if d is not None and t.dtype is not d:
                    raise GraphError(f"{op.label}: produces {t.dtype}, dtype={d} was asked")
        else:  # an input of unknown shape (an output of a Wildcard): finalize infers
            if any(d is None for d in dtypes):
                raise GraphError(f"{op.label}: an input's type is unknown; give the output's dtype=")
            types = [None] * n_out
        outs = []
        for k, t in enumerate(types):
            shape = None if t is None else [self._shown(d) for d in t.shape]
            lt = LogicalTensor(self._ids.tensor(), t.dtype if t is not None else dtypes[k], shape,
                               name=name if n_out == 1 else (f"{name}.{k}" if name else None))
            self._types[lt.id] = t
            self._mine[lt.id] = lt
            outs.append(lt)
        op.outputs = outs
        self.graph.add_op(op)
        self._ids.op()
        return outs[0] if n_out == 1 else tuple(outs)

    def wildcard(self, inputs: Sequence[LogicalTensor], outputs: Sequence[tuple], name: Optional[str] = None):
        """An op the backend does not run (its partition is unsupported, for the
        caller to run): outputs given as (dtype, shape) pairs."""
        op = Op(self._ids.next_op, OpKind.Wildcard, list(inputs), [], {}, name)
        outs = []
        for dt, shape in outputs:
            lt = LogicalTensor(self._ids.tensor(), dt, list(shape))
            self._types[lt.id] = type_of(lt, self._symbols)
            self._mine[lt.id] = lt
            outs.append(lt)
        op.outputs = outs
        self.graph.add_op(op)
        self._ids.op()
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _shown(self, d: Expr):
        """An inferred dimension as the returned logical tensor shows it: ints
        and expressions of named Dims; other symbols (anonymous dynamic
        dimensions, values read at execution) are left for finalize."""
        if d.is_const:
            return d.value
        return d if d.free_symbols() <= self._named else UNKNOWN_DIM

    # -- finishing ---------------------------------------------------------------
    def finalize(self) -> Graph:
        self.graph.finalize()
        return self.graph

    def partitions(self):
        return self.finalize().get_partitions()

    @property
    def compile_inputs(self) -> List[LogicalTensor]:
        """What compile() passes: runtime inputs, then constants, then state."""
        return self.inputs + self.constant_tensors + self.state_tensors

    def compile(self, engine=None, **options):
        """Finalize and compile the graph's one partition (``options``: those of
        ``Partition.compile``: weight_type, cache_capacity...). A graph that
        splits into several partitions is compiled partition by partition
        through ``b.partitions()`` instead. ``engine`` defaults to the process's
        shared CPU engine (``Engine.shared()``)."""
        from .engine import Engine

        if not self.outputs:
            raise CompileError("the builder has no outputs: call output(...) first")
        parts = self.partitions()
        if len(parts) != 1 or not parts[0].is_supported():
            raise CompileError(f"the graph is {len(parts)} partitions ({', '.join(map(str, parts))}); "
                               f"compile them one by one through partitions()")
        (part,) = parts
        ports = {lt.id for lt in part.get_input_ports()}
        ins = [lt for lt in self.compile_inputs if lt.id in ports]
        consts = {tid: v for tid, v in self.constants.items() if tid in ports}
        engine = engine if engine is not None else Engine.shared()
        return part.compile(ins, list(self.outputs), engine, constants=consts, **options)


def _dtype_of(arr: np.ndarray, name: str) -> DataType:
    """An array's dyngraph dtype; other floats (float64) are stored f32, as compile converts them."""
    try:
        return DataType.from_numpy(arr.dtype)
    except Exception:
        if arr.dtype.kind == "f":
            return DataType.f32
        raise GraphError(f"constant {name!r}: numpy {arr.dtype} has no dyngraph dtype; pass dtype=") from None


_ANNOTATION = {"int": int, "bool": bool, "float": float, "str": str, "ints": Sequence[int],
               "floats": Sequence[float], "expr": Union[int, Expr], "exprs": Sequence[Union[int, Expr]],
               "dtype": DataType}


def _method(kind: OpKind):
    schema = schema_of(kind)
    lo, hi = schema.inputs

    def call(self, *inputs, name: Optional[str] = None, dtype: Optional[DataType] = None,
             n_outputs: Optional[int] = None, **attrs):
        if hi != lo and len(inputs) == 1 and isinstance(inputs[0], (list, tuple)):
            inputs = tuple(inputs[0])  # b.concat([x, y], axis=0)
        while inputs and inputs[-1] is None:  # an optional input left out
            inputs = inputs[:-1]
        return self.op(kind, inputs, attrs, name=name, dtype=dtype, n_outputs=n_outputs)

    call.__name__ = call.__qualname__ = method_name(kind)
    P = inspect.Parameter
    params = [P("self", P.POSITIONAL_ONLY)]
    if hi < 0:
        params.append(P("inputs", P.VAR_POSITIONAL, annotation=LogicalTensor))
    else:
        for i in range(hi):
            pname = schema.input_names[i] if i < len(schema.input_names) else f"input{i}"
            params.append(P(pname, P.POSITIONAL_ONLY, default=P.empty if i < lo else None, annotation=LogicalTensor))
    for an, spec in schema.attrs.items():
        default = P.empty if spec.default is REQUIRED else spec.default
        params.append(P(an, P.KEYWORD_ONLY, default=default, annotation=_ANNOTATION[spec.kind]))
    params += [P("name", P.KEYWORD_ONLY, default=None), P("dtype", P.KEYWORD_ONLY, default=None)]
    if schema.outputs[1] != schema.outputs[0]:
        params.append(P("n_outputs", P.KEYWORD_ONLY, default=None))
    call.__signature__ = inspect.Signature(params)
    call.__doc__ = f"{kind.name}: {schema.doc.strip()}" if schema.doc else kind.name
    return call


def _install_methods() -> None:
    seen: Dict[str, OpKind] = {}
    for kind in sorted(registered_kinds(), key=int):
        m = method_name(kind)
        if m in seen or hasattr(GraphBuilder, m):
            raise RuntimeError(f"GraphBuilder method {m!r} of {kind.name} clashes with {seen.get(m, 'a method')}")
        seen[m] = kind
        setattr(GraphBuilder, m, _method(kind))


_install_methods()

__all__ = ["GraphBuilder", "method_name"]
