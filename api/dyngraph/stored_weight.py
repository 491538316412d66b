"""Weights handed over already in a ggml storage type (e.g. the q4_1 blocks of
a GGUF file), used as they are: no dequantizing, no re-quantizing."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .errors import CompileError

# bytes per block and values per block of each storage type (ggml's layouts)
BLOCKS = {"f32": (4, 1), "f16": (2, 1), "bf16": (2, 1), "q8_0": (34, 32), "q4_0": (18, 32), "q4_1": (20, 32),
          "q5_0": (22, 32), "q5_1": (24, 32), "q2_K": (84, 256), "q3_K": (110, 256), "q4_K": (144, 256),
          "q5_K": (176, 256), "q6_K": (210, 256), "iq4_nl": (18, 32), "iq4_xs": (136, 256),
          "iq2_xxs": (66, 256), "iq2_xs": (74, 256), "iq2_s": (82, 256), "iq3_xxs": (98, 256), "iq3_s": (110, 256),
          "iq1_s": (50, 256), "iq1_m": (56, 256), "tq1_0": (54, 256), "tq2_0": (66, 256), "mxfp4": (17, 32)}


def row_bytes(storage: str, n: int) -> int:
    size, per = BLOCKS[storage]
    if n % per:
        raise CompileError(f"rows of {n} values do not split into {storage} blocks of {per}")
    return n // per * size


class StoredWeight:
    """A constant's data in a storage type: ``StoredWeight(shape, storage, data)``.

    ``shape`` is the logical shape (of the values), ``storage`` one of
    f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1 (blocks of 32 values) and the
    k-quants q2_K, q3_K, q4_K, q5_K, q6_K (blocks of 256), iq4_nl (32) and
    iq4_xs (256: 4-bit indices into a non-linear table), the i-quants of 1 to
    3 bits iq1_s, iq1_m, iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s and the
    ternary tq1_0, tq2_0 (256), mxfp4 (32: gpt-oss's experts), and ``data`` the
    bytes of ggml's layout of that type, row after row (the last dimension is
    the row). Pass it in
    ``constants=`` at compile like an array; its tensor keeps this storage
    whatever ``weight_type`` says. A MatMul reads it as its weight when it is
    the right-hand side with ``transpose_b`` ([N, K] rows), as ggml does.
    """

    __slots__ = ("shape", "storage", "data")

    def __init__(self, shape: Sequence[int], storage: str, data):
        if storage not in BLOCKS:
            raise CompileError(f"storage must be one of {list(BLOCKS)}, got {storage!r}")
        shape = tuple(int(d) for d in shape)
        if not shape or any(d < 1 for d in shape):
            raise CompileError(f"a stored weight needs a non-empty shape of positive sizes, got {list(shape)}")
        rows = int(np.prod(shape[:-1], dtype=np.int64))
        want = rows * row_bytes(storage, shape[-1])
        buf = np.frombuffer(data, dtype=np.uint8) if not isinstance(data, np.ndarray) else data.view(np.uint8).reshape(-1)
        if buf.nbytes != want:
            raise CompileError(f"{storage} data of shape {list(shape)} takes {want} bytes, got {buf.nbytes}")
        self.shape = shape
        self.storage = storage
        self.data = np.ascontiguousarray(buf)

    @property
    def nbytes(self) -> int:
        return int(self.data.nbytes)

    def __repr__(self) -> str:
        return f"StoredWeight({list(self.shape)}, {self.storage!r}, {self.nbytes} bytes)"
