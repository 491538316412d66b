"""torch dtypes and dyngraph data types."""

from __future__ import annotations

from typing import Optional

import numpy as np
import torch

from ..dtypes import DataType
from ..errors import DTypeError, ExecutionError

TORCH_TO_DG = {
    torch.float32: DataType.f32,
    torch.float16: DataType.f16,
    torch.bfloat16: DataType.bf16,
    torch.int32: DataType.i32,
    torch.int64: DataType.i64,
    torch.bool: DataType.boolean,
    torch.uint8: DataType.u8,  # (quantized values: Quantize / Dequantize take them, other ops refuse them)
    torch.int8: DataType.s8,
}
DG_TO_TORCH = {v: k for k, v in TORCH_TO_DG.items()}


def dg_dtype(dt: torch.dtype) -> Optional[DataType]:
    """The dyngraph type of a torch dtype, or None when there is none (float64, int16...)."""
    return TORCH_TO_DG.get(dt)


def to_numpy(t) -> np.ndarray:
    """A numpy view of a CPU tensor (bf16 as its 16-bit pattern)."""
    try:
        return t.numpy()
    except (RuntimeError, TypeError, AttributeError):
        pass
    if isinstance(t, np.ndarray):
        return t
    if not isinstance(t, torch.Tensor):
        raise ExecutionError(f"expected a torch tensor, got {type(t).__name__}")
    if t.device.type != "cpu":
        raise ExecutionError(f"tensors must be on the CPU, got one on {t.device}")
    t = t.detach()
    if t.is_neg() or t.is_conj():  # a lazy view (``z.conj().imag``): its values, copied
        t = t.resolve_conj().resolve_neg()
    if t.dtype is torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    try:
        return t.numpy()
    except (RuntimeError, TypeError) as e:
        raise DTypeError(f"a tensor of dtype {t.dtype} has no dyngraph form: {e}") from None


def from_numpy(a: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    """A torch tensor sharing ``a``'s memory."""
    if dtype is torch.bfloat16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def numpy_out_dtype(dt: torch.dtype) -> np.dtype:
    """The numpy dtype a dyngraph output of this torch dtype is computed into."""
    if dt is torch.bfloat16:
        return DataType.bf16.numpy
    return np.dtype(torch.empty((), dtype=dt).numpy().dtype)
