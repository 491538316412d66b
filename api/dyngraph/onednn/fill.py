"""Input data for running a case, in the spirit of benchdnn's fills.

Values are chosen so that the reference and the backend can agree closely
and a wrong result cannot hide: floating-point data are multiples of 1/8
(exact in f32, f16 and bf16, so products and sums of them are exact in f32
for any realistic size), spread over a range that keeps the ops that
consume them well conditioned. The range depends on the ops that read the
tensor (looking through StaticReshape, StaticTranspose and TypeCast):

=====================================  ==========================================
consumer (input position)              values
=====================================  ==========================================
any float input not listed below       k/8, k uniform in [-16, 16]: [-2, 2]
MatMul (both operands)                 k/8 in [-1, 1]
Divide (divisor, input 1)              2, 4 or 8 (benchdnn's power-of-2 divisors)
Multiply (input 1, a graph input)      0.25, 0.5 or 1 (benchdnn's, likewise)
Log, Sqrt, RoPE (freq_factors)         k/8 in [1/8, 4]: positive
BatchNormInference (variance)          k/8 in [1/8, 4]: positive
LayerNorm / RMSNorm (gamma)            k/8 in [1/2, 3/2]
bool (Select's condition, ...)         True or False, each half the time
i32 / i64 (Gather indices)             in [0, size of the gathered axis)
i32 / i64 (RoPE positions)             in [0, 4096)
i32 / i64 (ScatterRows indices)        distinct rows, in [0, rows)
i32 / i64 (anything else)              in [-8, 8]
f8_e4m3 / f8_e5m2 (any consumer)       the float values above, rounded to the type
s4 / u4                                any value of the type: [-8, 7] / [0, 15]
zero points of DynamicDequantize       in the range of its src's type (u4 src: [0, 15])
Dropout (probability, input 3)         0.5 (its scale 1 / (1 - p) = 2 keeps dst exact)
Dropout (seed, input 1)                in [1, 2^31)
Dropout (offset, input 2)              0 or in [1, 2^31), each half the time (oneDNN
                                       draws otherwise at 0: both paths get run)
=====================================  ==========================================

Dropout's seed, offset and probability are host scalars the case files do
not give values for (benchdnn's graph driver sets them itself); the values
above keep the seeds within the backend's 32-bit integers.

When one tensor feeds several ops, the first rule that applies in this table
order wins (a MatMul operand that is also divided by stays in [-1, 1]).
Each tensor's data come from a generator seeded by the seed and its id, so a
run is repeatable. Shape inputs (DynamicReshape, DynamicTranspose) cannot be
filled at random: such graphs are refused.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np

from ..dtypes import DataType
from ..errors import UnsupportedError
from ..op import OpKind as K
from ..reference.values import to_storage

_THROUGH = (K.StaticReshape, K.StaticTranspose, K.TypeCast)


def consumers(graph) -> Dict[int, List[Tuple[object, int]]]:
    """tensor id -> [(op, input position)] of the ops that read it, looking
    through reshapes, transposes and casts."""
    direct: Dict[int, List[Tuple[object, int]]] = {}
    for op in graph.get_ops():
        for i, lt in enumerate(op.inputs):
            direct.setdefault(lt.id, []).append((op, i))
    out: Dict[int, List[Tuple[object, int]]] = {}

    def walk(tid, acc, depth):
        for op, i in direct.get(tid, []):
            if op.kind in _THROUGH and depth < 16:
                walk(op.outputs[0].id, acc, depth + 1)
            else:
                acc.append((op, i))

    for tid in direct:
        acc: List[Tuple[object, int]] = []
        walk(tid, acc, 0)
        out[tid] = acc
    return out


def _rule(uses) -> str:
    """The fill of a graph input read by ``uses`` (the table above, in order)."""
    kinds = {(op.kind, i) for op, i in uses}
    if any(k is K.MatMul and i < 2 for k, i in kinds):
        return "matmul"
    if (K.Divide, 1) in kinds:
        return "divisor"
    if (K.Multiply, 1) in kinds:
        return "scale"
    if any(k in (K.Log, K.Sqrt) for k, _ in kinds) or (K.BatchNormInference, 4) in kinds or (K.RoPE, 2) in kinds:
        return "positive"
    if any(k in (K.LayerNorm, K.RMSNorm) and i >= 1 for k, i in kinds):
        return "gamma"
    return "default"


def _floats(rng, shape, rule: str) -> np.ndarray:
    """float32 data (exact in every float type: multiples of 1/8, or powers of 2)."""
    if rule in ("divisor", "scale"):
        choices = np.array([2.0, 4.0, 8.0] if rule == "divisor" else [0.25, 0.5, 1.0], dtype=np.float32)
        return choices[rng.integers(0, 3, shape, dtype=np.int8)]
    lo, hi = _RANGES[rule]
    return rng.integers(lo, hi + 1, shape, dtype=np.int8).astype(np.float32) * np.float32(0.125)


_RANGES = {"matmul": (-8, 8), "positive": (1, 32), "gamma": (4, 12), "default": (-16, 16)}
_INT_RANGES = {DataType.s4: (-8, 7), DataType.u4: (0, 15)}


def fill_tensor(graph, tid: int, shape: Tuple[int, ...], uses, seed: int,
                shapes: Optional[Dict[int, Tuple[int, ...]]] = None) -> np.ndarray:
    """Data for graph input ``tid`` at ``shape``, as dyngraph takes it (bf16 as uint16 bits)."""
    lt = graph.logical_tensor(tid)
    dt = lt.dtype
    rng = np.random.default_rng([seed, tid])
    shape = tuple(int(d) for d in shape)
    if any(op.kind is K.Dropout and i == 3 for op, i in uses):
        return to_storage(np.full(shape, 0.5, np.float32), dt)
    if dt.is_float or dt.is_f8:  # (f8: the same values, rounded to the type: every one representable)
        return to_storage(_floats(rng, shape, _rule(uses)), dt)
    zp_of = next((op.inputs[0].dtype for op, i in uses if op.kind is K.DynamicDequantize and i == 2), None)
    if dt in _INT_RANGES or zp_of in _INT_RANGES:
        lo, hi = _INT_RANGES[zp_of if zp_of in _INT_RANGES else dt]
        return rng.integers(lo, hi + 1, shape).astype(dt.numpy)
    if dt is DataType.boolean:
        return rng.integers(0, 2, shape).astype(bool)
    for op, i in uses:
        if op.kind in (K.DynamicReshape, K.DynamicTranspose) and i == 1:
            raise UnsupportedError(f"{op.label}: its shape input {lt.label} cannot be filled at random",
                                   ["filling a shape input"])
    for op, i in uses:
        if op.kind is K.Dropout and i == 1:
            return np.full(shape, rng.integers(1, 2**31), dt.numpy)
        if op.kind is K.Dropout and i == 2:
            return np.full(shape, rng.integers(1, 2**31) if rng.integers(0, 2) else 0, dt.numpy)
        if op.kind is K.Gather and i == 1:
            table = (shapes or {}).get(op.inputs[0].id)
            axis = op.attrs.get("axis", 0)
            n = table[axis] if table is not None else 1
            return rng.integers(0, max(n, 1), shape).astype(dt.numpy)
        if op.kind is K.RoPE and i == 1:
            return rng.integers(0, 4096, shape).astype(dt.numpy)
        if op.kind is K.ScatterRows and i == 1:
            dst = (shapes or {}).get(op.inputs[0].id)
            rows = dst[-2] if dst is not None else int(np.prod(shape))
            n = int(np.prod(shape))
            if n > rows:
                raise UnsupportedError(f"{op.label}: {n} distinct rows of {rows} cannot be chosen",
                                       ["filling ScatterRows indices"])
            return rng.permutation(rows)[:n].reshape(shape).astype(dt.numpy)
    return rng.integers(-8, 9, shape).astype(dt.numpy)
