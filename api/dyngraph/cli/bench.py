"""``dyngraph bench CASE.json|MODEL.dg --shapes ...``: what a compiled
partition costs, per binding of its dynamic dimensions.

- compile: import and compile a JSON case (all its partitions), or load a
  saved compiled partition (``.dg``);
- first call: the first call at a binding: the graph is built, then computed;
- build: the graph build of that first call alone (the cache's own timing);
- cached call: the median call once the graph is cached;
- rebuild: the median call right after the cache was cleared (a build each time);
- nodes: ggml nodes of the graph built for the binding.

Calls are ``cp(*arrays)`` (inputs used in place, outputs allocated), one
engine thread unless ``--threads`` says otherwise.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Callable, Dict, List

from ..engine import Engine
from ..errors import DyngraphError, UnsupportedError
from ..onednn.options import parse_bindings
from .model import Model, open_model
from .exitcodes import EXIT_PASS, UsageError, exit_code, need_file


def _median_ms(fn: Callable[[], None], n: int) -> float:
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e3


def bench(model: Model, bindings: List[Dict[str, int]], iters: int, rebuilds: int) -> List[dict]:
    rows = []
    for b in bindings:
        feeds = model.feeds(b)
        built0 = model.build_seconds()
        t0 = time.perf_counter()
        model.call(feeds)
        first = (time.perf_counter() - t0) * 1e3
        build = (model.build_seconds() - built0) * 1e3
        nodes = model.last_nodes()
        cached = _median_ms(lambda: model.call(feeds), iters)

        def rebuild():
            model.clear_cache()
            model.call(feeds)

        rebuilt = _median_ms(rebuild, rebuilds)
        rows.append({"binding": b, "first_call_ms": first, "build_ms": build, "cached_call_ms": cached,
                     "rebuild_call_ms": rebuilt, "nodes": nodes})
    return rows


def _table(model: Model, rows: List[dict]) -> str:
    head = ("binding", "first call ms", "build ms", "cached call ms", "rebuild ms", "nodes")
    body = [(",".join(f"{k}={v}" for k, v in r["binding"].items()) or "(static)", f"{r['first_call_ms']:.3f}",
             f"{r['build_ms']:.3f}", f"{r['cached_call_ms']:.3f}", f"{r['rebuild_call_ms']:.3f}", str(r["nodes"]))
            for r in rows]
    w = [max(len(x[i]) for x in [head] + body) for i in range(len(head))]
    lines = [f"{model.name}: compile {model.compile_ms:.1f} ms, {model.partitions} partition(s)",
             "  ".join(h.ljust(w[i]) for i, h in enumerate(head)),
             "  ".join("-" * x for x in w)]
    lines += ["  ".join(c.ljust(w[i]) if i == 0 else c.rjust(w[i]) for i, c in enumerate(r)) for r in body]
    return "\n".join(lines)


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(prog="dyngraph bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="a oneDNN Graph JSON case or a saved compiled partition (.dg)")
    ap.add_argument("--shapes", action="append", default=[],
                    help="bindings NAME=V[,NAME=V] (repeat, or join with '+'); default: the file's own sizes")
    ap.add_argument("--iters", type=int, default=50, help="timed cached calls per binding (default 50)")
    ap.add_argument("--rebuilds", type=int, default=5, help="timed rebuilds per binding (default 5)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    for opt in ("--in-shapes", "--op-attrs", "--dt", "--op-kind", "--mb", "--tensor-property"):
        ap.add_argument(opt, help="benchdnn's rewrite of a JSON case")
    ap.add_argument("--dynamic", action="append", default=[], help="ID:AXIS[:NAME] of a JSON case's input")
    args = ap.parse_args(argv)
    try:
        need_file(args.model)
        bindings = [parse_bindings(b) for s in args.shapes for b in s.split("+") if b]
        model = open_model(args.model, args, Engine(num_threads=max(1, args.threads)))
        rows = bench(model, bindings or [model.default_binding()], max(1, args.iters), max(1, args.rebuilds))
    except UnsupportedError as e:
        print(f"UNSUPPORTED: {args.model}: {e}", file=sys.stderr)
        return exit_code(e)
    except (DyngraphError, UsageError) as e:
        print(f"dyngraph bench: {type(e).__name__}: {e}", file=sys.stderr)
        return exit_code(e)
    if args.json:
        print(json.dumps({"model": args.model, "compile_ms": model.compile_ms, "partitions": model.partitions,
                          "rows": rows}, indent=2))
    else:
        print(_table(model, rows))
    return EXIT_PASS

