"""ggml's RPC protocol as bytes, for tests that speak to `dyngraph rpc-server` directly (as an attacker
would): the server with its log in a pipe, HELLO, rpc_tensor and GRAPH_COMPUTE messages."""

from __future__ import annotations

import socket
import struct
import subprocess
import time

from dyngraph.rpc_supervisor import CMD, HELLO_REQ, RPC_TENSOR
from rpcutil import free_port, popen_options, server_command


class Server:
    """`dyngraph rpc-server` (supervised) with its log in a pipe."""

    def __init__(self, *args):
        self.port = free_port()
        cmd = server_command() + ["--host", "127.0.0.1", "--port", str(self.port), "--threads", "1", *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                     **popen_options())
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.proc.stderr.read()
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("rpc-server did not listen")

    @property
    def endpoint(self):
        return f"127.0.0.1:{self.port}"

    def connect(self):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        return s

    def stop(self):
        self.proc.kill()
        self.proc.wait(timeout=30)
        return self.proc.stderr.read()


def hello(s):
    s.sendall(bytes([CMD["HELLO"]]) + struct.pack("<Q", HELLO_REQ) + bytes(HELLO_REQ))
    size = struct.unpack("<Q", recv_exact(s, 8))[0]
    return recv_exact(s, size)


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf


def closed(s) -> bool:
    s.settimeout(30)
    try:
        return s.recv(1) == b""
    except (ConnectionResetError, socket.timeout):
        return True


def rpc_tensor(tid=1, buffer=0, data=0, ne=(1, 1, 1, 1), nb=(4, 4, 4, 4), op=0, src=()):
    """An rpc_tensor (ggml-rpc.cpp's layout)."""
    t = bytearray(RPC_TENSOR)
    struct.pack_into("<QIQ", t, 0, tid, 0, buffer)
    struct.pack_into("<4I", t, 20, *ne)
    struct.pack_into("<4I", t, 36, *nb)
    struct.pack_into("<I", t, 52, op)
    for i, s in enumerate(src):
        struct.pack_into("<Q", t, 124 + 8 * i, s)
    struct.pack_into("<Q", t, 124 + 80 + 16, data)
    return bytes(t)


def graph_compute(nodes, tensors):
    body = struct.pack("<II", 0, len(nodes)) + struct.pack(f"<{len(nodes)}Q", *nodes)
    body += struct.pack("<I", len(tensors)) + b"".join(tensors)
    return bytes([CMD["GRAPH_COMPUTE"]]) + struct.pack("<Q", len(body)) + body
