"""The op registry: for each op kind, its arity, its attributes and its shape rule.

Each op family lives in one module of this package (``elementwise``,
``matmul``, ...) and registers its kinds with :func:`register`. A shape rule
takes the op's normalized attributes, the input types and an
:class:`InferContext`, and returns the output types. Rules run once, on
symbolic shapes, at finalize and compile time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import math
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from ..dtypes import DataType
from ..errors import DTypeError, GraphError, ShapeError
from ..op import OpKind
from ..symbolic import Expr, as_expr, format_shape

REQUIRED = object()


class TensorType(NamedTuple):
    """A tensor's type during inference: dtype and a shape of expressions."""

    dtype: DataType
    shape: Tuple[Expr, ...]

    @property
    def rank(self) -> int:
        return len(self.shape)


ATTR_KINDS = ("int", "bool", "float", "str", "ints", "floats", "expr", "exprs", "dtype")

# Tensors have rank <= MAX_RANK (6); ggml has 4 dimensions. A kind takes tensors
# of rank > 4 when it says how (``high_rank=``): "elementwise" - its inputs
# broadcast to its one output like numpy's, and the backend merges the axes
# every input treats alike before lowering it; "lowering" - its lowering handles
# rank 6 itself. Other kinds take rank 4 at most.
GGML_RANK = 4
HIGH_RANK = (None, "elementwise", "lowering")
ALL_INPUTS = (-1,)  # same_dtypes: every input of the op

# Classes of dtypes an op input or output may have (the C++ side checks the same table).
# "any" is every type the general ops compute on; the quantized types (u8, s8,
# s4, u4, f8_e4m3, f8_e5m2) only go to ops that declare them (Quantize,
# Dequantize and their Dynamic forms, TypeCast for f8; u8 / s8 to the int8 MatMul).
_COMPUTE = (DataType.f32, DataType.f16, DataType.bf16, DataType.i32, DataType.i64, DataType.boolean)
DTYPE_CLASSES: Dict[str, Tuple[DataType, ...]] = {
    "any": _COMPUTE,
    "float": (DataType.f32, DataType.f16, DataType.bf16),
    "int": (DataType.i32, DataType.i64),
    "bool": (DataType.boolean,),
    "nonbool": tuple(d for d in _COMPUTE if d is not DataType.boolean),
    "float_or_bool": (DataType.f32, DataType.f16, DataType.bf16, DataType.boolean),
    "int_or_f32": (DataType.i32, DataType.i64, DataType.f32),
    # quantization (ops/quantize.py)
    "quant": (DataType.u8, DataType.s8, DataType.s4, DataType.u4, DataType.f8_e4m3, DataType.f8_e5m2),
    "quant_zp": (DataType.u8, DataType.s8, DataType.s4, DataType.u4, DataType.i32),
    "int8": (DataType.u8, DataType.s8),
    "any_or_f8": _COMPUTE + (DataType.f8_e4m3, DataType.f8_e5m2),
    "float_or_int8": (DataType.f32, DataType.f16, DataType.bf16, DataType.u8, DataType.s8),
}
_DTYPE_WORDS = {"float": "a floating-point", "int": "an i32 or i64", "bool": "a bool", "nonbool": "a non-bool",
                "float_or_bool": "a floating-point or bool", "int_or_f32": "an i32, i64 or f32",
                "any": "an f32, f16, bf16, i32, i64 or bool", "quant": "a u8, s8, s4, u4, f8_e4m3 or f8_e5m2",
                "quant_zp": "a u8, s8, s4, u4 or i32", "int8": "a u8 or s8",
                "any_or_f8": "an f32, f16, bf16, i32, i64, bool, f8_e4m3 or f8_e5m2",
                "float_or_int8": "a floating-point, u8 or s8"}


