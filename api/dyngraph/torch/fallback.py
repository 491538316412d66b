"""Nodes that run in PyTorch, between dyngraph partitions.

A node the converters cannot map is a ``Wildcard`` op in the dyngraph graph;
its unsupported partition becomes a :class:`TorchStep` that calls the
node's original ATen op on the values of its arguments (tensors by id, sizes
evaluated for the current input shapes) and stores its results.
"""

from __future__ import annotations

from typing import List

import torch
import torch.utils._pytree as pytree

from ..errors import DyngraphError, ShapeError
from .convert import Fallback, Ref, WildcardInfo


class DataSizeOutOfRange(ShapeError):
    """A size a node computed from tensor data (a boolean mask's selection) is outside what
    dyngraph runs: 0 (dyngraph sizes are at least 1), or past torch's bound on it."""

    def __init__(self, message: str, value: int):
        super().__init__(message)
        self.value = value


class DataAssertionError(DyngraphError, ValueError):
    """A runtime assertion torch's export put on a float read from tensor data (``0 <= t``
    before ``t ** 0.5``) failed for this call's data, as it fails in ``ep.module()``."""


def resolve(t, env: dict, symenv):
    """The runtime value of an argument template."""
    if isinstance(t, Ref):
        if t.kind == Ref.TENSOR:
            return env[t.value]
        if t.kind == Ref.COMPLEX:  # float32 parts [..., 2]
            return torch.view_as_complex(env[t.value].contiguous())
        if t.kind == Ref.SCALAR:
            return env[t.value].item()
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
        elif t.kind == Ref.SCALAR:
            env[t.value] = torch.tensor(float(value), dtype=torch.float32)
        return
    if isinstance(t, (list, tuple)):
        for x, v in zip(t, value):
            assign(x, v, env)


class TorchStep:
    """One node run with PyTorch."""

    __slots__ = ("fn", "args", "kwargs", "outputs", "name", "defines", "asserts")

    def __init__(self, info: WildcardInfo):
        self.fn = info.node.target
        self.args = info.args
        self.kwargs = info.kwargs
        self.outputs = info.outputs
        self.name = info.node.name
        self.defines = info.defines  # sizes its results give: (symbol, key path in its result)
        self.asserts: list = []  # torch's runtime assertions on them (size_probes.Guard), set by the runner

    def __call__(self, env: dict, symenv) -> None:
        out = self.fn(*resolve(self.args, env, symenv), **resolve(self.kwargs, env, symenv))
        if self.defines:
            self._sizes(out, symenv())
        assign(self.outputs, out, env)

    def _sizes(self, out, sizes: dict) -> None:
        """The sizes this node computed from tensor data, into the call's sizes, and checked."""
        for sym, path in self.defines:
            v = int(pytree.key_get(out, path))
            if not sym.min <= v <= sym.max:
                raise DataSizeOutOfRange(f"{self.name} ({self.fn}) computed the size {sym.name} = {v} from tensor "
                                         f"data; the compiled program runs {sym.min} to {sym.max}", v)
            sizes[sym] = v
        failed = [g for g in self.asserts if not g.holds(sizes)]
        if failed:
            raise ShapeError(f"{self.name} ({self.fn}) computed sizes from tensor data that fail torch's runtime "
                             f"assertion {failed[0]} ({', '.join(f'{s.name} = {sizes[s]}' for s, _ in self.defines)})")


def format_report(fallbacks: List[Fallback], n_supported_ops: int, n_partitions: int) -> str:
    if not fallbacks:
        return f"all nodes run in dyngraph ({n_supported_ops} ops, {n_partitions} partition(s))"
    lines = [f"{len(fallbacks)} node(s) run in PyTorch ({n_supported_ops} ops in {n_partitions} dyngraph partition(s)):"]
    lines += [f"  {f}" for f in fallbacks]
    return "\n".join(lines)
