"""Replay one saved fuzz finding in this process.

    python -m tests.fuzz.replay tests/fuzz/corpus/crashes/<hash>.json

Exit status 0: the input ended in success or a typed dyngraph error (the
wanted behaviour); 3: an untyped exception (printed). A crash, abort or
sanitizer report ends the process as it would end a user's.
"""

from __future__ import annotations

import faulthandler
import json
import os
import sys
import tempfile


def sample_file() -> bytes:
    """A file saved by this dyngraph (its container format is what inputs are sealed in)."""
    import numpy as np

    import dyngraph as dg

    x = dg.LogicalTensor(0, dg.f32, [dg.DYNAMIC_DIM, 4])
    y = dg.LogicalTensor(1, dg.f32, None)
    g = dg.Graph()
    g.add_op(dg.Op(0, dg.OpKind.ReLU, [x], [y]))
    g.finalize()
    (p,) = g.get_partitions()
    cp = p.compile([x], [y], dg.Engine(dg.Engine.CPU, num_threads=1))
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "s.dg")
        cp.save(path)
        with open(path, "rb") as f:
            del np
            return f.read()


def replay(case_path: str) -> str:
    import dyngraph as dg

    from .container import discover
    from .harness import run_case
    from .worker import seal_input

    with open(case_path) as f:
        case = json.load(f)
    with open(os.path.join(os.path.dirname(case_path), case["ir"]), "rb") as f:
        body = f.read()
    data = body
    if case["mode"] != "raw":
        data = seal_input(discover(sample_file()), body, case.get("seal", "yes"))
    engine = dg.Engine(dg.Engine.CPU, num_threads=1)
    with tempfile.TemporaryDirectory() as d:
        return run_case(data, case["mode"], case.get("steps") or [], engine, d)


def main() -> int:
    if "asan" not in os.environ.get("LD_PRELOAD", ""):  # under ASan its own handler reports the fault
        faulthandler.enable()
    out = replay(sys.argv[1])
    print(out)
    return 3 if out.startswith("untyped:") else 0


if __name__ == "__main__":
    sys.exit(main())
