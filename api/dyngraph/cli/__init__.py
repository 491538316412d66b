"""The dyngraph command.

    dyngraph run CASE.json [benchdnn options]   run a oneDNN Graph case, compare with numpy
    dyngraph bench CASE.json|MODEL.dg --shapes  compile, build, cached-call and rebuild times
    dyngraph inspect MODEL.dg|CASE.json         what a saved partition (or a graph file) holds
    dyngraph dot CASE.json|MODEL.dg             Graphviz text, partitions as clusters
    dyngraph rpc-server [--host H] [--port N]   serve this machine to other processes (ggml RPC)

``dyngraph COMMAND --help`` says more.
"""

from __future__ import annotations

import os
import sys
from typing import List, Optional

from .exitcodes import EXIT_INTERRUPTED, EXIT_PASS, EXIT_USAGE

COMMANDS = ("run", "bench", "inspect", "dot", "rpc-server")


def main(argv: Optional[List[str]] = None) -> int:
    try:
        return _main(list(sys.argv[1:] if argv is None else argv))
    except BrokenPipeError:  # `dyngraph dot x.json | head`: the reader went away
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so that the flush at exit does not fail again
        return EXIT_PASS
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def _main(argv: List[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return EXIT_PASS if argv else EXIT_USAGE
    cmd, rest = argv[0], argv[1:]
    if cmd not in COMMANDS:
        print(f"dyngraph: unknown command {cmd!r} (one of {', '.join(COMMANDS)})\n\n{__doc__.strip()}", file=sys.stderr)
        return EXIT_USAGE
    if cmd == "run":
        from .run import main as run
    elif cmd == "bench":
        from .bench import main as run
    elif cmd == "inspect":
        from .inspect import main as run
    elif cmd == "rpc-server":
        from .rpc_server import main as run
    else:
        from .dot import main as run
    return run(rest)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
