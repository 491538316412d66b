"""Ops: ``Op(id, kind, inputs, outputs, attrs, name)`` and the ``OpKind`` enum."""

from __future__ import annotations

import enum
from typing import Any, Dict, List, Optional, Sequence

from .errors import GraphError
from .fb import OpKind as _fb_opkind
from .logical_tensor import LogicalTensor

# The op kinds are the IR schema's (schema/dyngraph_ir.fbs): one source of truth.
OpKind = enum.IntEnum(
    "OpKind",
    {k: v for k, v in vars(_fb_opkind.OpKind).items() if not k.startswith("_") and k != "End"},
    module=__name__,
)
OpKind.__doc__ = "Kinds of ops. A kind the backend cannot lower lands in an unsupported partition."


class Op:
    """One operation of a graph.

    ``Op(id, kind, inputs, outputs, attrs=None, name=None)``: ``inputs`` and
    ``outputs`` are :class:`LogicalTensor` lists; ``attrs`` a dict of attribute
    values (ints, floats, bools, strings, lists, dimension expressions).
    """

    __slots__ = ("id", "kind", "inputs", "outputs", "attrs", "name")

    def __init__(
        self,
        id: int,
        kind: OpKind,
        inputs: Sequence[LogicalTensor] = (),
        outputs: Sequence[LogicalTensor] = (),
        attrs: Optional[Dict[str, Any]] = None,
        name: Optional[str] = None,
    ):
        if isinstance(id, bool) or not isinstance(id, int) or id < 0:
            raise GraphError(f"op id must be a non-negative int, got {id!r}")
        if id > 2**63 - 1:  # (the IR stores ids as int64)
            raise GraphError(f"op id {id} is above 2**63 - 1")
        if isinstance(kind, str):
            try:
                kind = OpKind[kind]
            except KeyError:
                raise GraphError(f"op {id}: unknown op kind {kind!r}") from None
        if not isinstance(kind, OpKind):
            raise GraphError(f"op {id}: kind must be an OpKind, got {kind!r}")
        for what, lts in (("input", inputs), ("output", outputs)):
            for i, lt in enumerate(lts):
                if not isinstance(lt, LogicalTensor):
                    raise GraphError(f"op {name or id} ({kind.name}): {what} {i} is not a LogicalTensor: {lt!r}")
        self.id = id
        self.kind = kind
        self.inputs: List[LogicalTensor] = list(inputs)
        self.outputs: List[LogicalTensor] = list(outputs)
        self.attrs: Dict[str, Any] = dict(attrs or {})
        self.name = name or f"{kind.name.lower()}_{id}"

    def add_input(self, lt: LogicalTensor) -> None:
        self.inputs.append(lt)

    def add_output(self, lt: LogicalTensor) -> None:
        self.outputs.append(lt)

    def set_attr(self, name: str, value: Any) -> None:
        self.attrs[name] = value

    def get_attr(self, name: str, default: Any = None) -> Any:
        return self.attrs.get(name, default)

    @property
    def label(self) -> str:
        return f"op {self.id} ({self.name}, {self.kind.name})"

    def __repr__(self) -> str:
        ins = ", ".join(str(t.id) for t in self.inputs)
        outs = ", ".join(str(t.id) for t in self.outputs)
        return f"Op({self.id}, {self.kind.name}, [{ins}] -> [{outs}], {self.attrs})"


__all__ = ["Op", "OpKind"]