@dataclass(frozen=True)
class AttrSpec:
    """One attribute of an op kind: its kind, default (``REQUIRED`` when it
    has none) and constraints. Every constraint here is also checked by the
    C++ reader (generated from this declaration by schema/generate.py), so a
    file cannot carry a value the Python API refuses.

    - ``choices``: the allowed strings of a ``str`` attribute;
    - ``min`` / ``max``: inclusive bounds of an int or float (each element of ints/floats);
    - ``finite``: a float (each element of floats) must be finite;
    - ``axis_of=k``: an int that is an axis of input k (``-rank <= v < rank``);
    - ``axes_of=k``: ints that are distinct axes of input k;
    - ``perm_of=k``: ints that are a permutation of input k's axes (or empty);
    - ``rank_of=k``: ints / exprs with one entry per axis of input k;
    - ``length``: ints / exprs with exactly this many entries.
    """

    kind: str
    default: Any = REQUIRED
    choices: Optional[Tuple[Any, ...]] = None
    min: Optional[float] = None
    max: Optional[float] = None
    finite: bool = False
    axis_of: Optional[int] = None
    axes_of: Optional[int] = None
    perm_of: Optional[int] = None
    rank_of: Optional[int] = None
    length: Optional[int] = None

    def __post_init__(self):
        if self.kind not in ATTR_KINDS:
            raise ValueError(f"unknown attribute kind {self.kind!r}")


@dataclass
class OpSchema:
    """Everything about an op kind that is not its computation: arity, dtype
    classes of inputs and outputs, attributes (``resolved``: the ones its
    shape rule adds for the backend), traits, and the shape rule."""

    kind: OpKind
    inputs: Tuple[int, int]
    outputs: Tuple[int, int]
    attrs: Dict[str, AttrSpec]
    infer: Callable[..., List[TensorType]]
    doc: str = ""
    resolved: Dict[str, AttrSpec] = field(default_factory=dict)
    dtypes: Tuple[str, ...] = ("any",)  # per input; the last one repeats
    out_dtypes: Tuple[str, ...] = ("any",)  # per output; the last one repeats
    writes_input: Optional[int] = None  # the input this op writes in place when it is state
    weight_inputs: Tuple[int, ...] = ()  # inputs read as weights (stored in a weight type)
    shape_inputs: Tuple[int, ...] = ()  # inputs whose values are read on the host (shape tensors)
    input_names: Tuple[str, ...] = ()  # for messages: "input 3 (mask)"
    same_dtypes: Tuple[int, ...] = ()  # inputs that share one dtype (ALL_INPUTS: every input)
    out_dtype_of: Optional[int] = None  # the outputs have this input's dtype
    high_rank: Optional[str] = None  # how tensors of rank > 4 are lowered (HIGH_RANK)
    # the bool attribute under which the op reads its weight inputs transposed, as rows ([..., N, K]): the
    # only layout a stored weight has; passes.py stores a constant weight so and sets the attribute
    weight_rows_attr: Optional[str] = None

    def reads_weight(self, attrs: Dict[str, Any], i: int) -> bool:
        """Input ``i`` is read as a weight (one a weight type can store): a weight input, read
        as rows where the op says when (``weight_rows_attr``)."""
        return i in self.weight_inputs and (self.weight_rows_attr is None or bool(attrs.get(self.weight_rows_attr)))

    def input_label(self, i: int) -> str:
        return f"input {i} ({self.input_names[i]})" if i < len(self.input_names) else f"input {i}"


@dataclass
class ValueSymbol:
    """A symbol whose value is read from a shape input's data at execution."""

    symbol: Any  # Symbol
    kind: str  # "reshape", "permute", "permuted_dim" (see SourceKind in the schema)
    input: int  # op input position holding the values
    index: int
    ref: int  # op input position of the tensor reshaped / transposed
    flag: int = 0


class InferContext:
    """What a shape rule may use: the op (for messages), its declared outputs,
    and a place to record runtime checks (guards) and symbols read from
    shape-input values."""

    def __init__(self, op_label: str, declared_outputs: Sequence[Any] = (), op_name: str = "op"):
        self.op_label = op_label
        self.op_name = op_name
        self.declared_outputs = list(declared_outputs)
        self.guards: List[Tuple[Expr, Expr, str]] = []
        # attributes the rule resolved for the backend (e.g. clamped slice starts)
        self.backend_attrs: Dict[str, Any] = {}
        self.value_symbols: List[ValueSymbol] = []

    def value_symbol(self, name: str, kind: str, input: int, index: int, ref: int, flag: int = 0, min: int = 1, max=None):
        """A new symbol bound at execution from the values of op input `input`."""
        from ..symbolic import INT64_MAX, Symbol

        sym = Symbol(f"{self.op_name}.{name}", min, INT64_MAX if max is None else max)
        self.value_symbols.append(ValueSymbol(sym, kind, input, index, ref, flag))
        return Expr.symbol(sym)

    def error(self, msg: str) -> ShapeError:
        return ShapeError(f"{self.op_label}: {msg}")

    def dtype_error(self, msg: str) -> DTypeError:
        return DTypeError(f"{self.op_label}: {msg}")

    def equal(self, a: Expr, b: Expr, what: str) -> Expr:
        """Require a == b. Fails now when they differ for every value the
        symbols may take; otherwise records a guard checked at execution.
        Returns the better-known of the two."""
        a, b = as_expr(a), as_expr(b)
        if a == b:
            return a
        if a.is_const and b.is_const:
            raise self.error(f"{what}: {a} != {b}")
        lo, hi = (a - b).bounds()
        if lo > 0 or hi < 0:  # 4*seq vs 3*seq, seq vs seq + 1: never equal
            raise self.error(f"{what}: {a} != {b} for every value of the dimensions")
        self.guards.append((a, b, f"{self.op_label}: {what}"))
        return b if b.is_const else a


