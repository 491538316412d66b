"""The op registry: for each op kind, its arity, its attributes and its shape rule.

Each op family lives in one module of this package (``elementwise``,
``matmul``, ...) and registers its kinds with :func:`register`. A shape rule
takes the op's normalized attributes, the input types and an
:class:`InferContext`, and returns the output types. Rules run once, on
symbolic shapes, at finalize and compile time.
"""

from __future__ import annotations

from dataclasses import dataclass
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


@dataclass(frozen=True)
class AttrSpec:
    kind: str  # int, bool, float, str, ints, floats, expr, exprs, dtype
    default: Any = REQUIRED
    choices: Optional[Tuple[Any, ...]] = None


@dataclass
class OpSchema:
    kind: OpKind
    inputs: Tuple[int, int]
    outputs: Tuple[int, int]
    attrs: Dict[str, AttrSpec]
    infer: Callable[..., List[TensorType]]
    doc: str = ""


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


def register(kinds, inputs: Tuple[int, int] = (1, 1), outputs: Tuple[int, int] = (1, 1), attrs=None):
    """Decorator registering a shape rule for one or several op kinds."""
    if isinstance(kinds, OpKind):
        kinds = (kinds,)

    def deco(fn):
        for k in kinds:
            if k in _SCHEMAS:
                raise RuntimeError(f"op kind {k.name} registered twice")
            _SCHEMAS[k] = OpSchema(k, inputs, outputs, dict(attrs or {}), fn, fn.__doc__ or "")
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


def normalize_attrs(schema: OpSchema, attrs: Dict[str, Any], label: str) -> Dict[str, Any]:
    out = {}
    for name in attrs:
        if name not in schema.attrs:
            known = ", ".join(sorted(schema.attrs)) or "none"
            raise GraphError(f"{label}: unknown attribute {name!r} (known: {known})")
    for name, spec in schema.attrs.items():
        if name in attrs:
            out[name] = _convert(name, spec, attrs[name], label)
        elif spec.default is REQUIRED:
            raise GraphError(f"{label}: attribute {name!r} is required")
        elif spec.kind == "expr" and spec.default is not None:
            out[name] = _convert(name, spec, spec.default, label)  # a default int becomes (int,)
        else:
            out[name] = spec.default
    return out


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
    "check_arity",
    "format_shape",
    "normalize_attrs",
    "register",
    "registered_kinds",
    "schema_of",
]
