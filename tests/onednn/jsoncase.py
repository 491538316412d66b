"""Small oneDNN Graph JSON documents written for the tests."""

from __future__ import annotations

import os
from typing import Optional

from .conformance import CASES  # noqa: F401  (the shared collection, when it is there)

HERE = os.path.dirname(os.path.abspath(__file__))
OWN_CASES = os.path.join(HERE, "cases")


def lt(tid: int, shape, dtype: str = "f32", prop: str = "undef") -> dict:
    stride, acc = [], 1
    for d in reversed(shape):
        stride.insert(0, acc)
        acc *= max(d, 1)
    return {"id": tid, "dtype": dtype, "shape": list(shape), "stride": stride, "layout_type": "strided",
            "property_type": prop}


def attr(value, type_: Optional[str] = None) -> dict:
    if type_ is None:
        if isinstance(value, bool):
            type_ = "bool"
        elif isinstance(value, int):
            type_ = "s64"
        elif isinstance(value, float):
            type_ = "f32"
        elif isinstance(value, str):
            type_ = "string"
        elif all(isinstance(x, int) for x in value):
            type_ = "s64[]"
        else:
            type_ = "f32[]"
    return {"type": type_, "value": value}


def op(oid: int, kind: str, inputs, outputs, name: Optional[str] = None, **attrs) -> dict:
    return {"id": oid, "name": name or f"{kind.lower()}_{oid}", "kind": kind,
            "attrs": {k: attr(v) for k, v in attrs.items()}, "inputs": list(inputs), "outputs": list(outputs)}


def doc(*ops, **top) -> dict:
    d = {"version": "3.5.0", "engine_kind": "cpu", "fpmath_mode": "strict", "graph": list(ops)}
    d.update(top)
    return d


def unary(kind: str, shape=(2, 3), dtype="f32", **attrs) -> dict:
    return doc(op(0, kind, [lt(0, shape, dtype)], [lt(1, shape, dtype)], **attrs))


def run_json(d, feeds, **options):
    """Import ``d`` (``options`` of import_graph), compile its partitions,
    run them in order on ``feeds`` ({tensor id: array}); returns {graph
    output id: array}."""
    import dyngraph as dg
    from dyngraph.onednn import import_graph

    imp = import_graph(d, **options)
    values = dict(feeds)
    for part in imp.graph.get_partitions():
        ins = part.get_input_ports()
        consts = {lt.id: values[lt.id] for lt in ins if lt.property is dg.CONSTANT}
        cp = part.compile(ins, part.get_output_ports(), dg.Engine(num_threads=1), constants=consts)
        outs = cp(*[values[lt.id] for lt in cp.get_inputs()])
        values.update({lt.id: a for lt, a in zip(cp.get_outputs(), outs)})
    return {tid: values[tid] for tid in imp.outputs}
