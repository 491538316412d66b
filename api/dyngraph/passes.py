"""Compile-time rewrites of a Program, applied before it is serialized.

- BatchNormInference after a Convolution (both with constant parameters,
  the convolution's output read by nothing else): folded into the
  convolution's weights and bias (``fold_batch_norm``).
- The int8 MatMul and Convolution patterns (Dequantize -> MatMul /
  Convolution <- Dequantize [-> Quantize]) become one QuantizedMatMul /
  QuantizedConvolution (int8_fusion.py).
- MatMul with a constant right-hand side: the weight is stored transposed
  (``transpose_b=True``), the layout ggml's matrix product reads without a copy.
- ``weight_type``: constants read only by MatMul (as its weight) or Gather
  (as its table) are stored in that type (f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1). One
  type for all of them, or a mapping chosen per tensor: keys are tensor ids
  or glob patterns (fnmatch) on tensor names, values types; the first key
  that matches a tensor decides, a tensor no key matches stays as it is.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Dict, Mapping, Optional, Union

import numpy as np

from .errors import CompileError
from .int8_fusion import fuse_int8
from .logical_tensor import Property
from .op import OpKind
from .ops import schema_of
from .program import Program, TensorSpec
from .stored_weight import StoredWeight

WEIGHT_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1")
QUANT_BLOCK = 32


def _users(prog: Program, tidx: int):
    return [(op, pos) for op in prog.ops for pos, i in enumerate(op.inputs) if i == tidx]


def pretranspose_matmul_weights(prog: Program, data: Dict[int, np.ndarray]) -> Dict[int, int]:
    """Constant weights of ops that read them as rows under an attribute (``weight_rows_attr``: MatMul's
    ``transpose_b``) stored transposed, the attribute set. Returns the transposed copies made for weights
    with other users (copy index -> weight index)."""
    copies: Dict[int, int] = {}
    for op in prog.ops:
        attr = schema_of(op.kind).weight_rows_attr
        if attr is None or op.attrs.get(attr):
            continue
        for pos in schema_of(op.kind).weight_inputs:
            b = op.inputs[pos]
            t = prog.tensors[b]
            if t.property is not Property.CONSTANT or b not in data:
                continue
            if isinstance(data[b], StoredWeight):
                raise CompileError(f"{op.name or op.id}: the stored weight {t.name or t.id} is read untransposed; "
                                   f"a stored weight is a MatMul's right-hand side with transpose_b ([N, K] rows)")
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
                op.inputs[pos] = nb
                copies[nb] = b
            op.attrs[attr] = True
    return copies


WeightType = Union[str, Mapping[Union[int, str], str]]


def _check_type(wt, where: str) -> str:
    if wt not in WEIGHT_TYPES:
        raise CompileError(f"{where} must be one of {list(WEIGHT_TYPES)}, got {wt!r}")
    return wt


def _read_as_weight(prog: Program, tidx: int) -> bool:
    """Read only as a weight (OpSchema.reads_weight: a MatMul's weight only when it is read
    transposed, as rows)."""
    users = _users(prog, tidx)
    return bool(users) and all(schema_of(op.kind).reads_weight(op.attrs, pos) for op, pos in users)


def _eligible(prog: Program, tidx: int, wt: str) -> bool:
    """A float constant read only as a weight, with rows that split into
    quantization blocks for q types."""
    t = prog.tensors[tidx]
    return _read_as_weight(prog, tidx) and not (wt.startswith("q") and t.shape[-1].value % QUANT_BLOCK)


def weight_types(prog: Program, data: Dict[int, np.ndarray], weight_type: WeightType,
                 copies: Optional[Dict[int, int]] = None) -> Dict[int, str]:
    """The storage type each weight gets (tensor index -> type). ``copies``:
    transposed copies of weights, chosen for by their weight's id and name."""
    copies = copies or {}
    consts = [i for i, t in enumerate(prog.tensors)
              if t.property is Property.CONSTANT and t.dtype.is_float and i in data
              and not isinstance(data[i], StoredWeight)]  # those keep their own storage
    if isinstance(weight_type, str):
        _check_type(weight_type, "weight_type")
        return {i: weight_type for i in consts if _eligible(prog, i, weight_type)}
    if not isinstance(weight_type, Mapping):
        raise CompileError(f"weight_type must be a type name or a mapping of tensor ids / name patterns to types, "
                           f"got {type(weight_type).__name__}")
    rules = []
    for key, wt in weight_type.items():
        if isinstance(key, bool) or not isinstance(key, (int, str)):
            raise CompileError(f"weight_type keys are tensor ids or name patterns, got {key!r}")
        rules.append((key, _check_type(wt, f"weight_type[{key!r}]")))
    used, out = set(), {}
    for i in consts:
        t = prog.tensors[copies.get(i, i)]
        name = t.name or str(t.id)
        for key, wt in rules:
            if (t.id == key) if isinstance(key, int) else fnmatchcase(name, key):
                used.add(key)
                if _eligible(prog, i, wt):
                    out[i] = wt
                break
    unused = [k for k, _ in rules if k not in used]
    if unused:
        names = [prog.tensors[i].name or str(prog.tensors[i].id) for i in consts]
        raise CompileError(f"weight_type keys {unused} match no float constant of this partition "
                           f"(its constants: {names[:8]}{' ...' if len(names) > 8 else ''})")
    return out