_SCHEMAS: Dict[OpKind, OpSchema] = {}


def register(kinds, inputs: Tuple[int, int] = (1, 1), outputs: Tuple[int, int] = (1, 1), attrs=None, *,
             resolved=None, dtypes: Tuple[str, ...] = ("any",), out_dtypes: Tuple[str, ...] = ("any",),
             writes_input: Optional[int] = None, weight_inputs: Tuple[int, ...] = (),
             shape_inputs: Tuple[int, ...] = (), input_names: Tuple[str, ...] = (),
             same_dtypes: Tuple[int, ...] = (), out_dtype_of: Optional[int] = None, high_rank: Optional[str] = None,
             weight_rows_attr: Optional[str] = None):
    """Decorator registering a shape rule for one or several op kinds, with
    the facts of those kinds (see :class:`OpSchema`)."""
    if isinstance(kinds, OpKind):
        kinds = (kinds,)
    for c in tuple(dtypes) + tuple(out_dtypes):
        if c not in DTYPE_CLASSES:
            raise ValueError(f"unknown dtype class {c!r}")
    if high_rank not in HIGH_RANK:
        raise ValueError(f"high_rank must be one of {HIGH_RANK}, got {high_rank!r}")
    if weight_rows_attr is not None and (not weight_inputs or (attrs or {}).get(weight_rows_attr, AttrSpec("int")).kind != "bool"):
        raise ValueError(f"weight_rows_attr {weight_rows_attr!r} must name a bool attribute of an op with weight inputs")

    def deco(fn):
        for k in kinds:
            if k in _SCHEMAS:
                raise RuntimeError(f"op kind {k.name} registered twice")
            _SCHEMAS[k] = OpSchema(k, inputs, outputs, dict(attrs or {}), fn, fn.__doc__ or "", dict(resolved or {}),
                                   tuple(dtypes), tuple(out_dtypes), writes_input, tuple(weight_inputs),
                                   tuple(shape_inputs), tuple(input_names), tuple(same_dtypes), out_dtype_of,
                                   high_rank, weight_rows_attr)
        return fn

    return deco


def schema_of(kind: OpKind) -> Optional[OpSchema]:
    return _SCHEMAS.get(kind)


def registered_kinds():
    return set(_SCHEMAS)


def _convert(name: str, spec: AttrSpec, v: Any, label: str):
    def bad(expected):
        return GraphError(f"{label}: attribute {name!r} must be {expected}, got {v!r}")

    k = spec.kind
    if k == "bool":
        if isinstance(v, bool) or (isinstance(v, int) and v in (0, 1)):
            return bool(v)
        raise bad("a bool")
    if k == "int":
        if isinstance(v, bool) or not _is_int(v):
            raise bad("an int")
        return int(v)
    if k == "float":
        if isinstance(v, bool) or not isinstance(v, (int, float)) and not _is_number(v):
            raise bad("a float")
        return float(v)
    if k == "str":
        if not isinstance(v, str):
            raise bad("a string")
        if spec.choices and v not in spec.choices:
            raise GraphError(f"{label}: attribute {name!r} must be one of {list(spec.choices)}, got {v!r}")
        return v
    if k == "dtype":
        if not isinstance(v, DataType):
            raise bad("a DataType")
        return v
    if k == "ints":
        if _is_int(v) and not isinstance(v, bool):
            return (int(v),)
        if not isinstance(v, (list, tuple)) or not all(_is_int(x) and not isinstance(x, bool) for x in v):
            raise bad("a list of ints")
        return tuple(int(x) for x in v)
    if k == "floats":
        if not isinstance(v, (list, tuple)) or not all(isinstance(x, (int, float)) for x in v):
            raise bad("a list of floats")
        return tuple(float(x) for x in v)
    if k == "expr":
        # one int or dimension expression, held as a 1-tuple like an "exprs"
        # attribute (so the IR carries it, and reads it back, the same way)
        if isinstance(v, (list, tuple)) and len(v) == 1:
            v = v[0]
        try:
            e = as_expr(v)
        except TypeError:
            raise bad("an int or a dimension expression") from None
        return (e.value if e.is_const else e,)
    if k == "exprs":
        if not isinstance(v, (list, tuple)):
            raise bad("a list of ints or dimension expressions")
        out = []
        for x in v:
            try:
                e = as_expr(x)
            except TypeError:
                raise bad("a list of ints or dimension expressions") from None
            out.append(e.value if e.is_const else e)
        return tuple(out)
    raise AssertionError(k)


