"""The one way an op is added to a graph: its declaration's checks, then dtype and
shape inference, then the checks of what the rule produced; and the ids new ops and
tensors get.

Every producer of ops goes through :func:`infer_new_op`: ``GraphBuilder.op``,
shape inference (``inference.infer_op``: finalize, compile, load), the PyTorch
converter (``Converter.emit``), int8 fusion and, for its ids, the oneDNN reader.
A shape rule may then take for granted what its op's declaration states (dtype
classes, inputs that share a dtype, rank-dependent attributes: ``check_facts``).
"""

from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

from .errors import DTypeError, GraphError
from .ops.registry import (InferContext, OpSchema, TensorType, check_arity, check_dtypes, check_facts, check_ranks,
                           normalize_attrs)


class Ids:
    """Ids handed out in order, from ``tensor`` and ``op`` on: a graph's new tensors and ops."""

    def __init__(self, tensor: int = 0, op: int = 0):
        self.next_tensor = tensor
        self.next_op = op

    def tensor(self) -> int:
        self.next_tensor += 1
        return self.next_tensor - 1

    def op(self) -> int:
        self.next_op += 1
        return self.next_op - 1


def infer_new_op(schema: OpSchema, attrs: Dict[str, Any], in_types: Sequence[TensorType], n_out: int, label: str,
                 name: str = "op", declared: Sequence[Any] = (),
                 counted: str = "declared") -> Tuple[List[TensorType], InferContext, Dict[str, Any]]:
    """The output types of an op of ``schema`` on inputs of ``in_types``, every check done: arity,
    attributes (normalized: the returned dict), the declaration's facts, the rule (``declared``: the
    outputs as the caller declared them, for the rule's messages), then the outputs' count (``counted``
    names the caller's count in the message), dtype classes, ranks and ``out_dtype_of``. Returns the
    types, the rule's context (guards, value symbols, backend attributes) and the normalized attributes."""
    check_arity(schema, len(in_types), n_out, label)
    norm = normalize_attrs(schema, attrs, label)
    check_facts(schema, norm, in_types, label)
    ctx = InferContext(label, declared, name)
    outs = schema.infer(norm, list(in_types), ctx)
    if len(outs) != n_out:
        raise GraphError(f"{label}: produces {len(outs)} outputs, {n_out} {counted}")
    check_dtypes(schema, [t.dtype for t in outs], label, "output")
    check_ranks(schema, in_types, outs, label)
    if schema.out_dtype_of is not None and schema.out_dtype_of < len(in_types):
        want = in_types[schema.out_dtype_of].dtype
        for k, t in enumerate(outs):
            if t.dtype is not want:
                raise DTypeError(f"{label}: output {k} is {t.dtype}, the op's outputs have the dtype of "
                                 f"{schema.input_label(schema.out_dtype_of)} ({want})")
    return outs, ctx, norm


__all__ = ["Ids", "infer_new_op"]
