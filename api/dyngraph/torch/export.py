"""Exporting a module and preparing an ExportedProgram for conversion.

A program that does not convert as exported (see
:mod:`dyngraph.torch.functional`) is decomposed to core ATen with a table
that keeps the ops dyngraph runs whole (attention, linear, matmul, the norms,
silu, index_copy): one dyngraph op each instead of a handful.
"""

from __future__ import annotations

import contextlib
import inspect
from typing import Any, Dict, Mapping, Optional, Tuple

import torch
from torch._decomp import core_aten_decompositions

from ..errors import CompileError
from .converters import kept_whole

try:
    from torch.fx import config as _fx_config
except ImportError:  # (a torch before the setting: stack traces are always recorded)
    _fx_config = None


def _eye(n, m=None, *, dtype=None, layout=None, device=None, pin_memory=None):
    """torch.eye as i64 positions compared: torch's own form counts them in the
    narrowest integer type (uint8 below 256), which dyngraph keeps for
    quantized data only."""
    m = n if m is None else m
    same = torch.arange(n, device=device).unsqueeze(-1) == torch.arange(m, device=device)
    return same.to(dtype or torch.get_default_dtype())


def decomposition_table() -> dict:
    """Core ATen decompositions, except for the ops dyngraph converts whole
    (those whose converter is registered with ``keep``); ``eye`` our own way."""
    table = dict(core_aten_decompositions())
    for op in kept_whole():
        table.pop(op, None)
    for op in (torch.ops.aten.eye.default, torch.ops.aten.eye.m):
        if op in table:
            table[op] = _eye
    return table


@contextlib.contextmanager
def stack_traces_recorded(record: bool):
    """Inside, torch.fx's tracers record each node's Python stack trace
    (``node.meta["stack_trace"]``) or, with ``record`` false, do not
    (``torch.fx.config.do_not_emit_stack_traces``, restored after). dyngraph
    never reads them, and capturing them is an eighth of a real model's
    export time. A torch without the setting records them as always."""
    config = _fx_config
    if record or not hasattr(config, "do_not_emit_stack_traces"):
        yield
        return
    before = config.do_not_emit_stack_traces
    config.do_not_emit_stack_traces = True
    try:
        yield
    finally:
        config.do_not_emit_stack_traces = before


def export(module: torch.nn.Module, args: Tuple = (), kwargs: Optional[dict] = None,
           dynamic_shapes: Any = None, strict: bool = False,
           stack_traces: bool = False) -> torch.export.ExportedProgram:
    """``torch.export.export`` in eval mode and without autograd (and without
    the nodes' stack traces unless ``stack_traces``: stack_traces_recorded)."""
    if not isinstance(module, torch.nn.Module):
        raise CompileError(f"expected a torch.nn.Module or an ExportedProgram, got {type(module).__name__}")
    was_training = module.training
    module.eval()
    try:
        with torch.no_grad(), stack_traces_recorded(stack_traces):
            return torch.export.export(module, tuple(args), dict(kwargs or {}), dynamic_shapes=dynamic_shapes,
                                       strict=strict)
    except Exception as e:  # torch raises many kinds of errors here
        raise CompileError(f"torch.export failed: {type(e).__name__}: {e}") from e
    finally:
        module.train(was_training)


def decompose(ep: torch.export.ExportedProgram) -> torch.export.ExportedProgram:
    try:
        return ep.run_decompositions(decomposition_table())
    except Exception as e:
        raise CompileError(f"decomposing the exported program failed: {type(e).__name__}: {e}") from e


def dim_names(module, args, kwargs, dynamic_shapes) -> Dict[Tuple[str, int], str]:
    """(top-level argument name, dimension) -> the torch.export.Dim's name, for
    the arguments ``dynamic_shapes`` describes by name or position (used to
    name dyngraph's dimensions like the user's)."""
    if dynamic_shapes is None:
        return {}
    try:
        bound = inspect.signature(module.forward).bind(*args, **(kwargs or {}))
    except (TypeError, ValueError):
        return {}
    names = list(bound.arguments)
    if isinstance(dynamic_shapes, Mapping):
        specs = dict(dynamic_shapes)
    elif isinstance(dynamic_shapes, (tuple, list)):
        specs = dict(zip(names, dynamic_shapes))
    else:
        return {}
    out = {}
    for arg, spec in specs.items():
        if isinstance(spec, Mapping):
            items = spec.items()
        elif isinstance(spec, (tuple, list)):
            items = enumerate(spec)
        else:
            continue
        for d, dim in items:
            name = getattr(dim, "__name__", None)
            if isinstance(d, int) and isinstance(name, str):
                out[(arg, d)] = name
    return out
