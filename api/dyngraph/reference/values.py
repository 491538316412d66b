"""Values of the reference interpreter and dyngraph's data types.

The reference computes in float64 (floats), int64 (integers) and bool. A
value stored in a tensor of dtype X is first rounded to X (:func:`round_to`),
as the backend rounds each op's result to its output's dtype, so the
reference sees the same inputs every op of the backend sees, up to the
rounding of its own arithmetic.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import DataType


def bf16_bits_to_f32(bits: np.ndarray) -> np.ndarray:
    return (np.asarray(bits).astype(np.uint16).astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits, rounding to nearest even; NaN stays NaN."""
    x = np.require(x, dtype=np.float32, requirements="C")  # (ascontiguousarray would make a 0-d array 1-d)
    u = x.view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    if nan.any():
        rounded[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return rounded


def to_compute(arr, dtype: DataType) -> np.ndarray:
    """A tensor's data (as dyngraph takes it) -> the reference's value."""
    a = np.asarray(arr)
    if dtype.is_f8:
        if a.dtype == np.uint8:  # the bits
            a = a.view(dtype.numpy)
        return a.astype(np.float64)
    if dtype is DataType.bf16:
        if a.dtype.kind == "f" and a.dtype.itemsize != 2:
            return a.astype(np.float64)
        return bf16_bits_to_f32(a.view(np.uint16)).astype(np.float64)
    if dtype.is_float:
        return a.astype(np.float64)
    if dtype is DataType.boolean:
        return a.astype(bool)
    return a.astype(np.int64)


def round_to(v: np.ndarray, dtype: DataType) -> np.ndarray:
    """A computed value stored as ``dtype`` (returned in compute form)."""
    v = np.asarray(v)
    if dtype is DataType.f32:
        with np.errstate(over="ignore"):
            return v.astype(np.float32).astype(np.float64)
    if dtype is DataType.f16:
        with np.errstate(over="ignore"):
            return v.astype(np.float16).astype(np.float64)
    if dtype is DataType.bf16:
        with np.errstate(over="ignore"):
            return bf16_bits_to_f32(f32_to_bf16_bits(v.astype(np.float32))).astype(np.float64)
    if dtype.is_f8:  # through f32 (exact for every value the reference stores), then one rounding
        with np.errstate(over="ignore", invalid="ignore"):
            return v.astype(np.float32).astype(dtype.numpy).astype(np.float64)
    if dtype is DataType.boolean:
        return v.astype(bool)
    if v.dtype.kind == "f":  # float -> integer: toward zero, like numpy's astype
        with np.errstate(invalid="ignore"):
            v = np.trunc(v)
    bits = 32 if dtype is DataType.i32 else 64
    v = v.astype(np.int64)
    if bits == 32:
        v = ((v + 2**31) % 2**32) - 2**31  # wraps around, as 32-bit integers do
    return v


def to_storage(v: np.ndarray, dtype: DataType) -> np.ndarray:
    """A reference value as data of ``dtype`` (bf16 as uint16 bits; the others as dtype.numpy arrays)."""
    if dtype is DataType.bf16:
        return f32_to_bf16_bits(np.asarray(v, dtype=np.float64).astype(np.float32))
    if dtype.is_f8:
        with np.errstate(over="ignore", invalid="ignore"):
            return np.asarray(v, dtype=np.float64).astype(np.float32).astype(dtype.numpy)
    return np.asarray(v).astype(dtype.numpy)


def eps(dtype: DataType) -> float:
    """Machine epsilon (the gap above 1.0) of a floating-point dtype."""
    return {DataType.f32: 2.0**-23, DataType.f16: 2.0**-10, DataType.bf16: 2.0**-7}[dtype]