def _is_int(v) -> bool:
    if isinstance(v, int):
        return True
    try:
        import numpy as np

        return isinstance(v, np.integer)
    except ImportError:  # pragma: no cover
        return False


def _is_number(v) -> bool:
    try:
        import numpy as np

        return isinstance(v, (np.integer, np.floating))
    except ImportError:  # pragma: no cover
        return False


def check_value(name: str, spec: AttrSpec, v: Any, label: str) -> None:
    """The rank-independent constraints of a converted attribute value."""
    if spec.kind in ("int", "float", "ints", "floats"):
        for x in (v if isinstance(v, tuple) else (v,)):
            if spec.finite and not math.isfinite(x):
                raise GraphError(f"{label}: attribute {name!r} must be finite, got {x!r}")
            if spec.min is not None and not x >= spec.min:  # (NaN fails too)
                raise GraphError(f"{label}: attribute {name!r} must be >= {spec.min}, got {x!r}")
            if spec.max is not None and not x <= spec.max:
                raise GraphError(f"{label}: attribute {name!r} must be <= {spec.max}, got {x!r}")
    if spec.length is not None and len(v) != spec.length:
        raise GraphError(f"{label}: attribute {name!r} must have {spec.length} entries, got {len(v)}")


def check_ranked(name: str, spec: AttrSpec, v: Any, ranks: Sequence[int], label: str) -> None:
    """The constraints of an attribute that depend on the ranks of the op's inputs."""
    def rank(k: int) -> int:
        if k >= len(ranks):
            raise GraphError(f"{label}: attribute {name!r} refers to input {k}, the op has {len(ranks)} inputs")
        return ranks[k]

    if spec.axis_of is not None:
        r = rank(spec.axis_of)
        if not -r <= v < r:
            raise ShapeError(f"{label}: attribute {name!r}: axis {v} is out of range for rank {r}")
    if spec.axes_of is not None:
        r = rank(spec.axes_of)
        bad = [a for a in v if not -r <= a < r]
        if bad:
            raise ShapeError(f"{label}: attribute {name!r}: axes {bad} are out of range for rank {r}")
        if len({a % r for a in v}) != len(v):
            raise ShapeError(f"{label}: attribute {name!r}: {list(v)} repeats an axis")
    if spec.perm_of is not None and len(v):
        r = rank(spec.perm_of)
        if len(v) != r:
            raise ShapeError(f"{label}: attribute {name!r}: {list(v)} has {len(v)} axes, the input has rank {r}")
        bad = [a for a in v if not -r <= a < r]
        if bad:
            raise ShapeError(f"{label}: attribute {name!r}: axes {bad} are out of range for rank {r}")
        if len({a % r for a in v}) != r:
            raise ShapeError(f"{label}: attribute {name!r}: {list(v)} repeats an axis")
    if spec.rank_of is not None and len(v) != rank(spec.rank_of):
        raise ShapeError(f"{label}: attribute {name!r} must have one entry per axis ({rank(spec.rank_of)}), "
                         f"got {len(v)}")


