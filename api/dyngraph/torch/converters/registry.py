"""The converter table: one function per ATen op (or small family of ops).

A converter is called with the conversion context ``cx`` (see
:class:`dyngraph.torch.convert.Converter`), the FX node, and the node's
arguments bound by name to the op's schema (``a.self``, ``a.other``,
``a.dim``...; defaults filled in). It emits dyngraph ops through ``cx`` and
returns the node's value: a logical tensor, a tuple of them, or a size.
Raising :class:`Unsupported` (with a reason) makes the node run in PyTorch;
whatever the converter emitted before is discarded. An op's other ATen names
(``ALIASES``: ``aten.multiply`` for ``aten.mul``) reach its converter with the
node as the export wrote it: a converter that dispatches on the target reads
``canonical(node.target)``.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Callable, Dict, FrozenSet, Set

import torch

CONVERTERS: Dict[object, Callable] = {}
# converters of nodes that read or produce complex tensors (see converters/complex.py)
COMPLEX_CONVERTERS: Dict[object, Callable] = {}
# targets the exporter keeps whole (not decomposed to core ATen), so that their converter sees them
KEPT_WHOLE: Set[object] = set()


# ATen's other names of an op (torch.multiply is mul), as the export keeps them: each overload
# whose arguments are named as the op's own, so the op's converter takes it as it is
_ALIAS_NAMES = {"multiply": "mul", "subtract": "sub", "divide": "div", "true_divide": "div", "clip": "clamp",
                "negative": "neg", "absolute": "abs", "greater": "gt", "greater_equal": "ge", "less": "lt",
                "less_equal": "le", "not_equal": "ne", "concatenate": "cat", "special_expit": "sigmoid",
                "special_erf": "erf", "_neg_view": "neg"}


def _aliases() -> dict:
    aten, out = torch.ops.aten, {}
    for alias, name in _ALIAS_NAMES.items():
        packet, own = getattr(aten, alias, None), getattr(aten, name, None)
        for ov in packet.overloads() if packet is not None and own is not None else ():
            src, dst = getattr(packet, ov), getattr(own, ov, None)
            if dst is not None and not src._schema.is_mutable and \
                    [x.name for x in src._schema.arguments] == [x.name for x in dst._schema.arguments]:
                out[src] = dst
    return out


ALIASES = _aliases()


def canonical(target):
    """The op an alias names (``aten.multiply.Tensor`` -> ``aten.mul.Tensor``), else ``target``."""
    return ALIASES.get(target, target)


def converter_of(target):
    """The converter of an FX node's target (an op overload, or its op's qualified name), or None."""
    target = ALIASES.get(target, target)
    conv = CONVERTERS.get(target)
    if conv is None and hasattr(target, "_schema"):
        conv = CONVERTERS.get(target._schema.name)
    return conv


class Unsupported(Exception):
    """This node (with these arguments) has no dyngraph form; it runs in PyTorch."""


def converter(*targets, keep=False):
    """Register a converter for one or several ATen op overloads, or for
    ops by their qualified name ("namespace::name": custom ops of other
    libraries, which may not be loaded when dyngraph is).

    ``keep``: targets that a program decomposed to core ATen (see
    :mod:`dyngraph.torch.export`) keeps whole, because this converter takes
    them in one piece where the decomposition would not convert, or would
    convert worse: True for all of ``targets``, or the ones to keep."""
    kept = targets if keep is True else tuple(keep or ())
    stray = [t for t in kept if t not in targets]
    if stray:
        raise RuntimeError(f"keep names targets the converter does not register: {stray}")

    def deco(fn):
        for t in targets:
            if t in CONVERTERS:
                raise RuntimeError(f"two converters for {t}")
            CONVERTERS[t] = fn
        KEPT_WHOLE.update(kept)
        return fn

    return deco


def complex_converter(*targets):
    """Register the converter a node of one of ``targets`` gets when one of
    its tensors (an argument or the result) is complex: its values are
    :class:`Complex`, not logical tensors."""

    def deco(fn):
        for t in targets:
            if t in COMPLEX_CONVERTERS:
                raise RuntimeError(f"two complex converters for {t}")
            COMPLEX_CONVERTERS[t] = fn
        return fn

    return deco


def kept_whole() -> FrozenSet[object]:
    """The targets registered with ``keep``: not decomposed by the exporter."""
    return frozenset(KEPT_WHOLE)


class Missing:
    """An output of a converted node that dyngraph does not compute (statistics,
    pooling indices): using it makes the node that reads it run in PyTorch."""

    def __init__(self, node, index):
        self.node = node
        self.index = index


class Complex:
    """The value of a complex64 node: a float32 logical tensor of torch's
    shape and one more axis of 2, the real and imaginary parts
    (``torch.view_as_real``'s layout)."""

    __slots__ = ("lt", "parts")

    def __init__(self, lt, parts=None):
        self.lt = lt
        # where known: the real and imaginary parts at torch's shape (the imaginary None
        # where it is zero), so that .real or a transform of a real tensor need not slice
        self.parts = parts

    def __repr__(self) -> str:
        return f"Complex({self.lt!r})"


class FloatScalar:
    """The value of a Python float computed from tensor data (``x.max().item()``, a
    SymFloat in the export): a 0-d float32 logical tensor holding it. Ops taking a
    number read it as a tensor operand; a node that runs in PyTorch gets the float."""

    __slots__ = ("lt",)

    def __init__(self, lt):
        self.lt = lt

    def __repr__(self) -> str:
        return f"FloatScalar({self.lt!r})"


class Args(SimpleNamespace):
    """A node's arguments, by schema name."""


def bind(node) -> Args:
    """Bind an FX node's args and kwargs to its op's schema argument names."""
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return Args(args=node.args, kwargs=node.kwargs)
    out = {}
    pos = list(node.args)
    for i, a in enumerate(schema.arguments):
        if i < len(pos) and not a.kwarg_only:
            out[a.name] = pos[i]
        elif a.name in node.kwargs:
            out[a.name] = node.kwargs[a.name]
        elif a.has_default_value():
            out[a.name] = a.default_value
        else:
            out[a.name] = None
    return Args(**out)
