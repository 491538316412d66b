"""Compile-time pass: oneDNN Graph's int8 MatMul and Convolution patterns
become one QuantizedMatMul / QuantizedConvolution op, computed with integer
dot products.

    Dequantize(src: u8/s8) -> MatMul (+ bias) <- Dequantize(weights: u8/s8, 2-D)
                                   [-> Quantize]
    Dequantize(src: u8/s8) -> Convolution (+ bias) <- Dequantize(weights: u8/s8)
                                   [-> Quantize]

matches when the src Dequantize is per tensor, the weights' is per tensor or
per output channel (the N axis), MatMul does not transpose src, the bias (if
any) is [N] or [1, N], and the dequantized tensors (and the product, when a
Quantize follows) are read by nothing else and are not partition outputs.
Constant weights are stored as rows of K (transposed once, here), the layout
the kernel reads. Everything else stays as it is: Dequantize and an f32
MatMul. The fused op sums the integer products exactly; the f32 graph it
replaces rounds every product (see QuantizedMatMul in ops/quantize.py).

The Convolution pattern matches on the same terms: src per tensor, weights
per tensor or per output channel (axis 0 of OIX weights, the last of XIO),
an f32 bias [O], any window (groups, strides, dilations, pads, auto_pad, NCX
or NXC). Constant weights are stored OXI ([O, K..., C/groups]: each output
channel's taps as one row, in the order the kernel gathers src), once, here.
"""

from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np

from .dtypes import DataType
from .errors import CompileError
from .logical_tensor import Property
from .op import OpKind
from .op_pipeline import infer_new_op
from .ops import TensorType, schema_of
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


def _match_matmul(prog: Program, mm: OpSpec, producers, readers) -> Optional[dict]:
    if mm.attrs.get("transpose_a"):
        return None
    pair = _dequantized_operands(prog, mm, producers, readers)
    if pair is None:
        return None
    da, dw = pair
    w = prog.tensors[dw.inputs[0]]
    if len(w.shape) != 2:
        return None
    tb = bool(mm.attrs.get("transpose_b"))
    n_axis = 0 if tb else 1
    if dw.attrs["qtype"] == "per_channel" and dw.attrs["axis"] % 2 != n_axis:
        return None
    attrs = {"transpose_b": tb, **_int8_attrs(da, dw)}
    inputs = [da.inputs[0], dw.inputs[0]]
    if len(mm.inputs) == 3:
        bias = prog.tensors[mm.inputs[2]]
        n = w.shape[n_axis]
        if bias.dtype.name != "f32" or as_expr(bias.shape[-1]) != as_expr(n) or not (
                len(bias.shape) == 1 or (len(bias.shape) == 2 and as_expr(bias.shape[0]) == as_expr(1))):
            return None
        inputs.append(mm.inputs[2])
    return _requantized(prog, mm, readers, {"inputs": inputs, "attrs": attrs, "remove": [da, dw]})


def _requantized(prog: Program, op: OpSpec, readers, m: dict) -> dict:
    """The match's output: op's, or that of a per-tensor Quantize that alone reads it."""
    out = op.outputs[0]
    after = readers.get(out, [])
    m["output"] = out
    if len(after) == 1 and after[0].kind is OpKind.Quantize and out not in prog.outputs \
            and after[0].attrs["qtype"] == "per_tensor" and prog.tensors[after[0].outputs[0]].dtype in _INT8:
        q = after[0]
        m["attrs"]["dst_scale"] = q.attrs["scales"][0]
        m["attrs"]["dst_zp"] = q.attrs["zps"][0] if q.attrs["zps"] else 0
        m["output"] = q.outputs[0]
        m["remove"].append(q)
    return m


def _dequantized_operands(prog: Program, op: OpSpec, producers, readers):
    """The Dequantize ops that make op's first two inputs, each read by op alone (else None)."""
    da, dw = producers.get(op.inputs[0]), producers.get(op.inputs[1])
    if da is None or dw is None or da.kind is not OpKind.Dequantize or dw.kind is not OpKind.Dequantize:
        return None
    if not (_only_reader(op.inputs[0], op, readers, prog) and _only_reader(op.inputs[1], op, readers, prog)):
        return None
    if prog.tensors[da.inputs[0]].dtype not in _INT8 or prog.tensors[dw.inputs[0]].dtype not in _INT8:
        return None  # (s4 / u4 / f8 Dequantize -> MatMul / Convolution stays as it is)
    if da.attrs["qtype"] != "per_tensor" or prog.tensors[op.outputs[0]].dtype.name != "f32":
        return None
    return da, dw


def _int8_attrs(da: OpSpec, dw: OpSpec) -> dict:
    return {
        "src_scale": da.attrs["scales"][0],
        "src_zp": da.attrs["zps"][0] if da.attrs["zps"] else 0,
        "wei_scales": tuple(dw.attrs["scales"]),
        "wei_zps": tuple(dw.attrs["zps"]),
    }