def assign_weight_storage(prog: Program, data: Dict[int, np.ndarray], weight_type: WeightType,
                          copies: Optional[Dict[int, int]] = None) -> None:
    for tidx, wt in weight_types(prog, data, weight_type, copies).items():
        prog.tensors[tidx].storage = wt


def _constant(prog: Program, data, tidx: int) -> bool:
    return prog.tensors[tidx].property is Property.CONSTANT and tidx in data and \
        isinstance(data[tidx], np.ndarray) and data[tidx].dtype.kind == "f"


def _own_copy(prog: Program, data, op, pos: int, arr: np.ndarray, suffix: str) -> None:
    """Give op input `pos` the data `arr`: in place when nothing else reads
    the tensor, else as a new constant."""
    tidx = op.inputs[pos]
    if len(_users(prog, tidx)) == 1:
        data[tidx] = arr
        return
    t = prog.tensors[tidx]
    prog.tensors.append(TensorSpec(max(x.id for x in prog.tensors) + 1, f"{t.name or t.id}.{suffix}", t.dtype, t.shape,
                                   Property.CONSTANT))
    op.inputs[pos] = len(prog.tensors) - 1
    data[op.inputs[pos]] = arr


def fold_batch_norm(prog: Program, data: Dict[int, np.ndarray]) -> int:
    """Convolution -> BatchNormInference with constant weights, bias and
    statistics becomes one Convolution: weights scaled by a = gamma /
    sqrt(variance + epsilon) per output channel, bias (b - mean) * a + beta
    (computed in float64, stored in the weights' dtype). Returns the number
    of ops folded."""
    producer = {o: op for op in prog.ops for o in op.outputs}
    folded = []
    for bn in prog.ops:
        if bn.kind is not OpKind.BatchNormInference:
            continue
        conv = producer.get(bn.inputs[0])
        if conv is None or conv.kind is not OpKind.Convolution or conv.attrs["data_format"] != bn.attrs["data_format"]:
            continue
        out = conv.outputs[0]
        if len(_users(prog, out)) != 1 or out in prog.outputs:
            continue
        params = conv.inputs[1:] + bn.inputs[1:]
        if not all(_constant(prog, data, i) for i in params):
            continue
        gamma, beta, mean, var = (data[i].astype(np.float64) for i in bn.inputs[1:])
        a = gamma / np.sqrt(var + bn.attrs["epsilon"])
        w = data[conv.inputs[1]]
        axis = 0 if conv.attrs["weights_format"] == "OIX" else w.ndim - 1
        shape = [1] * w.ndim
        shape[axis] = -1
        new_w = (w.astype(np.float64) * a.reshape(shape)).astype(w.dtype)
        b = data[conv.inputs[2]].astype(np.float64) if len(conv.inputs) == 3 else np.zeros_like(a)
        new_b = ((b - mean) * a + beta).astype(w.dtype)
        _own_copy(prog, data, conv, 1, new_w, "bn_folded")
        if len(conv.inputs) == 3:
            _own_copy(prog, data, conv, 2, new_b, "bn_folded")
        else:
            wt = prog.tensors[conv.inputs[1]]
            prog.tensors.append(TensorSpec(max(x.id for x in prog.tensors) + 1, f"{wt.name or wt.id}.bn_bias", wt.dtype,
                                           prog.tensors[bn.inputs[1]].shape, Property.CONSTANT))
            conv.inputs.append(len(prog.tensors) - 1)
            data[conv.inputs[2]] = new_b
        conv.outputs[0] = bn.outputs[0]  # (the convolution's old output is read by nothing now)
        producer[bn.outputs[0]] = conv
        folded.append(bn)
    prog.ops = [op for op in prog.ops if not any(op is f for f in folded)]
    return len(folded)


def run_passes(prog: Program, data: Dict[int, np.ndarray], weight_type: Optional[WeightType] = None) -> None:
    fold_batch_norm(prog, data)
    fuse_int8(prog, data)
    copies = pretranspose_matmul_weights(prog, data)
    for i, d in data.items():
        if isinstance(d, StoredWeight):
            if not _read_as_weight(prog, i):
                t = prog.tensors[i]
                raise CompileError(f"the stored weight {t.name or t.id} ({d.storage}) is read by an op that takes "
                                   f"no stored weights: only a MatMul's transposed right-hand side or a Gather's "
                                   f"table can")
            prog.tensors[i].storage = d.storage
    if weight_type is not None:
        assign_weight_storage(prog, data, weight_type, copies)
