"""oneDNN Graph data type names and dyngraph's data types."""

from __future__ import annotations

from typing import Optional

from ..dtypes import DataType

# oneDNN's spelling -> dyngraph's DataType value, where they differ
_RENAMED = {"s32": "i32", "s64": "i64", "boolean": "bool"}
_BACK = {v: k for k, v in _RENAMED.items()}

# every data type a oneDNN Graph file may name (logical_tensor::data_type)
ONEDNN_DTYPES = ("undef", "f32", "f16", "bf16", "s8", "u8", "s32", "s64", "boolean",
                 "f8_e5m2", "f8_e4m3", "s4", "u4", "f64")

FLOAT_DTYPES = ("f32", "f16", "bf16")


def to_dyngraph(name: str) -> Optional[DataType]:
    """The dyngraph DataType for a oneDNN dtype name, or None when dyngraph has none."""
    value = _RENAMED.get(name, name)
    for dt in DataType:
        if dt.value == value:
            return dt
    return None


def to_onednn(dt: DataType) -> str:
    return _BACK.get(dt.value, dt.value)
