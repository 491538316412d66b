"""A Program is one compiled partition as the runtime sees it: tensors with
symbolic shapes, ops with normalized attributes, the runtime inputs and
outputs, how each symbol is bound at execution, and the guards to check.

The compiler produces it, :mod:`dyngraph.ir_writer` serializes it and
:mod:`dyngraph.ir_reader` reads it back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from .dtypes import DataType
from .logical_tensor import LogicalTensor, Property
from .op import OpKind
from .symbolic import Expr, Symbol

STORAGE_TYPES = ("default", "f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_K", "q3_K", "q4_K", "q5_K", "q6_K",
                 "iq4_nl", "iq4_xs", "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq1_s", "iq1_m", "tq1_0", "tq2_0",
                 "mxfp4")


@dataclass
class TensorSpec:
    id: int
    name: str
    dtype: DataType
    shape: Tuple[Expr, ...]
    property: Property = Property.VARIABLE
    storage: str = "default"

    def logical_tensor(self) -> LogicalTensor:
        return LogicalTensor(
            self.id, self.dtype, tuple(d.value if d.is_const else d for d in self.shape), self.property, self.name or None
        )

    def concrete_shape(self) -> Tuple[int, ...]:
        return tuple(d.value for d in self.shape)


@dataclass
class OpSpec:
    id: int
    kind: OpKind
    name: str
    inputs: List[int]
    outputs: List[int]
    attrs: Dict[str, Any]


@dataclass
class SourceSpec:
    """Where a symbol's value comes from (SourceKind in the schema):
    "dim": symbol = (input.shape[index] - offset) / coeff;
    "value": input.flat[index]; "reshape" / "permute" / "permuted_dim": the
    values of shape input `input` resolved against tensor `ref` (a tensor index)."""

    symbol: Symbol
    kind: str
    input: int
    index: int
    coeff: int = 1
    offset: Optional[Expr] = None
    ref: int = -1
    flag: int = 0


@dataclass
class Program:
    tensors: List[TensorSpec] = field(default_factory=list)
    ops: List[OpSpec] = field(default_factory=list)
    inputs: List[int] = field(default_factory=list)
    outputs: List[int] = field(default_factory=list)
    symbols: List[Symbol] = field(default_factory=list)
    sources: List[SourceSpec] = field(default_factory=list)
    guards: List[Tuple[Expr, Expr, str]] = field(default_factory=list)
    # the symbols the last runtime input holds, when some are given by the caller (compile's ``symbols``)
    symbol_inputs: List[Symbol] = field(default_factory=list)

    def index_of(self, tensor_id: int) -> int:
        for i, t in enumerate(self.tensors):
            if t.id == tensor_id:
                return i
        raise KeyError(tensor_id)

    def tensor(self, tensor_id: int) -> TensorSpec:
        return self.tensors[self.index_of(tensor_id)]

    def with_property(self, prop: Property) -> List[int]:
        return [i for i, t in enumerate(self.tensors) if t.property is prop]
