"""``dyngraph rpc-server``: serve this machine's device to other processes over ggml's RPC protocol.

    dyngraph rpc-server [--host 127.0.0.1] [--port 50052] [--threads T] [--device NAME ...]

Another process then runs partitions here with ``dg.Engine("rpc",
endpoints=["HOST:PORT"])`` (llama.cpp's ``--rpc HOST:PORT`` speaks the same
protocol, of the same ggml version). The server is ggml's own
(``ggml_backend_rpc_start_server``): it serves one client at a time, until the
process is stopped (Ctrl-C or a signal).

ggml's RPC protocol has NO authentication and NO encryption: whoever can open
a connection to the port can allocate memory, read and write it, and run
computations on this machine. The server listens on 127.0.0.1 (this machine
only) unless --host says otherwise; give another address only on a network
where you trust every machine (or reach the port through an SSH tunnel).
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import signal
import socket
import sys
from typing import List, Optional

WARNING = (
    "dyngraph rpc-server: ggml's RPC protocol has no authentication and no encryption: anyone who can "
    "connect to {endpoint} can read and write this server's memory and run computations on it."
)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dyngraph rpc-server", description="Serve this machine's device over ggml's RPC protocol.")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only; the protocol has no authentication)")
    p.add_argument("--port", type=int, default=50052, help="TCP port (default 50052)")
    p.add_argument("--threads", type=int, default=None, help="CPU threads for the served computations (default: the cores)")
    p.add_argument("--device", action="append", default=None,
                   help="a ggml device to serve, by name (repeatable; default: the CPU)")
    return p


def _address(host: str) -> str:
    """The IPv4 address ggml's server binds (it takes a dotted address only)."""
    try:
        return str(ipaddress.IPv4Address(host))
    except ValueError:
        pass
    try:
        return socket.gethostbyname(host)
    except OSError as e:
        raise SystemExit(f"dyngraph rpc-server: cannot resolve --host {host!r}: {e}") from None


def main(argv: Optional[List[str]] = None) -> int:
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    if not 1 <= args.port <= 65535:
        print(f"dyngraph rpc-server: --port {args.port} is outside [1, 65535]", file=sys.stderr)
        return 2
    threads = args.threads if args.threads is not None else (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)
    if threads < 1:
        print(f"dyngraph rpc-server: --threads {threads} must be at least 1", file=sys.stderr)
        return 2
    host = _address(args.host)
    # a clear error for a busy port or a foreign address (ggml's own message is terse)
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        probe.bind((host, args.port))
    except OSError as e:
        print(f"dyngraph rpc-server: cannot listen on {host}:{args.port}: {e.strerror}", file=sys.stderr)
        return 1
    finally:
        probe.close()

    from .. import _backend

    if not _backend.has_rpc():
        print("dyngraph rpc-server: this build of ggml has no RPC backend (install dyngraph with its default ggml "
              "build, which has GGML_RPC=ON; see third_party/ggml/README.md)", file=sys.stderr)
        return 1
    endpoint = f"{host}:{args.port}"
    print(WARNING.format(endpoint=endpoint), file=sys.stderr)
    if not ipaddress.IPv4Address(host).is_loopback:
        print(f"dyngraph rpc-server: {host} is reachable from other machines: serve only on a network you trust",
              file=sys.stderr)
    print(f"dyngraph rpc-server: serving {', '.join(args.device or ['CPU'])} on {endpoint} with {threads} threads "
          f"(Ctrl-C stops it)", file=sys.stderr, flush=True)
    # the server never returns to Python: let the signals end the process as they would any server
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    from ..errors import DeviceError

    try:
        _backend.rpc_serve(host, args.port, threads, args.device or [])
    except DeviceError as e:
        print(f"dyngraph rpc-server: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
