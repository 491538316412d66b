"""Helpers for the torch front end's tests: compile a module once with dynamic
dimensions, then compare it with eager PyTorch at several shapes."""

from __future__ import annotations

import inspect
import os
from typing import Callable, Iterable, Sequence

import torch

import dyngraph.torch as dgt


def compile_module(module: torch.nn.Module, args: Sequence, dynamic_shapes, **options) -> "dgt.CompiledProgram":
    options.setdefault("engine", 1)
    return dgt.compile(module.eval(), tuple(args), dynamic_shapes=dynamic_shapes, **options)


def assert_matches_eager(run, module, inputs: Iterable[Sequence], atol: float = 1e-5, rtol: float = 1e-5):
    """run(*x) equals module(*x) for every x (outputs flattened: tensors compared, the rest equal)."""
    for x in inputs:
        with torch.no_grad():
            want = module(*x)
        got = run(*x)
        flat_w, spec_w = torch.utils._pytree.tree_flatten(want)
        flat_g, spec_g = torch.utils._pytree.tree_flatten(got)
        assert spec_g == spec_w
        for g, w in zip(flat_g, flat_w):
            if isinstance(w, torch.Tensor):
                assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
                torch.testing.assert_close(g, w, atol=atol, rtol=rtol, equal_nan=True)
            else:
                assert g == w


def package_path(name: str) -> str:
    """The folder of an installed package, found without importing it (or skip)."""
    import importlib.util

    import pytest

    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"{name} is not installed (pip install --no-deps {name.replace('_', '-')})")
    return list(spec.submodule_search_locations)[0]


def offline() -> None:
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def mk(fn: Callable) -> torch.nn.Module:
    """A module whose forward is ``fn`` (with fn's number of positional inputs)."""
    forwards = {
        1: lambda self, a: fn(a),
        2: lambda self, a, b: fn(a, b),
        3: lambda self, a, b, c: fn(a, b, c),
        4: lambda self, a, b, c, d: fn(a, b, c, d),
    }
    cls = type("Fn", (torch.nn.Module,), {"forward": forwards[len(inspect.signature(fn).parameters)]})
    return cls()


class BranchOnChunks(torch.nn.Module):
    """Padded to 8 rows, a branch on the number of chunks: exported at 5 rows (Dim.AUTO), the
    program is the one-chunk branch, whose reshapes torch wrote with static sizes; torch's
    guards keep it to 8 rows."""

    def forward(self, x):
        n = x.shape[0]
        y = torch.nn.functional.pad(x, (0, 0, 0, (8 - n % 8) % 8))
        if y.shape[0] // 8 == 1:
            return y.reshape(8 * x.shape[1]).reshape(2, 4, x.shape[1]).sum(0) * 2
        return y.reshape(-1, 8, x.shape[1]).sum(0)