_RESOLVED = ("resolved_pads_begin", "resolved_pads_end")


def _match_conv(prog: Program, conv: OpSpec, producers, readers) -> Optional[dict]:
    pair = _dequantized_operands(prog, conv, producers, readers)
    if pair is None:
        return None
    da, dw = pair
    w = prog.tensors[dw.inputs[0]]
    o_axis = 0 if conv.attrs["weights_format"] == "OIX" else len(w.shape) - 1
    if dw.attrs["qtype"] == "per_channel" and dw.attrs["axis"] % len(w.shape) != o_axis:
        return None
    attrs = {k: v for k, v in conv.attrs.items() if k not in _RESOLVED}
    attrs.update(_int8_attrs(da, dw))
    inputs = [da.inputs[0], dw.inputs[0]]
    if len(conv.inputs) == 3:
        if prog.tensors[conv.inputs[2]].dtype.name != "f32":
            return None
        inputs.append(conv.inputs[2])
    return _requantized(prog, conv, readers, {"inputs": inputs, "attrs": attrs, "remove": [da, dw]})




def _new_constant(prog: Program, data, t: TensorSpec, suffix: str, arr: np.ndarray, shape) -> int:
    new_id = max(x.id for x in prog.tensors) + 1
    prog.tensors.append(TensorSpec(new_id, f"{t.name or t.id}.{suffix}", t.dtype, shape, Property.CONSTANT))
    data[len(prog.tensors) - 1] = arr
    return len(prog.tensors) - 1


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
        op.inputs[1] = _new_constant(prog, data, t, "T", arr, shape)
    op.attrs["transpose_b"] = True


def _weights_as_oxi(prog: Program, data: Dict[int, np.ndarray], op: OpSpec, readers) -> None:
    """Constant convolution weights OIX [O, I, K...] or XIO [K..., I, O]: stored OXI [O, K..., I]."""
    b = op.inputs[1]
    t = prog.tensors[b]
    fmt = op.attrs["weights_format"]
    if fmt == "OXI" or t.property is not Property.CONSTANT or b not in data:
        return
    r = len(t.shape)
    perm = (0, *range(2, r), 1) if fmt == "OIX" else (r - 1, *range(r - 2), r - 2)
    arr = np.ascontiguousarray(np.transpose(data[b], perm))
    shape = tuple(t.shape[i] for i in perm)
    if len(readers.get(b, [])) == 1:
        data[b] = arr
        t.shape = shape
    else:
        op.inputs[1] = _new_constant(prog, data, t, "oxi", arr, shape)
    op.attrs["weights_format"] = "OXI"


def _infer(prog: Program, op: OpSpec) -> None:
    """Run the fused op's rule: it must produce what the pattern produced; its shape checks join the program's."""
    label = f"op '{op.name}' ({op.kind.name})"
    ins = [TensorType(prog.tensors[i].dtype, prog.tensors[i].shape) for i in op.inputs]
    (t,), ctx, attrs = infer_new_op(schema_of(op.kind), op.attrs, ins, 1, label, op.name,
                                    [prog.tensors[op.outputs[0]].logical_tensor()])
    rec = prog.tensors[op.outputs[0]]
    if t.dtype is not rec.dtype or t.shape != rec.shape:
        raise CompileError(f"{label}: the fused op produces {t}, the pattern {rec.dtype} {rec.shape}")
    op.attrs = {**attrs, **ctx.backend_attrs}
    known = {(a, b) for a, b, _ in prog.guards}
    for lhs, rhs, msg in ctx.guards:
        if lhs != rhs and (lhs, rhs) not in known:
            prog.guards.append((lhs, rhs, msg))


# op kind -> (its pattern, the fused kind, how its constant weights are stored)
_PATTERNS = {
    OpKind.MatMul: (_match_matmul, OpKind.QuantizedMatMul, _weights_as_rows),
    OpKind.Convolution: (_match_conv, OpKind.QuantizedConvolution, _weights_as_oxi),
}


def fuse_int8(prog: Program, data: Dict[int, np.ndarray]) -> int:
    """Rewrite every matching pattern; returns how many were fused."""
    fused = 0
    maps = None  # (producers, readers) of prog.ops as they are: made again only after a rewrite
    for op in [o for o in prog.ops if o.kind in _PATTERNS]:
        match, kind, store_weights = _PATTERNS[op.kind]
        if maps is None:
            maps = _producers(prog), _readers(prog)
        m = match(prog, op, *maps)
        if m is None:
            continue
        maps = None
        new = OpSpec(op.id, kind, op.name, m["inputs"], [m["output"]], m["attrs"])
        drop = {id(o) for o in m["remove"]}
        prog.ops = [new if o is op else o for o in prog.ops if id(o) not in drop]
        store_weights(prog, data, new, _readers(prog))
        _infer(prog, new)
        fused += 1
    return fused
