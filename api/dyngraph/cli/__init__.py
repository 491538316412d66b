"""The ``dyngraph`` command.

    dyngraph run CASE.json [benchdnn options]   run a oneDNN Graph case, compare with numpy
    dyngraph bench CASE.json|MODEL.dg --shapes  compile, build, cached-call and rebuild times
    dyngraph inspect MODEL.dg|CASE.json         what a saved partition (or a graph file) holds
    dyngraph dot CASE.json|MODEL.dg             Graphviz text, partitions as clusters

``dyngraph COMMAND --help`` says more.
"""

from __future__ import annotations

import sys
from typing import List, Optional

COMMANDS = ("run", "bench", "inspect", "dot")


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    cmd, rest = argv[0], argv[1:]
    if cmd not in COMMANDS:
        print(f"dyngraph: unknown command {cmd!r} (one of {', '.join(COMMANDS)})\n\n{__doc__.strip()}", file=sys.stderr)
        return 2
    if cmd == "run":
        from .run import main as run
    elif cmd == "bench":
        from .bench import main as run
    elif cmd == "inspect":
        from .inspect import main as run
    else:
        from .dot import main as run
    try:
        return run(rest)
    except BrokenPipeError:  # `dyngraph dot x.json | head`
        return 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
