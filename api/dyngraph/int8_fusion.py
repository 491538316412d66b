"""Compile-time pass: oneDNN Graph's int8 MatMul pattern becomes one
QuantizedMatMul op, computed with integer dot products.

    Dequantize(src: u8/s8) -> MatMul (+ bias) <- Dequantize(weights: u8/s8, 2-D)
                                   [-> Quantize]

matches when the src Dequantize is per tensor, the weights' is per tensor or
per output channel (the N axis), MatMul does not transpose src, the bias (if
any) is [N] or [1, N], and the dequantized tensors (and the product, when a
Quantize follows) are read by nothing else and are not partition outputs.
Constant weights are stored as rows of K (transposed once, here), the layout
the kernel reads. Everything else stays as it is: Dequantize and an f32
MatMul. The fused op sums the integer products exactly; the f32 graph it
replaces rounds every product (see QuantizedMatMul in ops/quantize.py).
"""

from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np

from .dtypes import DataType
from .logical_tensor import Property
from .op import OpKind
from .ops import InferContext, TensorType, schema_of
from .ops.registry import normalize_attrs
from .program import OpSpec, Program, TensorSpec
from .symbolic import as_expr


_INT8 = (DataType.u8, DataType.s8)


def _producers(prog: Program) -> Dict[int, OpSpec]:
    return {t: op for op in prog.ops for t in op.outputs}


def _readers(prog: Program) -> Dict[int, List[OpSpec]]:
    out: Dict[int, List[OpSpec]] = {}
    for op in prog.ops:
        for t in op.inputs:
            out.setdefault(t, []).append(op)
    return out


def _only_reader(t: int, op: OpSpec, readers, prog: Program) -> bool:
    return t not in prog.outputs and [id(o) for o in readers.get(t, [])] == [id(op)]


def _match(prog: Program, mm: OpSpec, producers, readers) -> Optional[dict]:
    if mm.attrs.get("transpose_a"):
        return None
    da, dw = producers.get(mm.inputs[0]), producers.get(mm.inputs[1])
    if da is None or dw is None or da.kind is not OpKind.Dequantize or dw.kind is not OpKind.Dequantize:
        return None
    if not (_only_reader(mm.inputs[0], mm, readers, prog) and _only_reader(mm.inputs[1], mm, readers, prog)):
        return None
    y = prog.tensors[mm.outputs[0]]
    w = prog.tensors[dw.inputs[0]]
    if prog.tensors[da.inputs[0]].dtype not in _INT8 or w.dtype not in _INT8:
        return None  # (s4 / u4 / f8 Dequantize -> MatMul stays as it is)
    if y.dtype.name != "f32" or len(w.shape) != 2 or da.attrs["qtype"] != "per_tensor":
        return None
    tb = bool(mm.attrs.get("transpose_b"))
    n_axis = 0 if tb else 1
    if dw.attrs["qtype"] == "per_channel" and dw.attrs["axis"] % 2 != n_axis:
        return None
    attrs = {
        "transpose_b": tb,
        "src_scale": da.attrs["scales"][0],
        "src_zp": da.attrs["zps"][0] if da.attrs["zps"] else 0,
        "wei_scales": tuple(dw.attrs["scales"]),
        "wei_zps": tuple(dw.attrs["zps"]),
    }
    inputs = [da.inputs[0], dw.inputs[0]]
    if len(mm.inputs) == 3:
        bias = prog.tensors[mm.inputs[2]]
        n = w.shape[n_axis]
        if bias.dtype.name != "f32" or as_expr(bias.shape[-1]) != as_expr(n) or not (
                len(bias.shape) == 1 or (len(bias.shape) == 2 and as_expr(bias.shape[0]) == as_expr(1))):
            return None
        inputs.append(mm.inputs[2])
    remove = [da, dw]
    out = mm.outputs[0]
    after = readers.get(out, [])
    if len(after) == 1 and after[0].kind is OpKind.Quantize and out not in prog.outputs \
            and after[0].attrs["qtype"] == "per_tensor" and prog.tensors[after[0].outputs[0]].dtype in _INT8:
        q = after[0]
        attrs["dst_scale"] = q.attrs["scales"][0]
        attrs["dst_zp"] = q.attrs["zps"][0] if q.attrs["zps"] else 0
        out = q.outputs[0]
        remove.append(q)
    return {"inputs": inputs, "output": out, "attrs": attrs, "remove": remove}


def _weights_as_rows(prog: Program, data: Dict[int, np.ndarray], op: OpSpec, readers) -> None:
    """A constant weight [K, N] read untransposed: stored as [N, K] (a copy if others read it too)."""
    b = op.inputs[1]
    t = prog.tensors[b]
    if op.attrs["transpose_b"] or t.property is not Property.CONSTANT or b not in data:
        return
    arr = np.ascontiguousarray(np.swapaxes(data[b], -1, -2))
    shape = (t.shape[1], t.shape[0])
    if len(readers.get(b, [])) == 1:
        data[b] = arr
        t.shape = shape
    else:
        new_id = max(x.id for x in prog.tensors) + 1
        prog.tensors.append(TensorSpec(new_id, f"{t.name or t.id}.T", t.dtype, shape, Property.CONSTANT))
        data[len(prog.tensors) - 1] = arr
        op.inputs[1] = len(prog.tensors) - 1
    op.attrs["transpose_b"] = True


def _infer(prog: Program, op: OpSpec) -> None:
    """Run the fused op's rule: it must produce what the pattern produced; its shape checks join the program's."""
    schema = schema_of(op.kind)
    label = f"op '{op.name}' (QuantizedMatMul)"
    attrs = normalize_attrs(schema, op.attrs, label)
    ctx = InferContext(label, [prog.tensors[op.outputs[0]].logical_tensor()], op.name)
    (t,) = schema.infer(attrs, [TensorType(prog.tensors[i].dtype, prog.tensors[i].shape) for i in op.inputs], ctx)
    rec = prog.tensors[op.outputs[0]]
    if t.dtype is not rec.dtype or t.shape != rec.shape:
        raise AssertionError(f"{label}: the fused op produces {t}, the pattern {rec.dtype} {rec.shape}")
    op.attrs = attrs
    known = {(a, b) for a, b, _ in prog.guards}
    for lhs, rhs, msg in ctx.guards:
        if lhs != rhs and (lhs, rhs) not in known:
            prog.guards.append((lhs, rhs, msg))


def fuse_int8_matmul(prog: Program, data: Dict[int, np.ndarray]) -> int:
    """Rewrite every matching pattern; returns how many were fused."""
    fused = 0
    for mm in [op for op in prog.ops if op.kind is OpKind.MatMul]:
        m = _match(prog, mm, _producers(prog), _readers(prog))
        if m is None:
            continue
        new = OpSpec(mm.id, OpKind.QuantizedMatMul, mm.name, m["inputs"], [m["output"]], m["attrs"])
        drop = {id(o) for o in m["remove"]}
        prog.ops = [new if o is mm else o for o in prog.ops if id(o) not in drop]
        _weights_as_rows(prog, data, new, _readers(prog))
        _infer(prog, new)
        fused += 1
    return fused
