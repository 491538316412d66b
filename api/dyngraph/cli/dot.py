"""``dyngraph dot CASE.json|MODEL.dg``: the graph as Graphviz text, one
cluster per partition (green: run by the backend; grey: not), so a graph of
hundreds of ops can be looked at rather than read::

    dyngraph dot case.json | dot -Tsvg > case.svg

Ops are boxes (label: name, kind), tensors are the edges between them
(label: id, dtype, shape); graph inputs and outputs are small ellipses. A
JSON case is imported with the ops dyngraph cannot take kept as Wildcard ops
(labelled with their oneDNN kind), so the whole graph shows.
"""

from __future__ import annotations

import argparse
import sys
from typing import List

from ..errors import DyngraphError
from ..symbolic import format_shape
from .exitcodes import EXIT_PASS, UsageError, exit_code, need_file


NL = "\n"


def _q(s: str) -> str:
    """A Graphviz string: quotes and backslashes escaped, line breaks as \\n."""
    return '"' + str(s).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _edge_label(tid, dtype, shape) -> str:
    return f"{tid}: {dtype} {format_shape(shape)}"


def graph_dot(imp) -> str:
    g = imp.graph
    parts = g.get_partitions()
    producer = {lt.id: op.id for op in g.get_ops() for lt in op.outputs}
    lines = ["digraph dyngraph {", "  rankdir=TB;", '  node [shape=box, fontname="Helvetica", fontsize=10];',
             '  edge [fontname="Helvetica", fontsize=8];']
    for p in parts:
        color = "palegreen" if p.is_supported() else "lightgrey"
        what = "backend" if p.is_supported() else "not run by the backend"
        lines.append(f"  subgraph cluster_{p.get_id()} {{")
        lines.append(f'    label={_q(f"partition {p.get_id()} ({what})")}; style=filled; color={color};')
        for op in p.get_ops():
            kind = imp.onednn_kinds.get(op.id, op.kind.name)
            lines.append(f"    op{op.id} [label={_q(op.name + NL + kind)}];")
        lines.append("  }")
    for t in imp.inputs:
        lines.append(f"  in{t} [shape=ellipse, label={_q(f'input {t}')}];")
    for op in g.get_ops():
        for lt in op.inputs:
            full = g.logical_tensor(lt.id)
            src = f"op{producer[lt.id]}" if lt.id in producer else f"in{lt.id}"
            lines.append(f"  {src} -> op{op.id} [label={_q(_edge_label(lt.id, full.dtype, full.shape))}];")
    for t in imp.outputs:
        full = g.logical_tensor(t)
        lines.append(f"  out{t} [shape=ellipse, label={_q(f'output {t}')}];")
        lines.append(f"  op{producer[t]} -> out{t} [label={_q(_edge_label(t, full.dtype, full.shape))}];")
    lines.append("}")
    return "\n".join(lines)


def saved_dot(path: str) -> str:
    from .inspect import load_program

    prog, _ = load_program(path)
    producer = {i: k for k, op in enumerate(prog.ops) for i in op.outputs}
    lines = ["digraph dyngraph {", "  rankdir=TB;", '  node [shape=box, fontname="Helvetica", fontsize=10];',
             '  edge [fontname="Helvetica", fontsize=8];', "  subgraph cluster_0 {",
             f"    label={_q('compiled partition (' + path + ')')}; style=filled; color=palegreen;"]
    for k, op in enumerate(prog.ops):
        lines.append(f"    op{k} [label={_q(op.name + NL + op.kind.name)}];")
    lines.append("  }")
    consts = set()
    for k, op in enumerate(prog.ops):
        for i in op.inputs:
            t = prog.tensors[i]
            if i in producer:
                src = f"op{producer[i]}"
            else:
                src = f"t{i}"
                if i not in consts:
                    consts.add(i)
                    kind = t.property.value if t.property.value != "variable" else "input"
                    lines.append(f"  t{i} [shape=ellipse, label={_q(f'{kind} {t.name or t.id}')}];")
            lines.append(f"  {src} -> op{k} [label={_q(_edge_label(t.id, t.dtype, t.shape))}];")
    for i in prog.outputs:
        t = prog.tensors[i]
        lines.append(f"  out{i} [shape=ellipse, label={_q(f'output {t.name or t.id}')}];")
        lines.append(f"  op{producer[i]} -> out{i} [label={_q(_edge_label(t.id, t.dtype, t.shape))}];")
    lines.append("}")
    return "\n".join(lines)


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(prog="dyngraph dot", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("path", help="a oneDNN Graph JSON case or a saved compiled partition (.dg)")
    ap.add_argument("-o", "--output", help="write to this file instead of stdout")
    args = ap.parse_args(argv)
    try:
        need_file(args.path)
        if args.path.endswith(".json"):
            from ..onednn.reader import import_graph

            text = graph_dot(import_graph(args.path, wildcards=True))
        else:
            text = saved_dot(args.path)
    except (DyngraphError, UsageError) as e:
        print(f"dyngraph dot: {type(e).__name__}: {e}", file=sys.stderr)
        return exit_code(e)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text + "\n")
    else:
        print(text)
    return EXIT_PASS
