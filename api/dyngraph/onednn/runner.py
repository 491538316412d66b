"""Running an imported case: compile its partitions once, execute them at
one or more bindings of its dynamic dimensions, and compare every graph
output with the numpy reference (what ``dyngraph run`` does).

The outcome is a :class:`CaseResult` whose ``status`` is ``pass``, ``fail``
(an output differs from the reference), ``unsupported`` (a typed
:class:`~dyngraph.UnsupportedError`: what dyngraph lacks, by name) or
``error`` (any other typed dyngraph error: the case is malformed, or
dyngraph refused it for a reason that is not a known gap).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from .. import reference
from ..dtypes import DataType
from ..engine import Engine
from ..errors import DyngraphError, ShapeError, UnsupportedError
from ..logical_tensor import MAX_RANK
from ..logical_tensor import Property
from ..op import OpKind
from ..ops import schema_of
from ..ops.registry import normalize_attrs
from ..partition import backend_supported_kinds
from ..reference.quantize import quantize_band
from ..symbolic import UNKNOWN_DIM, Expr
from .compare import Comparison, compare, rtol
from .fill import consumers, fill_tensor
from .reader import Imported, classify

log = logging.getLogger("dyngraph.onednn")

DEFAULT_MAX_BYTES = 4 << 30
_PRECISION = {DataType.f32: 0, DataType.f16: 1, DataType.bf16: 2}


@dataclass
class OutputCheck:
    tensor: int
    dtype: str
    shape: Tuple[int, ...]
    comparison: Comparison


@dataclass
class BindingRun:
    binding: Dict[str, int]
    outputs: List[OutputCheck] = field(default_factory=list)
    execute_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(o.comparison.ok for o in self.outputs)


@dataclass
class CaseResult:
    status: str  # pass, fail, unsupported, error
    message: str = ""
    features: Tuple[str, ...] = ()
    runs: List[BindingRun] = field(default_factory=list)
    partitions: int = 0
    graphs_built: int = 0
    compile_seconds: float = 0.0

    def worst(self) -> Optional[OutputCheck]:
        checks = [o for r in self.runs for o in r.outputs]
        if not checks:
            return None
        return max(checks, key=lambda o: (not o.comparison.ok, o.comparison.error / (o.comparison.tol or 1.0)))


def output_precision(graph, tid: int) -> DataType:
    """The least precise floating-point dtype among the tensors ``tid`` is computed from."""
    producer = {lt.id: op for op in graph.get_ops() for lt in op.outputs}
    best = DataType.f32
    seen, stack = set(), [tid]
    while stack:
        t = stack.pop()
        if t in seen:
            continue
        seen.add(t)
        dt = graph.logical_tensor(t).dtype
        if dt in _PRECISION and _PRECISION[dt] > _PRECISION[best]:
            best = dt
        op = producer.get(t)
        if op is not None:
            stack.extend(lt.id for lt in op.inputs)
    return best


def rounding_band(graph, ref: Mapping[int, np.ndarray], tid: int, precision: DataType):
    """For an integer output a Quantize (or DynamicQuantize) rounds from
    floats: the band of results within the float tolerance (``quantize_band``);
    else None (the reference value exactly)."""
    dt = graph.logical_tensor(tid).dtype
    op = next((op for op in graph.get_ops() if any(lt.id == tid for lt in op.outputs)), None)
    if dt.is_float or op is None or op.kind not in (OpKind.Quantize, OpKind.DynamicQuantize):
        return None
    attrs = normalize_attrs(schema_of(op.kind), dict(op.attrs), op.label)
    return quantize_band(op.kind, attrs, [ref[lt.id] for lt in op.inputs], dt, rtol(precision))


def unsupported_partitions(graph, parts) -> List[str]:
    """What keeps each unsupported partition out of the backend, by name."""
    kinds = backend_supported_kinds()
    features = []
    for p in parts:
        if p.is_supported():
            continue
        for op in p.get_ops():
            if op.kind not in kinds:
                features.append(f"no backend lowering for op kind {op.kind.name}")
            for lt in list(op.inputs) + list(op.outputs):
                shape = graph.logical_tensor(lt.id).shape
                if shape is not None and len(shape) > MAX_RANK:
                    features.append(f"rank {len(shape)} tensors")
    return sorted(set(features)) or ["a partition the backend does not support"]


def concrete_shape(lt, env: Mapping, where: str) -> Tuple[int, ...]:
    if lt.shape is None:
        raise DyngraphError(f"{where}: input {lt.label} has an unknown shape: give it with --in-shapes")
    out = []
    for d in lt.shape:
        if isinstance(d, Expr):
            out.append(d.evaluate(env))
        elif isinstance(d, int) and not isinstance(d, bool) and d >= 0:
            out.append(d)
        else:  # UNKNOWN_DIM / DYNAMIC_DIM (a negative size in the file), or anything else
            raise ShapeError(f"{where}: input {lt.label} has an unknown dimension ({d}): give its shape with "
                             f"--in-shapes or make it dynamic with --dynamic")
    return tuple(out)


class CaseRunner:
    """Compile an imported case once; run it at any binding of its dynamic dims."""

    def __init__(self, imp: Imported, engine: Optional[Engine] = None, seed: int = 0,
                 max_bytes: int = DEFAULT_MAX_BYTES, cache_capacity: int = 16):
        self.imp = imp
        self.graph = imp.graph
        self.engine = engine or Engine(num_threads=1)
        self.seed = seed
        self.max_bytes = max_bytes
        self.uses = consumers(self.graph)
        self.tensor_ids = sorted({lt.id for op in self.graph.get_ops() for lt in op.inputs + op.outputs})
        self.keep = set(imp.outputs) | {lt.id for op in self.graph.get_ops() if any(
            o.id in imp.outputs for o in op.outputs) for lt in op.inputs}  # outputs, and what rounding_band reads
        self.dead = reference.last_uses(self.graph, self.keep)
        reference.check_supported(self.graph)
        self.parts = self.graph.get_partitions()
        bad = unsupported_partitions(self.graph, self.parts)
        if any(not p.is_supported() for p in self.parts):
            raise UnsupportedError(f"dyngraph's backend cannot run: {'; '.join(bad)}", bad)
        self.symbols = dict(imp.symbols)
        self.inputs = [t for t in imp.inputs]
        self.constants: Dict[int, np.ndarray] = {}
        self._check_size({})  # the static part, before constants are filled
        t0 = time.perf_counter()
        self.compiled = []
        for p in self.parts:
            ins = p.get_input_ports()
            consts = {}
            for lt in ins:
                if lt.property is not Property.VARIABLE:
                    consts[lt.id] = self._constant(lt)
            try:
                cp = p.compile(ins, p.get_output_ports(), self.engine, constants=consts,
                               cache_capacity=cache_capacity)
            except DyngraphError as e:
                raise classify(e, self.graph.get_ops(), imp.onednn_kinds) from e
            self.compiled.append(cp)
        self.compile_seconds = time.perf_counter() - t0
        log.info("compiled %d partition(s) in %.1f ms", len(self.compiled), self.compile_seconds * 1e3)

    def _constant(self, lt) -> np.ndarray:
        if lt.id not in self.constants:
            shape = concrete_shape(self.graph.logical_tensor(lt.id), {}, "constant")
            self.constants[lt.id] = fill_tensor(self.graph, lt.id, shape, self.uses.get(lt.id, []), self.seed)
        return self.constants[lt.id]

    def env(self, binding: Mapping[str, int]):
        unknown = sorted(set(binding) - set(self.symbols))
        if unknown:
            raise DyngraphError(f"no dynamic dimension named {', '.join(unknown)} "
                                f"(the case has: {', '.join(sorted(self.symbols)) or 'none'})")
        missing = sorted(set(self.symbols) - set(binding))
        if missing:
            raise DyngraphError(f"no size given for dimension {', '.join(missing)}")
        return {self.symbols[n].sym: int(v) for n, v in binding.items()}

    def feeds(self, binding: Mapping[str, int]) -> Dict[int, np.ndarray]:
        env = self.env(binding)
        shapes = {t: concrete_shape(self.graph.logical_tensor(t), env, "input") for t in self.inputs}
        self._check_size(env)
        feeds = {}
        for t in self.inputs:
            if t in self.constants:
                feeds[t] = self.constants[t]
            else:
                feeds[t] = fill_tensor(self.graph, t, shapes[t], self.uses.get(t, []), self.seed, shapes)
        return feeds

    def _check_size(self, env) -> None:
        """Refuse a binding whose reference needs more than max_bytes: the most its
        values (8 bytes an element, dropped after their last use) hold at once (never
        more than all its tensors together, what was counted before)."""
        size: Dict[int, int] = {}
        for tid in self.tensor_ids:
            lt = self.graph.logical_tensor(tid)
            if lt.shape is None:
                continue
            try:
                n = 1
                for d in lt.shape:
                    if isinstance(d, Expr):
                        n *= d.evaluate(env)
                    elif isinstance(d, int) and not isinstance(d, bool) and d >= 0:
                        n *= d
                    else:
                        raise ShapeError(f"tensor {tid}: dimension {d} has no value")  # not known: not counted
            except DyngraphError:
                continue
            size[tid] = n * 8
        live = sum(size.get(t, 0) for t in self.inputs)
        peak = live
        for i, op in enumerate(self.graph.get_ops()):
            live += sum(size.get(lt.id, 0) for lt in op.outputs)
            peak = max(peak, live)
            live -= sum(size.get(t, 0) for t in self.dead.get(i, ()))
        if peak > self.max_bytes:
            raise UnsupportedError(
                f"the case needs about {peak / 2**30:.1f} GiB at these shapes (limit {self.max_bytes / 2**30:.1f} GiB); "
                "run it at smaller shapes (--in-shapes, --mb, --shapes)", ["a case larger than the size limit"])

    def execute(self, feeds: Mapping[int, np.ndarray]) -> Tuple[Dict[int, np.ndarray], float]:
        """Run the partitions in order; returns every partition output and the time spent."""
        vals = dict(feeds)
        t0 = time.perf_counter()
        for cp in self.compiled:
            outs = cp(*[vals[lt.id] for lt in cp.get_inputs()])
            for lt, a in zip(cp.get_outputs(), outs):
                vals[lt.id] = a
        return vals, time.perf_counter() - t0

    def run(self, binding: Mapping[str, int]) -> BindingRun:
        feeds = self.feeds(binding)
        vals, secs = self.execute(feeds)
        env = self.env(binding)
        ref = reference.run(self.graph, feeds, env, keep=self.keep)
        r = BindingRun(dict(binding), execute_seconds=secs)
        for t in self.imp.outputs:
            lt = self.graph.logical_tensor(t)
            precision = output_precision(self.graph, t)
            c = compare(vals[t], ref[t], lt.dtype, precision, rounding_band(self.graph, ref, t, precision))
            r.outputs.append(OutputCheck(t, str(lt.dtype), tuple(np.shape(vals[t])), c))
        return r

    def graphs_built(self) -> int:
        return sum(cp.cache_info().misses for cp in self.compiled)


def run_case(imp: Imported, bindings: Sequence[Mapping[str, int]] = (), **options) -> CaseResult:
    """Compile once, run at each binding (default: the file's own sizes), compare."""
    try:
        runner = CaseRunner(imp, **options)
    except UnsupportedError as e:
        return CaseResult("unsupported", str(e), e.features)
    except DyngraphError as e:
        return CaseResult("error", f"{type(e).__name__}: {e}")
    res = CaseResult("pass", partitions=len(runner.compiled), compile_seconds=runner.compile_seconds)
    if not bindings:
        bindings = [dict(imp.doc.dim_sizes)] if runner.symbols else [{}]
    for b in bindings:
        try:
            res.runs.append(runner.run(b))
        except UnsupportedError as e:
            return CaseResult("unsupported", str(e), e.features, res.runs, res.partitions)
        except DyngraphError as e:
            return CaseResult("error", f"{type(e).__name__}: {e}", (), res.runs, res.partitions)
    res.graphs_built = runner.graphs_built()
    if not all(r.ok for r in res.runs):
        res.status = "fail"
    w = res.worst()
    res.message = f"worst {w.comparison.describe()} in output {w.tensor} ({w.dtype})" if w else "no outputs"
    return res
