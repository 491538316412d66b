"""What ``dyngraph bench`` runs: a oneDNN Graph JSON case (compiled here) or
a saved compiled partition (``.dg``), behind one interface."""

from __future__ import annotations

import time
from typing import Dict

import numpy as np

from ..errors import DyngraphError
from ..op import OpKind
from ..reference.values import to_storage
from ..symbolic import Expr


class Model:
    name = ""
    compile_ms = 0.0
    partitions = 1

    def default_binding(self) -> Dict[str, int]:
        raise NotImplementedError

    def feeds(self, binding: Dict[str, int]):
        raise NotImplementedError

    def call(self, feeds) -> None:
        raise NotImplementedError

    def compiled(self) -> list:
        raise NotImplementedError

    def build_seconds(self) -> float:
        return sum(cp.cache_info().build_seconds for cp in self.compiled())

    def last_nodes(self) -> int:
        return sum(cp.cache_info().last_graph_nodes for cp in self.compiled())

    def clear_cache(self) -> None:
        for cp in self.compiled():
            cp.clear_cache()


class CaseModel(Model):
    def __init__(self, path: str, args, engine):
        from ..onednn.reader import import_graph
        from ..onednn.runner import CaseRunner
        from .run import overrides_for

        choice = {k: getattr(args, k[2:].replace("-", "_")) for k in
                  ("--in-shapes", "--op-attrs", "--dt", "--op-kind", "--mb", "--tensor-property")}
        values = {"--dynamic": "+".join(args.dynamic)} if args.dynamic else {}
        t0 = time.perf_counter()
        imp = import_graph(path, overrides_for(values, {k: v for k, v in choice.items() if v}))
        self.runner = CaseRunner(imp, engine=engine)
        self.compile_ms = (time.perf_counter() - t0) * 1e3
        self.name = path
        self.partitions = len(self.runner.compiled)
        self.imp = imp

    def default_binding(self):
        return dict(self.imp.doc.dim_sizes)

    def feeds(self, binding):
        return self.runner.feeds(binding)

    def call(self, feeds):
        self.runner.execute(feeds)

    def compiled(self):
        return self.runner.compiled


class SavedModel(Model):
    """A saved compiled partition. Its inputs are filled by dtype; integer
    inputs that index something (Gather, ScatterRows, RoPE positions) get
    0, 1, 2, ... within what they index."""

    def __init__(self, path: str, engine):
        from ..loading import load

        t0 = time.perf_counter()
        self.cp = load(path, engine)
        self.compile_ms = (time.perf_counter() - t0) * 1e3
        self.name = path
        prog = self.cp.program
        self.symbols = {s.name: s for s in prog.symbols}
        self.bounds = index_bounds(prog)

    def default_binding(self):
        """16 for each dimension read from an input's shape (or the nearest its range allows)."""
        prog = self.cp.program
        used = {s for i in prog.inputs for d in prog.tensors[i].shape for s in d.free_symbols()}
        return {s.name: max(s.min, min(16, s.max)) for s in prog.symbols if s in used}

    def feeds(self, binding):
        prog = self.cp.program
        env = {}
        for name, v in binding.items():
            if name not in self.symbols:
                raise DyngraphError(f"no dynamic dimension named {name!r} (the file has: {', '.join(self.symbols)})")
            env[self.symbols[name]] = int(v)
        rng = np.random.default_rng(0)
        out = []
        for i in prog.inputs:
            t = prog.tensors[i]
            try:
                shape = tuple(d.evaluate(env) if isinstance(d, Expr) else int(d) for d in t.shape)
            except DyngraphError as e:
                raise DyngraphError(f"input {t.name or t.id}: {e} (give it with --shapes)") from None
            n = int(np.prod(shape, dtype=np.int64))
            if t.dtype.is_float:
                out.append(to_storage(rng.integers(-16, 17, shape) / 8.0, t.dtype))
            elif t.dtype.is_int:
                bound = self.bounds.get(i, 8)
                out.append((np.arange(n) % max(bound, 1)).reshape(shape).astype(t.dtype.numpy))
            else:
                out.append(rng.integers(0, 2, shape).astype(bool))
        return out

    def call(self, feeds):
        self.cp(*feeds)

    def compiled(self):
        return [self.cp]


def index_bounds(prog) -> Dict[int, int]:
    """tensor index -> the size of what its values index, for the integer inputs."""
    bounds: Dict[int, int] = {}

    def static(e):
        return e.value if isinstance(e, Expr) and e.is_const else (e if isinstance(e, int) else None)

    for op in prog.ops:
        limit = None
        if op.kind is OpKind.Gather and len(op.inputs) == 2:
            table = prog.tensors[op.inputs[0]]
            axis = op.attrs.get("axis", 0) % max(len(table.shape), 1)
            limit, idx = static(table.shape[axis]), op.inputs[1]
        elif op.kind is OpKind.ScatterRows:
            limit, idx = static(prog.tensors[op.inputs[0]].shape[-2]), op.inputs[1]
        else:
            continue
        if limit is not None:
            bounds[idx] = min(bounds.get(idx, limit), limit)
    return bounds


def open_model(path: str, args, engine) -> Model:
    if path.endswith(".json"):
        return CaseModel(path, args, engine)
    return SavedModel(path, engine)


