"""``dyngraph inspect MODEL.dg|CASE.json``: what a saved compiled partition
(or a graph file) holds.

For a ``.dg`` file: its dimension symbols and their ranges, its inputs and
outputs with symbolic shapes, its ops by kind, its partition (a saved file
is one compiled partition), its weights by storage type with their bytes,
its state tensors, and the runtime checks it carries. The file is read and
checked as untrusted input (as ``dyngraph.load`` does), nothing is compiled.

For a JSON case: its inputs and outputs, ops by kind, and how dyngraph
partitions it (which partitions the backend runs).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
from typing import List

from ..errors import DyngraphError, IRError, UnsupportedError
from ..logical_tensor import Property
from ..symbolic import format_shape
from .exitcodes import EXIT_PASS, UsageError, exit_code, need_file


def _mib(n: int) -> str:
    return f"{n / 2**20:.2f} MiB" if n >= 2**16 else f"{n} B"


def load_program(path: str, sizes: dict = None):
    """A saved file's Program, checked as untrusted input (as ``dyngraph.load``
    does: header, checksum, IR checks); ``sizes`` gets the bytes of data stored
    per tensor index. Returns (program, file size)."""
    from ..fb.Program import Program as FbProgram
    from ..ir_reader import read_program, validate_program
    from ..serialization import read_body

    body, keep = read_body(path, mapped=True)
    try:
        prog = read_program(body)
        validate_program(prog)
        if sizes is not None:
            fb = FbProgram.GetRootAs(body, 0)
            for i in range(fb.DataLength()):
                sizes[int(fb.Data(i).Tensor())] = int(fb.Data(i).DataLength())
        size = len(keep)
    finally:
        body.release()
        keep.close()
    return prog, size


def saved_summary(path: str) -> dict:
    data: dict = {}
    prog, size = load_program(path, data)

    def tensor(i):
        t = prog.tensors[i]
        return {"id": t.id, "name": t.name, "dtype": str(t.dtype), "shape": format_shape(t.shape)}

    weights = collections.defaultdict(lambda: {"tensors": 0, "bytes": 0})
    state = []
    for i, t in enumerate(prog.tensors):
        if t.property is Property.CONSTANT:
            key = str(t.dtype) if t.storage == "default" else t.storage
            weights[key]["tensors"] += 1
            weights[key]["bytes"] += data.get(i, 0)
        elif t.property is Property.STATE:
            state.append(dict(tensor(i), initial_value=i in data))
    return {
        "file": path,
        "bytes": size,
        "symbols": [{"name": s.name, "min": s.min, "max": s.max} for s in prog.symbols],
        "inputs": [tensor(i) for i in prog.inputs],
        "outputs": [tensor(i) for i in prog.outputs],
        "ops": dict(collections.Counter(op.kind.name for op in prog.ops).most_common()),
        "partitions": 1,
        "weights": dict(weights),
        "state": state,
        "runtime_checks": len(prog.guards),
    }


def case_summary(path: str) -> dict:
    from ..onednn.reader import import_graph
    from ..onednn.runner import unsupported_partitions

    imp = import_graph(path)
    g = imp.graph
    parts = g.get_partitions()

    def tensor(tid):
        lt = g.logical_tensor(tid)
        return {"id": tid, "dtype": str(lt.dtype), "shape": format_shape(lt.shape), "property": lt.property.value}

    return {
        "file": path,
        "symbols": [{"name": d.name, "min": d.min, "max": d.max} for d in imp.symbols.values()],
        "inputs": [tensor(t) for t in imp.inputs],
        "outputs": [tensor(t) for t in imp.outputs],
        "ops": dict(collections.Counter(op.kind.name for op in g.get_ops()).most_common()),
        "partitions": [{"id": p.get_id(), "supported": p.is_supported(), "ops": p.get_ops_num(),
                        "why_not": [] if p.is_supported() else unsupported_partitions(g, [p])} for p in parts],
        "expressed_with_several_ops": imp.decomposed,
    }


def render(s: dict) -> str:
    out = [f"{s['file']}" + (f" ({_mib(s['bytes'])})" if "bytes" in s else "")]
    if s["symbols"]:
        out.append("dimensions:")
        out += [f"  {d['name']} in [{d['min']}, {d['max']}]" for d in s["symbols"]]
    for what in ("inputs", "outputs"):
        out.append(f"{what}:")
        for t in s[what]:
            name = f" {t['name']}" if t.get("name") else ""
            out.append(f"  {t['id']}{name}: {t['dtype']} {t['shape']}")
    out.append(f"ops ({sum(s['ops'].values())}): " + ", ".join(f"{k} {v}" for k, v in s["ops"].items()))
    if isinstance(s["partitions"], int):
        out.append(f"partitions: {s['partitions']} (a saved file is one compiled partition)")
    else:
        out.append(f"partitions: {len(s['partitions'])}")
        for p in s["partitions"]:
            why = "" if p["supported"] else f" -- not run by the backend: {'; '.join(p['why_not'])}"
            out.append(f"  {p['id']}: {p['ops']} ops, {'supported' if p['supported'] else 'unsupported'}{why}")
    if "weights" in s:
        total = sum(w["bytes"] for w in s["weights"].values())
        out.append(f"weights: {_mib(total)}")
        out += [f"  {k}: {w['tensors']} tensors, {_mib(w['bytes'])}" for k, w in s["weights"].items()]
        out.append(f"state: {len(s['state'])} tensors")
        out += [f"  {t['id']} {t['name']}: {t['dtype']} {t['shape']}" + (" (initial value saved)" if t["initial_value"]
                                                                          else "") for t in s["state"]]
        out.append(f"runtime shape checks: {s['runtime_checks']}")
    if s.get("expressed_with_several_ops"):
        out.append("expressed with several dyngraph ops: " + ", ".join(sorted(set(s["expressed_with_several_ops"]))))
    return "\n".join(out)


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(prog="dyngraph inspect", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("path", help="a saved compiled partition (.dg) or a oneDNN Graph JSON case")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    try:
        need_file(args.path)
        s = case_summary(args.path) if args.path.endswith(".json") else saved_summary(args.path)
    except UnsupportedError as e:
        print(f"UNSUPPORTED: {args.path}: {e}", file=sys.stderr)
        return exit_code(e)
    except (DyngraphError, UsageError) as e:
        print(f"dyngraph inspect: {type(e).__name__}: {e}", file=sys.stderr)
        return exit_code(e)
    print(json.dumps(s, indent=2) if args.json else render(s))
    return EXIT_PASS
