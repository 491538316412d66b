"""Data types of logical tensors, and how they map to numpy.

Arrays of bf16, s4, u4, f8_e4m3 and f8_e5m2 use the numpy dtypes of
``ml_dtypes`` (a dependency): ``bfloat16``, ``int4``, ``uint4``,
``float8_e4m3fn``, ``float8_e5m2``. Every one of them is held one element a
byte or two, as those arrays hold them: a 4-bit integer takes a whole byte,
its value in the low 4 bits (two's complement for s4), the high 4 bits zero
(oneDNN packs two to a byte; dyngraph does not). A bf16 tensor also takes
its bits as a 16-bit integer array, an f8 tensor its bits as uint8.
"""

from __future__ import annotations

import enum

import ml_dtypes
import numpy as np

from .errors import DTypeError


class DataType(enum.Enum):
    f32 = "f32"
    f16 = "f16"
    bf16 = "bf16"
    i32 = "i32"
    i64 = "i64"
    boolean = "bool"
    u8 = "u8"  # quantized integers: only the ops that declare them take them (Quantize, Dequantize, ...)
    s8 = "s8"
    s4 = "s4"  # 4-bit integers and 8-bit floats: the quantization ops and TypeCast take them
    u4 = "u4"
    f8_e4m3 = "f8_e4m3"  # OCP E4M3 ("fn": no infinities, max 448)
    f8_e5m2 = "f8_e5m2"  # OCP E5M2 (IEEE-like: infinities, max 57344)

    @property
    def itemsize(self) -> int:
        return _ITEMSIZE[self]

    @property
    def is_float(self) -> bool:
        """f32, f16 or bf16: the types ops compute in (not the 8-bit storage floats)."""
        return self in (DataType.f32, DataType.f16, DataType.bf16)

    @property
    def is_f8(self) -> bool:
        """f8_e4m3 or f8_e5m2: 8-bit floats that Quantize produces and Dequantize reads."""
        return self in (DataType.f8_e4m3, DataType.f8_e5m2)

    @property
    def is_int(self) -> bool:
        """i32 or i64 (the index and arithmetic integers; not the quantized u8 / s8 / s4 / u4)."""
        return self in (DataType.i32, DataType.i64)

    @property
    def is_quantized(self) -> bool:
        """u8, s8, s4, u4, f8_e4m3 or f8_e5m2: what Quantize produces and Dequantize reads."""
        return self in _QUANTIZED

    @property
    def numpy(self) -> np.dtype:
        """The numpy dtype of arrays holding this type."""
        return _NUMPY[self]

    def accepts(self, dtype: np.dtype) -> bool:
        """Whether an array of numpy ``dtype`` may hold this type (bf16 also
        as 16-bit integer bits, f8 as uint8 bits)."""
        dtype = np.dtype(dtype)
        if self is DataType.bf16:
            return dtype == self.numpy or dtype.itemsize == 2 and dtype.kind in "ui"
        if self.is_f8:
            return dtype == self.numpy or dtype == np.dtype(np.uint8)
        return dtype == _NUMPY[self]

    @staticmethod
    def from_numpy(dtype) -> "DataType":
        dtype = np.dtype(dtype)
        for dt, npdt in _NUMPY.items():
            if dtype == npdt:
                return dt
        raise DTypeError(f"numpy dtype {dtype} has no dyngraph data type")

    def __repr__(self) -> str:
        return f"dg.{self.name}"

    def __str__(self) -> str:
        return self.value


_QUANTIZED = frozenset({DataType.u8, DataType.s8, DataType.s4, DataType.u4, DataType.f8_e4m3, DataType.f8_e5m2})

_ITEMSIZE = {
    DataType.f32: 4,
    DataType.f16: 2,
    DataType.bf16: 2,
    DataType.i32: 4,
    DataType.i64: 8,
    DataType.boolean: 1,
    DataType.u8: 1,
    DataType.s8: 1,
    DataType.s4: 1,
    DataType.u4: 1,
    DataType.f8_e4m3: 1,
    DataType.f8_e5m2: 1,
}

_NUMPY = {
    DataType.f32: np.dtype(np.float32),
    DataType.f16: np.dtype(np.float16),
    DataType.bf16: np.dtype(ml_dtypes.bfloat16),
    DataType.i32: np.dtype(np.int32),
    DataType.i64: np.dtype(np.int64),
    DataType.boolean: np.dtype(np.bool_),
    DataType.u8: np.dtype(np.uint8),
    DataType.s8: np.dtype(np.int8),
    DataType.s4: np.dtype(ml_dtypes.int4),
    DataType.u4: np.dtype(ml_dtypes.uint4),
    DataType.f8_e4m3: np.dtype(ml_dtypes.float8_e4m3fn),
    DataType.f8_e5m2: np.dtype(ml_dtypes.float8_e5m2),
}

f32 = DataType.f32
f16 = DataType.f16
bf16 = DataType.bf16
i32 = DataType.i32
i64 = DataType.i64
boolean = DataType.boolean
u8 = DataType.u8
s8 = DataType.s8
s4 = DataType.s4
u4 = DataType.u4
f8_e4m3 = DataType.f8_e4m3
f8_e5m2 = DataType.f8_e5m2
