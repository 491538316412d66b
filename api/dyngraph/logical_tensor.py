"""Logical tensors: the (id, data type, shape, property) value type."""

from __future__ import annotations

import enum
from typing import Optional, Sequence, Tuple

from .dtypes import DataType
from .errors import GraphError, ShapeError
from .symbolic import DYNAMIC_DIM, UNKNOWN_DIM, DimLike, Expr, SpecialDim, as_expr, format_shape


class Property(enum.Enum):
    VARIABLE = "variable"   # produced or consumed at execution
    CONSTANT = "constant"   # weights: data given at compile, uploaded once
    STATE = "state"         # owned by the compiled partition, persists across executions


VARIABLE = Property.VARIABLE
CONSTANT = Property.CONSTANT
STATE = Property.STATE

MAX_RANK = 6  # ggml has 4 dimensions: see dyngraph.ops.registry.check_ranks


def _norm_dim(d, where: str):
    if type(d) is int and d >= 0:  # the common case, without building an Expr
        return d
    if isinstance(d, SpecialDim):
        return d
    if isinstance(d, Expr):
        if d.is_const:
            d = d.value
        else:
            return d
    try:
        e = as_expr(d)
    except TypeError:
        raise GraphError(f"{where}: dimension {d!r} is not an int, a Dim expression, DYNAMIC_DIM or UNKNOWN_DIM") from None
    v = e.value
    if v < 0:
        raise ShapeError(f"{where}: dimension {v} is negative")
    return v


class LogicalTensor:
    """Describes a tensor of a graph: ``LogicalTensor(id, dtype, shape, property=VARIABLE)``.

    ``shape`` holds ints, :class:`~dyngraph.Dim` expressions, ``DYNAMIC_DIM``
    and ``UNKNOWN_DIM``; ``None`` means even the rank is to be inferred.
    """

    __slots__ = ("id", "dtype", "shape", "property", "name")

    def __init__(
        self,
        id: int,
        dtype: DataType,
        shape: Optional[Sequence[DimLike]] = None,
        property: Property = Property.VARIABLE,
        name: Optional[str] = None,
    ):
        if isinstance(id, bool) or not isinstance(id, int) or id < 0:
            raise GraphError(f"logical tensor id must be a non-negative int, got {id!r}")
        if id > 2**63 - 1:  # (the IR stores ids as int64, as oneDNN's size_t ids fit there)
            raise GraphError(f"logical tensor id {id} is above 2**63 - 1")
        if not isinstance(dtype, DataType):
            raise GraphError(f"logical tensor {id}: dtype must be a dyngraph DataType, got {dtype!r}")
        if not isinstance(property, Property):
            raise GraphError(f"logical tensor {id}: property must be VARIABLE, CONSTANT or STATE, got {property!r}")
        where = f"logical tensor {name or id}"
        if shape is not None:
            if isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
                raise GraphError(f"{where}: shape must be a sequence, got {shape!r}")
            shape = tuple(_norm_dim(d, where) for d in shape)
        self.id = id
        self.dtype = dtype
        self.shape: Optional[Tuple] = shape
        self.property = property
        self.name = name

    # -- queries ---------------------------------------------------------------
    @property
    def ndim(self) -> Optional[int]:
        return None if self.shape is None else len(self.shape)

    def is_concrete(self) -> bool:
        return self.shape is not None and all(isinstance(d, int) for d in self.shape)

    def has_dynamic_dims(self) -> bool:
        return self.shape is not None and any(d is DYNAMIC_DIM or isinstance(d, Expr) for d in self.shape)

    def nelement(self) -> int:
        if not self.is_concrete():
            raise ShapeError(f"logical tensor {self.label}: shape {format_shape(self.shape)} is not concrete")
        n = 1
        for d in self.shape:
            n *= d
        return n

    def get_mem_size(self) -> int:
        return self.nelement() * self.dtype.itemsize

    @property
    def label(self) -> str:
        return f"{self.id} ({self.name})" if self.name else str(self.id)

    def with_shape(self, shape) -> "LogicalTensor":
        shape = None if shape is None else tuple(shape)
        if shape is None or not all(type(d) is int and d >= 0 for d in shape):
            return LogicalTensor(self.id, self.dtype, shape, self.property, self.name)
        return self._with_concrete_shape(shape)  # a concrete shape of a checked tensor: nothing to validate

    def _with_concrete_shape(self, shape: tuple) -> "LogicalTensor":
        """with_shape for a tuple of non-negative ints (checked by with_shape, or computed by the backend
        for infer_outputs): no checks."""
        lt = LogicalTensor.__new__(LogicalTensor)
        lt.id, lt.dtype, lt.shape, lt.property, lt.name = self.id, self.dtype, shape, self.property, self.name
        return lt

    # -- value semantics ---------------------------------------------------------
    def _key(self):
        return (self.id, self.dtype, self.shape, self.property)

    def __eq__(self, other):
        return isinstance(other, LogicalTensor) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self) -> str:
        prop = "" if self.property is Property.VARIABLE else f", {self.property.name}"
        name = f", name={self.name!r}" if self.name else ""
        return f"LogicalTensor({self.id}, {self.dtype!r}, {format_shape(self.shape)}{prop}{name})"


__all__ = ["LogicalTensor", "Property", "VARIABLE", "CONSTANT", "STATE", "DYNAMIC_DIM", "UNKNOWN_DIM", "MAX_RANK"]
