"""from_json / to_json round trips of oneDNN's cases: the file written back
op for op (:mod:`.jsondiff`), the graph read back the same (:func:`canon`),
and the graph read back computing the same values, bit for bit, as the
graph read first (both through :class:`dyngraph.onednn.runner.CaseRunner`,
on the same inputs)."""

from __future__ import annotations

import json
import math
from typing import Dict, List, Sequence

import numpy as np

import dyngraph as dg
from dyngraph.onednn import import_graph, to_json
from dyngraph.ops import schema_of
from dyngraph.ops.registry import normalize_attrs
from dyngraph.symbolic import Expr

from .jsondiff import diff


def _value(v):
    if isinstance(v, Expr):
        if v.is_const:
            return v.value
        return ("expr", str(v), tuple(sorted((s.name, s.min, s.max) for s in v.free_symbols())))
    if isinstance(v, (list, tuple)):
        return tuple(_value(x) for x in v)
    if isinstance(v, float) and math.isnan(v):
        return "nan"
    return v


def _lt(lt):
    shape = None if lt.shape is None else tuple(
        "UNKNOWN" if d is dg.UNKNOWN_DIM else "DYNAMIC" if d is dg.DYNAMIC_DIM else _value(d) for d in lt.shape)
    return (lt.id, lt.dtype, shape, lt.property, lt.name)


def canon(g, declared: bool = True):
    """Everything that makes a graph what it is: ops (kind, name, attributes
    with defaults, inputs and outputs as declared) and every tensor as finalized.
    Without ``declared``, an op's tensors are their ids (a shape rewrite leaves
    internal shapes to inference, and the file written says what was inferred)."""
    ops = {}
    for o in g.get_ops():
        schema = schema_of(o.kind)
        attrs = normalize_attrs(schema, dict(o.attrs), o.label) if schema else dict(o.attrs)
        ops[o.id] = (o.kind, o.name, {k: _value(v) for k, v in attrs.items()},
                     [_lt(t) if declared else t.id for t in o.inputs],
                     [_lt(t) if declared else t.id for t in o.outputs])
    tensors = {}
    if g.is_finalized:
        ids = {t.id for o in g.get_ops() for t in o.inputs + o.outputs}
        tensors = {i: _lt(g.logical_tensor(i)) for i in ids}
    return ops, tensors


def read(src, overrides=None):
    """A case as dyngraph reads it: refused ops as Wildcards when it cannot run it all."""
    try:
        return import_graph(src, overrides), False
    except dg.UnsupportedError:
        return import_graph(src, overrides, wildcards=True), True


def written_back(path: str, overrides=None):
    """What differs between a file and to_json of its graph, op for op
    (none expected); with ``overrides``, between the written file and the
    file written again from its own graph; and between the two graphs.
    Returns (differences, the graph read, the graph read back, whether with Wildcards)."""
    imp, wild = read(path, overrides)
    text = to_json(imp.graph)
    if overrides is None:
        with open(path) as f:
            problems = diff(json.load(f), json.loads(text))
    else:
        problems = []
    imp2 = import_graph(text, wildcards=wild)
    if canon(imp2.graph, overrides is None) != canon(imp.graph, overrides is None):
        problems.append("the graph read back differs from the graph written")
    if to_json(imp2.graph) != text:
        problems.append("the file written again differs from the file written")
    return problems, imp, imp2, wild


def same_results(first, second, bindings: Sequence[Dict[str, int]] = (), max_bytes: int = 1 << 30) -> List[str]:
    """Run two imported graphs on the same inputs (the runner's fill) at each
    binding (default: the file's sizes); what differs (nothing expected: the
    same graph, bit for bit)."""
    from dyngraph.onednn.runner import CaseRunner

    runners = [CaseRunner(imp, engine=dg.Engine(num_threads=1), max_bytes=max_bytes) for imp in (first, second)]
    if first.outputs != second.outputs:
        return [f"graph outputs {first.outputs} != {second.outputs}"]
    if not bindings:
        bindings = [dict(first.doc.dim_sizes)] if runners[0].symbols else [{}]
    problems = []
    for b in bindings:
        feeds = [r.feeds(b) for r in runners]
        if feeds[0].keys() != feeds[1].keys() or any(
                not np.array_equal(feeds[0][t], feeds[1][t], equal_nan=True) for t in feeds[0]):
            problems.append(f"{b}: the two graphs are given different inputs")
            continue
        vals = [r.execute(f)[0] for r, f in zip(runners, feeds)]
        for t in first.outputs:
            a, c = np.asarray(vals[0][t]), np.asarray(vals[1][t])
            if a.dtype != c.dtype or a.shape != c.shape or not np.array_equal(a, c, equal_nan=a.dtype.kind == "f"):
                problems.append(f"{b}: output {t} differs")
    return problems


def check_case(path: str, overrides=None, bindings: Sequence[Dict[str, int]] = (),
               max_bytes: int = 1 << 30) -> dict:
    """The whole round trip of one case: ``written`` (what differs op for op)
    and, for a case dyngraph runs (``ran``), ``results`` (what values differ)."""
    problems, imp, imp2, wild = written_back(path, overrides)
    out = {"written": problems, "results": [], "ran": False}
    if not wild:
        try:
            out["results"] = same_results(imp, imp2, bindings, max_bytes)
            out["ran"] = True
        except dg.UnsupportedError:
            pass
    return out


__all__ = ["canon", "check_case", "read", "same_results", "written_back"]
