"""Helpers shared by converters."""

from __future__ import annotations

import numbers

import torch
import torch.fx as fx
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

from ...dtypes import DataType
from ...symbolic import as_expr
from ..dtypes import dg_dtype
from .registry import Unsupported, canonical

aten = torch.ops.aten

# ops whose value equals their input's (when the dtype does not change)
IDENTITY_OPS = {
    aten.clone.default,
    aten.contiguous.default,
    aten.alias.default,
    aten.detach.default,
    aten.lift_fresh_copy.default,
    aten._to_copy.default,
    aten.to.dtype,  # (ops before decomposition)
    aten.to.dtype_layout,
    aten.to.device,
    aten.type_as.default,
}


def meta(arg):
    return arg.meta.get("val") if isinstance(arg, fx.Node) else arg


def through_identities(node):
    """Skip clones, aliases and same-dtype copies that produce ``node``."""
    while isinstance(node, fx.Node) and node.op == "call_function" and node.target in IDENTITY_OPS:
        src = node.args[0]
        if not isinstance(src, fx.Node) or meta(src) is None or meta(src).dtype != meta(node).dtype:
            break
        node = src
    return node


def plain(e):
    """A size as an int where it is constant, else its expression."""
    e = as_expr(e)
    return e.value if e.is_const else e


def is_call(node, *targets) -> bool:
    return isinstance(node, fx.Node) and node.op == "call_function" and canonical(node.target) in targets


def scalar_arg(v):
    """A plain number for type promotion (sizes count as ints)."""
    if isinstance(v, (torch.SymInt, fx.Node)) and not isinstance(meta(v), torch.Tensor):
        return 1
    return v


def promoted(*args) -> DataType:
    """The dtype torch computes a comparison (or arithmetic) of these arguments in."""
    vals = []
    for a in args:
        m = meta(a)
        if isinstance(m, torch.Tensor):
            vals.append(m)
        elif isinstance(m, (numbers.Number, torch.SymInt, torch.SymFloat)):
            vals.append(scalar_arg(m) if not isinstance(m, bool) else m)
        else:
            raise Unsupported(f"argument {a!r} is neither a tensor nor a number")
    _, result = elementwise_dtypes(*vals, type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT)
    dt = dg_dtype(result)
    if dt is None:
        raise Unsupported(f"computes in {result}")
    return dt


def number(v):
    """A Python number argument, or None if ``v`` is not one."""
    if isinstance(v, bool):
        return v
    if isinstance(v, numbers.Number):
        return v
    return None


def norm_dim(d: int, rank: int) -> int:
    if not -max(rank, 1) <= d < max(rank, 1):
        raise Unsupported(f"dimension {d} is out of range for rank {rank}")
    return d % max(rank, 1)


def non_negative(node, depth: int = 8) -> bool:
    """True when every value of an integer tensor is known to be >= 0
    (aranges from 0 up, and views and sums of them)."""
    if depth == 0 or not isinstance(node, fx.Node):
        return isinstance(node, numbers.Number) and node >= 0
    if node.op != "call_function":
        return False
    t = node.target
    if t in (aten.arange.default, aten.arange.start, aten.arange.start_step):
        args = list(node.args)
        if t is aten.arange.default:
            return True
        start = args[0]
        step = args[2] if len(args) > 2 else 1
        return isinstance(start, numbers.Number) and start >= 0 and isinstance(step, numbers.Number) and step > 0
    if t in (aten.unsqueeze.default, aten.view.default, aten.reshape.default, aten.expand.default, aten.slice.Tensor,
             aten.squeeze.dim, aten.squeeze.dims, aten.permute.default, aten.select.int, aten._unsafe_view.default) \
            or t in IDENTITY_OPS:
        return non_negative(node.args[0], depth - 1)
    if t in (aten.add.Tensor, aten.mul.Tensor):
        return all(non_negative(a, depth - 1) for a in node.args[:2])
    return False
