"""Tensors: a logical tensor bound to host memory (numpy, anything with
``__dlpack__`` such as a CPU torch tensor, or the buffer protocol), used in
place without a copy. A Tensor hands its memory on the same way
(``torch.from_dlpack(t)``, ``np.from_dlpack(t)``)."""

from __future__ import annotations

import sys

import numpy as np

from . import _backend
from .dtypes import DataType
from .engine import Engine
from .errors import DTypeError, ExecutionError, ShapeError
from .ir_codes import DTYPE_CODE
from .logical_tensor import LogicalTensor
from .symbolic import format_shape


def from_dlpack(data) -> np.ndarray:
    """A numpy view of an object with ``__dlpack__`` (the same memory).

    numpy has no bfloat16: a torch bfloat16 tensor is viewed as its 16-bit
    patterns (what dyngraph takes for bf16)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(data, torch.Tensor) and data.dtype is torch.bfloat16:
        data = data.view(torch.int16)
    try:
        arr = np.from_dlpack(data)
    except Exception as e:  # the producer's own errors (on a GPU, requires grad, ...)
        raise ExecutionError(f"cannot use a {type(data).__name__} through DLPack: {e}") from None
    return arr.view(np.uint16) if arr.dtype == np.int16 and torch is not None and isinstance(data, torch.Tensor) else arr


_BITS_ONLY = frozenset(dt.numpy for dt in DataType if dt.numpy.kind == "V" or dt.is_f8)


def dlpack_view(arr: np.ndarray) -> np.ndarray:
    """``arr`` as numpy's DLPack can carry it: an ml_dtypes array (s4, u4, f8;
    bf16 goes as bfloat16, bf16_capsule), which numpy cannot export, as its
    bits (uint8 / uint16), the same memory."""
    return arr.view(np.dtype(f"u{arr.itemsize}")) if arr.dtype in _BITS_ONLY else arr


_BF16 = DataType.bf16.numpy
_DL_BFLOAT = 4  # DLPack's type code for bfloat


def bf16_capsule(arr: np.ndarray):
    """A DLPack capsule of a bf16 array as DLPack's bfloat16 (numpy cannot make one)."""
    return _backend.dlpack_capsule(arr, _DL_BFLOAT, 16)


class OutputArray(np.ndarray):
    """What ``cp(...)`` returns for a bf16 output: a numpy array (the same
    type in every other respect) whose ``__dlpack__`` hands it on as DLPack's
    bfloat16, so ``torch.from_dlpack(out)`` is a ``torch.bfloat16`` tensor
    on the same memory (numpy itself cannot export ml_dtypes' bfloat16)."""

    def __dlpack__(self, *args, **kwargs):
        base = self.view(np.ndarray)
        if base.dtype == _BF16:
            return bf16_capsule(base)
        return base.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self.view(np.ndarray).__dlpack_device__()


def as_array(data, dtype: DataType) -> np.ndarray:
    """A numpy view of ``data`` (no copy for numpy arrays, DLPack producers and buffers)."""
    if isinstance(data, np.ndarray):
        return data
    if hasattr(data, "__dlpack__"):
        return from_dlpack(data)
    if hasattr(data, "__array_interface__") or hasattr(data, "__array__"):
        return np.asarray(data)
    try:
        return np.frombuffer(data, dtype=dtype.numpy)
    except TypeError:
        raise TypeError(f"tensor data must be a numpy array or support the buffer protocol, got {type(data).__name__}") from None


class Tensor(_backend.Tensor):
    """``Tensor(logical_tensor, engine, data=None)``: the logical tensor's data.

    ``data`` (a numpy array, any object with ``__dlpack__`` such as a CPU
    torch tensor, or a buffer) is used in place: it must be C-contiguous;
    ``None`` allocates a new array. When the logical tensor has symbolic
    dimensions, the shape is taken from ``data``. The tensor is itself a
    DLPack producer: ``torch.from_dlpack(t)`` views the same memory.
    """

    def __init__(self, logical_tensor: LogicalTensor, engine=None, data=None):
        lt = logical_tensor
        if not isinstance(lt, LogicalTensor):
            raise TypeError(f"Tensor needs a LogicalTensor, got {lt!r}")
        if data is None:
            if not lt.is_concrete():
                raise ShapeError(f"tensor {lt.label}: cannot allocate shape {format_shape(lt.shape)}; give concrete dims or data")
            arr = np.empty(lt.shape, dtype=lt.dtype.numpy)
        else:
            arr = as_array(data, lt.dtype)
            if not lt.dtype.accepts(arr.dtype):
                raise DTypeError(f"tensor {lt.label}: data has dtype {arr.dtype}, the logical tensor is {lt.dtype}")
        shape = self._shape(lt, arr)
        if engine is not None and not isinstance(engine, Engine):
            raise TypeError(f"tensor {lt.label}: engine must be a dyngraph.Engine, got {type(engine).__name__}")
        super().__init__(lt.id, DTYPE_CODE[lt.dtype], shape, arr, engine.impl if engine is not None else None)
        self.logical_tensor = lt if lt.is_concrete() else lt.with_shape(shape)
        self.engine = engine

    @staticmethod
    def _shape(lt: LogicalTensor, arr: np.ndarray):
        if lt.is_concrete():
            if arr.ndim > 1 and tuple(arr.shape) != tuple(lt.shape):
                raise ShapeError(f"tensor {lt.label}: data has shape {list(arr.shape)}, the logical tensor {format_shape(lt.shape)}")
            return list(lt.shape)
        shape = list(arr.shape)
        if lt.shape is not None:
            if len(lt.shape) != len(shape):
                raise ShapeError(f"tensor {lt.label}: data has rank {len(shape)}, the logical tensor {format_shape(lt.shape)}")
            for d, (want, got) in enumerate(zip(lt.shape, shape)):
                if isinstance(want, int) and want != got:
                    raise ShapeError(f"tensor {lt.label}: dimension {d} is {want}, data has {got}")
        return shape

    def get_logical_tensor(self) -> LogicalTensor:
        return self.logical_tensor

    def get_engine(self):
        return self.engine

    @property
    def array(self) -> np.ndarray:
        return self.get_data_handle()

    def __dlpack__(self, *args, **kwargs):
        arr = self.get_data_handle()
        if arr.dtype == _BF16:
            return bf16_capsule(arr)
        return dlpack_view(arr).__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self.get_data_handle().__dlpack_device__()

    def __repr__(self) -> str:
        return f"Tensor({self.logical_tensor!r})"
