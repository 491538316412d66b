"""Enum codes of the IR schema, shared by the IR writer and reader."""

from __future__ import annotations

from .dtypes import DataType
from .fb.AttrType import AttrType
from .fb.DataType import DataType as FbDataType
from .fb.ExprOp import ExprOp
from .fb.SourceKind import SourceKind
from .fb.TensorProperty import TensorProperty
from .logical_tensor import Property
from .program import STORAGE_TYPES

IR_VERSION = 1
IR_IDENTIFIER = b"DGIR"
DATA_ALIGN = 64

DTYPE_CODE = {
    DataType.f32: FbDataType.F32,
    DataType.f16: FbDataType.F16,
    DataType.bf16: FbDataType.BF16,
    DataType.i32: FbDataType.I32,
    DataType.i64: FbDataType.I64,
    DataType.boolean: FbDataType.BOOL,
    DataType.u8: FbDataType.U8,
    DataType.s8: FbDataType.S8,
    DataType.s4: FbDataType.S4,
    DataType.u4: FbDataType.U4,
    DataType.f8_e4m3: FbDataType.F8_E4M3,
    DataType.f8_e5m2: FbDataType.F8_E5M2,
}
CODE_DTYPE = {v: k for k, v in DTYPE_CODE.items()}

PROPERTY_CODE = {
    Property.VARIABLE: TensorProperty.VARIABLE,
    Property.CONSTANT: TensorProperty.CONSTANT,
    Property.STATE: TensorProperty.STATE,
}
CODE_PROPERTY = {v: k for k, v in PROPERTY_CODE.items()}

STORAGE_CODE = {name: i for i, name in enumerate(STORAGE_TYPES)}

ATOM_CODE = {"floordiv": ExprOp.FLOORDIV, "mod": ExprOp.MOD, "min": ExprOp.MINIMUM, "max": ExprOp.MAXIMUM}
CODE_ATOM = {v: k for k, v in ATOM_CODE.items()}

SOURCE_CODE = {
    "dim": SourceKind.DIM,
    "value": SourceKind.VALUE,
    "reshape": SourceKind.RESHAPE,
    "permute": SourceKind.PERMUTE,
    "permuted_dim": SourceKind.PERMUTED_DIM,
}
CODE_SOURCE = {v: k for k, v in SOURCE_CODE.items()}

__all__ = [
    "ATOM_CODE", "AttrType", "CODE_ATOM", "CODE_DTYPE", "CODE_PROPERTY", "CODE_SOURCE", "DATA_ALIGN",
    "DTYPE_CODE", "ExprOp", "IR_IDENTIFIER", "IR_VERSION", "PROPERTY_CODE", "SOURCE_CODE", "STORAGE_CODE",
]
