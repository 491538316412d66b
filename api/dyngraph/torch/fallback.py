"""Nodes that run in PyTorch, between dyngraph partitions.

A node the converters cannot map is a ``Wildcard`` op in the dyngraph graph;
its unsupported partition becomes a :class:`TorchStep` that calls the
node's original ATen op on the values of its arguments (tensors by id, sizes
evaluated for the current input shapes) and stores its results.
"""

from __future__ import annotations

from typing import List

import torch

from .convert import Fallback, Ref, WildcardInfo


def resolve(t, env: dict, symenv):
    """The runtime value of an argument template."""
    if isinstance(t, Ref):
        if t.kind == Ref.TENSOR:
            return env[t.value]
        if t.kind == Ref.COMPLEX:  # float32 parts [..., 2]
            return torch.view_as_complex(env[t.value].contiguous())
        return t.value.evaluate(symenv()) if not isinstance(t.value, int) else t.value
    if isinstance(t, (list, tuple)):
        return type(t)(resolve(x, env, symenv) for x in t)
    if isinstance(t, dict):
        return {k: resolve(x, env, symenv) for k, x in t.items()}
    return t


def assign(t, value, env: dict) -> None:
    """Store a node's results by the tensor ids of its output template."""
    if isinstance(t, Ref):
        if t.kind == Ref.TENSOR:
            env[t.value] = value
        return
    if isinstance(t, (list, tuple)):
        for x, v in zip(t, value):
            assign(x, v, env)


class TorchStep:
    """One node run with PyTorch."""

    __slots__ = ("fn", "args", "kwargs", "outputs", "name")

    def __init__(self, info: WildcardInfo):
        self.fn = info.node.target
        self.args = info.args
        self.kwargs = info.kwargs
        self.outputs = info.outputs
        self.name = info.node.name

    def __call__(self, env: dict, symenv) -> None:
        out = self.fn(*resolve(self.args, env, symenv), **resolve(self.kwargs, env, symenv))
        assign(self.outputs, out, env)


def format_report(fallbacks: List[Fallback], n_supported_ops: int, n_partitions: int) -> str:
    if not fallbacks:
        return f"all nodes run in dyngraph ({n_supported_ops} ops, {n_partitions} partition(s))"
    lines = [f"{len(fallbacks)} node(s) run in PyTorch ({n_supported_ops} ops in {n_partitions} dyngraph partition(s)):"]
    lines += [f"  {f}" for f in fallbacks]
    return "\n".join(lines)