def check_dtypes(schema: OpSchema, in_dtypes: Sequence[DataType], label: str, what: str = "input") -> None:
    classes = schema.dtypes if what == "input" else schema.out_dtypes
    last = len(classes) - 1  # the last class covers every position from its own on

    def fail(i: int, c: str):
        name = schema.input_label(i) if what == "input" else f"output {i}"
        raise DTypeError(f"{label}: {name} must be {_DTYPE_WORDS[c]} tensor, got {in_dtypes[i]}")

    for i, dt in enumerate(in_dtypes[:last]):
        if dt not in DTYPE_CLASSES[classes[i]]:
            fail(i, classes[i])
    tail = in_dtypes[last:]
    allowed = DTYPE_CLASSES[classes[last]]
    for dt in {id(dt): dt for dt in tail}.values():  # each dtype once (a Concat may have thousands of inputs)
        if dt not in allowed:
            fail(last + next(j for j, x in enumerate(tail) if x is dt), classes[last])


def same_dtype_inputs(schema: OpSchema, n_in: int) -> List[int]:
    if schema.same_dtypes == ALL_INPUTS:
        return list(range(n_in))
    return [i for i in schema.same_dtypes if i < n_in]


def check_facts(schema: OpSchema, attrs: Dict[str, Any], in_types: Sequence[TensorType], label: str) -> None:
    """What an op's declaration says of its inputs: dtype classes, inputs that
    share a dtype, and the rank-dependent attribute constraints (the rule
    checks the rest)."""
    check_dtypes(schema, [t.dtype for t in in_types], label)
    same = same_dtype_inputs(schema, len(in_types))
    if same:
        first = in_types[same[0]].dtype
        bad = next((i for i in same if in_types[i].dtype is not first), None)
        if bad is not None:
            raise DTypeError(f"{label}: {schema.input_label(bad)} has dtype {in_types[bad].dtype}, "
                             f"{schema.input_label(same[0])} has {first}; they must match")
    ranks = [len(t.shape) for t in in_types]
    for name, spec in schema.attrs.items():
        if attrs.get(name) is not None:
            check_ranked(name, spec, attrs[name], ranks, label)


def normalize_attrs(schema: OpSchema, attrs: Dict[str, Any], label: str) -> Dict[str, Any]:
    out = {}
    for name in attrs:
        if name not in schema.attrs:
            known = ", ".join(sorted(schema.attrs)) or "none"
            raise GraphError(f"{label}: unknown attribute {name!r} (known: {known})")
    for name, spec in schema.attrs.items():
        if name in attrs:
            out[name] = _convert(name, spec, attrs[name], label)
            check_value(name, spec, out[name], label)
        elif spec.default is REQUIRED:
            raise GraphError(f"{label}: attribute {name!r} is required")
        elif spec.kind == "expr" and spec.default is not None:
            out[name] = _convert(name, spec, spec.default, label)  # a default int becomes (int,)
        else:
            out[name] = spec.default
    return out


def check_ranks(schema: OpSchema, in_types: Sequence[TensorType], out_types: Sequence[TensorType], label: str) -> None:
    """Every tensor has rank <= MAX_RANK; above 4 only for kinds whose lowering
    takes it (``high_rank``)."""
    from ..logical_tensor import MAX_RANK

    top = max([len(t.shape) for t in in_types if t is not None] + [len(t.shape) for t in out_types if t is not None],
              default=0)
    if top > MAX_RANK:
        raise ShapeError(f"{label}: rank {top} is above the supported maximum of {MAX_RANK}")
    if top > GGML_RANK and schema.high_rank is None:
        raise ShapeError(f"{label}: a tensor of rank {top}; {schema.kind.name} takes rank {GGML_RANK} at most")


def check_arity(schema: OpSchema, n_in: int, n_out: int, label: str) -> None:
    lo, hi = schema.inputs
    if n_in < lo or (hi >= 0 and n_in > hi):
        want = f"{lo}" if lo == hi else (f"at least {lo}" if hi < 0 else f"{lo} to {hi}")
        raise GraphError(f"{label}: takes {want} inputs, got {n_in}")
    lo, hi = schema.outputs
    if n_out < lo or (hi >= 0 and n_out > hi):
        want = f"{lo}" if lo == hi else f"{lo} to {hi}"
        raise GraphError(f"{label}: produces {want} outputs, got {n_out}")


__all__ = [
    "AttrSpec",
    "InferContext",
    "OpSchema",
    "REQUIRED",
    "TensorType",
    "ALL_INPUTS",
    "DTYPE_CLASSES",
    "check_arity",
    "check_ranks",
    "check_dtypes",
    "check_facts",
    "format_shape",
    "normalize_attrs",
    "register",
    "registered_kinds",
    "schema_of",
]
