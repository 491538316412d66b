"""A model's weights as its GGUF file stores them: the q4_1, q8_0, ... blocks
used as they are by ``dyngraph.torch.compile(..., weights=gguf_weights(path, module))``.

transformers loads a GGUF model by dequantizing every weight to float;
compiled with these, dyngraph keeps the file's own types instead (no
re-quantizing, which would lose accuracy again, e.g. q4_1 -> q4_0, and the
memory of the file's size, not of f32). Names are matched with the ``gguf``
package's tensor-name map of the file's architecture; Llama's query and key
rows, which llama.cpp's converter interleaves per head for its RoPE, are put
back in the order of the PyTorch model (whole rows of blocks move, nothing is
dequantized).
"""

from __future__ import annotations

from typing import Dict, Optional

import numpy as np
import torch

from ..errors import CompileError
from ..stored_weight import StoredWeight

# GGUF tensor types dyngraph stores as they are (f32 weights gain nothing: the model's own values are used)
STORAGE = {"F16": "f16", "BF16": "bf16", "Q8_0": "q8_0", "Q4_0": "q4_0", "Q4_1": "q4_1", "Q5_0": "q5_0",
           "Q5_1": "q5_1", "Q2_K": "q2_K", "Q3_K": "q3_K", "Q4_K": "q4_K", "Q5_K": "q5_K", "Q6_K": "q6_K",
           "IQ4_NL": "iq4_nl", "IQ4_XS": "iq4_xs", "IQ2_XXS": "iq2_xxs", "IQ2_XS": "iq2_xs", "IQ2_S": "iq2_s",
           "IQ3_XXS": "iq3_xxs", "IQ3_S": "iq3_s", "IQ1_S": "iq1_s", "IQ1_M": "iq1_m", "TQ1_0": "tq1_0",
           "TQ2_0": "tq2_0", "MXFP4": "mxfp4"}
# architectures whose converter interleaves the query / key rows of each head
ROPE_INTERLEAVED = {"llama"}


def _field(reader, key: str):
    f = reader.fields.get(key)
    if f is None:
        raise CompileError(f"the GGUF file has no {key!r}")
    v = f.parts[f.data[0]]
    return bytes(v).decode() if f.types and f.types[0].name == "STRING" else int(v[0])


def _rows_from_gguf(n_rows: int, n_head: int) -> np.ndarray:
    """Row order of the PyTorch weight in the file's order: per head of D rows, the
    file holds row 2 j + a where PyTorch has row a D/2 + j."""
    d = n_rows // n_head
    half = d // 2
    h, a, j = np.meshgrid(np.arange(n_head), np.arange(2), np.arange(half), indexing="ij")
    return (h * d + 2 * j + a).reshape(-1)


def gguf_weights(path: str, module: torch.nn.Module) -> Dict[str, StoredWeight]:
    """``module``'s parameters (by their names in ``module``, e.g. the wrapper
    you export) that the GGUF file at ``path`` stores in f16, bf16, q8_0, q4_0,
    q4_1, q5_0, q5_1, a k-quant (q2_K to q6_K: llama.cpp's Q*_K_S/M files),
    an i-quant (iq1_s to iq4_xs: its IQ* files), tq1_0, tq2_0 or mxfp4, as
    StoredWeights; a tied parameter under each of its names. A file tensor
    whose shape differs from its parameter's is a CompileError naming both."""
    import gguf

    reader = gguf.GGUFReader(path)
    arch = _field(reader, "general.architecture")
    archs = {name: a for a, name in gguf.MODEL_ARCH_NAMES.items()}
    if arch not in archs:
        raise CompileError(f"{path}: architecture {arch!r} is not known to the gguf package")
    tmap = gguf.get_tensor_name_map(archs[arch], _field(reader, f"{arch}.block_count"))
    heads = {"attn_q": _field(reader, f"{arch}.attention.head_count")}
    heads["attn_k"] = _field(reader, f"{arch}.attention.head_count_kv") if f"{arch}.attention.head_count_kv" in \
        reader.fields else heads["attn_q"]
    tensors = {t.name: t for t in reader.tensors}
    out: Dict[str, StoredWeight] = {}
    names: Dict[int, list] = {}  # a parameter under several names (tied weights): the same StoredWeight for each
    for name, param in module.named_parameters(remove_duplicate=False):
        names.setdefault(id(param), []).append(name)
    for name, param in module.named_parameters(remove_duplicate=False):
        gname = _gguf_name(tmap, name)
        t = tensors.get(gname) if gname else None
        if t is None or t.tensor_type.name not in STORAGE:
            continue
        shape = tuple(int(d) for d in reversed(t.shape))
        if shape != tuple(param.shape):
            raise CompileError(f"{path}: {gname} has shape {list(shape)}, the model's {name} {list(param.shape)}")
        rows = np.asarray(t.data).reshape(int(np.prod(shape[:-1])), -1)
        kind = gname.split(".")[-2]
        if arch in ROPE_INTERLEAVED and kind in heads and len(shape) == 2:
            rows = rows[_rows_from_gguf(shape[0], heads[kind])]
        sw = StoredWeight(shape, STORAGE[t.tensor_type.name], np.ascontiguousarray(rows))
        for alias in names[id(param)]:
            out.setdefault(alias, sw)
    return out


def _gguf_name(tmap, name: str) -> Optional[str]:
    """The file's name of a parameter, trying without leading module names
    (``model.model.layers.0...`` of a wrapper is ``model.layers.0...``)."""
    parts = name.split(".")
    for i in range(len(parts) - 1):
        g = tmap.get_name(".".join(parts[i:]), try_suffixes=(".weight", ".bias"))
        if g is not None:
            return g
    return None
