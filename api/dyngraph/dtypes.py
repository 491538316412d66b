"""Data types of logical tensors, and how they map to numpy."""

from __future__ import annotations

import enum

import numpy as np

from .errors import DTypeError

try:  # bfloat16 arrays, when ml_dtypes is installed
    from ml_dtypes import bfloat16 as _np_bfloat16
except ImportError:  # pragma: no cover - optional
    _np_bfloat16 = None


class DataType(enum.Enum):
    f32 = "f32"
    f16 = "f16"
    bf16 = "bf16"
    i32 = "i32"
    i64 = "i64"
    boolean = "bool"
    u8 = "u8"  # quantized integers: only the ops that declare them take them (Quantize, Dequantize, ...)
    s8 = "s8"

    @property
    def itemsize(self) -> int:
        return _ITEMSIZE[self]

    @property
    def is_float(self) -> bool:
        return self in (DataType.f32, DataType.f16, DataType.bf16)

    @property
    def is_int(self) -> bool:
        """i32 or i64 (the index and arithmetic integers; not the quantized u8 / s8)."""
        return self in (DataType.i32, DataType.i64)

    @property
    def is_quantized(self) -> bool:
        """u8 or s8: 8-bit integers that Quantize produces and Dequantize reads."""
        return self in (DataType.u8, DataType.s8)

    @property
    def numpy(self) -> np.dtype:
        """The numpy dtype of arrays holding this type (uint16 for bf16 without ml_dtypes)."""
        if self is DataType.bf16:
            return np.dtype(_np_bfloat16) if _np_bfloat16 is not None else np.dtype(np.uint16)
        return _NUMPY[self]

    def accepts(self, dtype: np.dtype) -> bool:
        """Whether an array of numpy ``dtype`` may hold this type."""
        if self is DataType.bf16:
            return dtype.itemsize == 2 and dtype.kind in "uiV" or dtype == self.numpy
        return dtype == _NUMPY[self]

    @staticmethod
    def from_numpy(dtype) -> "DataType":
        dtype = np.dtype(dtype)
        for dt, npdt in _NUMPY.items():
            if dtype == npdt:
                return dt
        if _np_bfloat16 is not None and dtype == np.dtype(_np_bfloat16):
            return DataType.bf16
        raise DTypeError(f"numpy dtype {dtype} has no dyngraph data type")

    def __repr__(self) -> str:
        return f"dg.{self.name}"

    def __str__(self) -> str:
        return self.value


_ITEMSIZE = {
    DataType.f32: 4,
    DataType.f16: 2,
    DataType.bf16: 2,
    DataType.i32: 4,
    DataType.i64: 8,
    DataType.boolean: 1,
    DataType.u8: 1,
    DataType.s8: 1,
}

_NUMPY = {
    DataType.f32: np.dtype(np.float32),
    DataType.f16: np.dtype(np.float16),
    DataType.i32: np.dtype(np.int32),
    DataType.i64: np.dtype(np.int64),
    DataType.boolean: np.dtype(np.bool_),
    DataType.u8: np.dtype(np.uint8),
    DataType.s8: np.dtype(np.int8),
}

f32 = DataType.f32
f16 = DataType.f16
bf16 = DataType.bf16
i32 = DataType.i32
i64 = DataType.i64
boolean = DataType.boolean
u8 = DataType.u8
s8 = DataType.s8
