"""``dyngraph rpc-server``: serve this machine's device to other processes over ggml's RPC protocol.

    dyngraph rpc-server [--host 127.0.0.1] [--port 50052] [--threads T] [--device NAME ...]
                        [--token SECRET] [--max-alloc-gib G] [--refuse-op OP ...]

Another process then runs partitions here with ``dg.Engine("rpc",
endpoints=["HOST:PORT"])`` (llama.cpp's ``--rpc HOST:PORT`` speaks the same
protocol, of the same ggml version, when no token is set). The server is
ggml's own (``ggml_backend_rpc_start_server``), run in a worker process that a
supervisor replaces after each client and whenever it dies (a malformed
message), so the server stays up; it serves one client at a time, until the
process is stopped (Ctrl-C or a signal). See docs/guide/security.md.

A dyngraph client asks the server which ops its device computes (ggml's own
client assumes all), and runs the others on its own CPU. ``--refuse-op``
(a ggml op name, e.g. FLASH_ATTN_EXT; repeatable) keeps an op off this
server: it is answered as not computed, and a graph that holds it anyway
(a client that did not ask) closes the client's connection.

With ``--token`` (or ``DYNGRAPH_RPC_TOKEN``) a client must prove it knows the
token (a challenge and response, before any ggml message): give the engine
the same token. ggml's RPC protocol has NO encryption: the token keeps
strangers out but does not hide the data. Without a token, whoever can open a
connection to the port can allocate memory, read and write it, and run
computations on this machine. The server listens on 127.0.0.1 (this machine
only) unless --host says otherwise.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import signal
import socket
import sys
import time
from typing import List, Optional

from .exitcodes import EXIT_FAIL, EXIT_PASS, EXIT_USAGE

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
    p.add_argument("--token", default=None,
                   help="shared secret clients must prove they know (default: $DYNGRAPH_RPC_TOKEN; none: no authentication)")
    p.add_argument("--max-alloc-gib", type=float, default=None,
                   help="most device memory one client may allocate, in GiB (default: this machine's memory)")
    p.add_argument("--refuse-op", action="append", default=[], metavar="OP",
                   help="a ggml op (e.g. FLASH_ATTN_EXT) this server never computes: clients run it on their CPU "
                        "(repeatable)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)  # the supervised ggml loop itself
    p.add_argument("--caps-port", type=int, default=0, help=argparse.SUPPRESS)  # (worker) capability queries
    p.add_argument("--refused", default="", help=argparse.SUPPRESS)  # (worker) ggml op numbers, comma-separated
    p.add_argument("--max-clients", type=int, default=None, help=argparse.SUPPRESS)  # (tests) stop after N clients
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


def _log(message: str) -> None:
    print(f"dyngraph rpc-server: {time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


def main(argv: Optional[List[str]] = None) -> int:
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    if not 1 <= args.port <= 65535:
        print(f"dyngraph rpc-server: --port {args.port} is outside [1, 65535]", file=sys.stderr)
        return EXIT_USAGE
    threads = args.threads if args.threads is not None else (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)
    if threads < 1:
        print(f"dyngraph rpc-server: --threads {threads} must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    if args.worker:
        from ..rpc_supervisor import serve_worker

        return serve_worker(args.host, args.port, threads, args.device or [], args.caps_port,
                            [int(r) for r in args.refused.split(",") if r])
    token = args.token if args.token is not None else os.environ.get("DYNGRAPH_RPC_TOKEN") or None
    if token is not None and not 1 <= len(token.encode()) <= 4096:
        print("dyngraph rpc-server: --token must be 1 to 4096 bytes", file=sys.stderr)
        return EXIT_USAGE
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") if hasattr(os, "sysconf") else 1 << 40
    max_alloc = physical if args.max_alloc_gib is None else args.max_alloc_gib * 2**30
    if not 0 < max_alloc <= 2**50:
        print(f"dyngraph rpc-server: --max-alloc-gib {args.max_alloc_gib} must be positive", file=sys.stderr)
        return EXIT_USAGE
    host = _address(args.host)
    # a clear error for a busy port or a foreign address (ggml's own message is terse)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, args.port))  # (it listens once ggml's server runs: a connection is then served)
    except OSError as e:
        print(f"dyngraph rpc-server: cannot listen on {host}:{args.port}: {e.strerror}", file=sys.stderr)
        listener.close()
        return EXIT_FAIL

    from .. import _backend

    if not _backend.has_rpc():
        print("dyngraph rpc-server: this build of ggml has no RPC backend (install dyngraph with its default ggml "
              "build, which has GGML_RPC=ON; see third_party/ggml/README.md)", file=sys.stderr)
        return EXIT_FAIL
    names = _backend.ggml_op_names()
    refused = []
    for op in args.refuse_op:
        if op.upper() not in names:
            print(f"dyngraph rpc-server: --refuse-op {op}: not one of ggml's ops ({', '.join(names[1:])})",
                  file=sys.stderr)
            listener.close()
            return EXIT_USAGE
        refused.append(names.index(op.upper()))
    endpoint = f"{host}:{args.port}"
    if token is None:
        print(WARNING.format(endpoint=endpoint), file=sys.stderr)
    if not ipaddress.IPv4Address(host).is_loopback and token is None:
        print(f"dyngraph rpc-server: {host} is reachable from other machines: serve only on a network you trust",
              file=sys.stderr)
    # the workers die with this process (PR_SET_PDEATHSIG): let the signals end it as they would any server
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    from ..rpc_supervisor import Supervisor

    sup = Supervisor(host, args.port, threads, args.device or [], token.encode() if token else None, int(max_alloc),
                     _log, refused)
    why = sup.start()
    if why is not None:
        print(f"dyngraph rpc-server: ggml's server cannot start: {why}", file=sys.stderr)
        listener.close()
        return EXIT_FAIL
    print(f"dyngraph rpc-server: serving {', '.join(args.device or ['CPU'])} on {endpoint} with {threads} threads "
          f"{'(token required) ' if token else ''}(Ctrl-C stops it)", file=sys.stderr, flush=True)
    listener.listen(16)
    try:
        sup.serve_forever(listener, args.max_clients)
    finally:
        listener.close()
    return EXIT_PASS


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
