"""Compile-time rewrites of a Program, applied before it is serialized.

- MatMul with a constant right-hand side: the weight is stored transposed
  (``transpose_b=True``), the layout ggml's matrix product reads without a copy.
- ``weight_type``: constants read only by MatMul (as its weight) or Gather
  (as its table) are stored in that type (f16, q8_0, q4_0).
"""

from __future__ import annotations

from typing import Dict, Optional

import numpy as np

from .errors import CompileError
from .logical_tensor import Property
from .op import OpKind
from .program import Program, TensorSpec

WEIGHT_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1")
QUANT_BLOCK = 32


def _users(prog: Program, tidx: int):
    return [(op, pos) for op in prog.ops for pos, i in enumerate(op.inputs) if i == tidx]


def pretranspose_matmul_weights(prog: Program, data: Dict[int, np.ndarray]) -> None:
    for op in prog.ops:
        if op.kind is not OpKind.MatMul or op.attrs.get("transpose_b"):
            continue
        b = op.inputs[1]
        t = prog.tensors[b]
        if t.property is not Property.CONSTANT or b not in data:
            continue
        arr = np.ascontiguousarray(np.swapaxes(data[b], -1, -2))
        shape = t.shape[:-2] + (t.shape[-1], t.shape[-2])
        if len(_users(prog, b)) == 1:
            data[b] = arr
            t.shape = shape
        else:
            new_id = max(x.id for x in prog.tensors) + 1
            prog.tensors.append(TensorSpec(new_id, f"{t.name or t.id}.T", t.dtype, shape, Property.CONSTANT))
            nb = len(prog.tensors) - 1
            data[nb] = arr
            op.inputs[1] = nb
        op.attrs["transpose_b"] = True


def assign_weight_storage(prog: Program, data: Dict[int, np.ndarray], weight_type: str) -> None:
    if weight_type not in WEIGHT_TYPES:
        raise CompileError(f"weight_type must be one of {list(WEIGHT_TYPES)}, got {weight_type!r}")
    for tidx, t in enumerate(prog.tensors):
        if t.property is not Property.CONSTANT or not t.dtype.is_float or tidx not in data:
            continue
        users = _users(prog, tidx)
        ok = bool(users) and all(
            (op.kind is OpKind.MatMul and pos == 1 and op.attrs.get("transpose_b")) or (op.kind is OpKind.Gather and pos == 0)
            for op, pos in users
        )
        if not ok:
            continue
        row = t.shape[-1].value
        if weight_type.startswith("q") and row % QUANT_BLOCK:
            continue  # rows that do not split into quantization blocks stay as they are
        t.storage = weight_type


def run_passes(prog: Program, data: Dict[int, np.ndarray], weight_type: Optional[str] = None) -> None:
    pretranspose_matmul_weights(prog, data)
    if weight_type is not None:
        assign_weight_storage(prog, data, weight_type)
