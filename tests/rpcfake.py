"""A fake ggml RPC server on 127.0.0.1 for the client's tests: it speaks ggml's
protocol (ggml-rpc.cpp, protocol 5) well enough for an Engine to open its
devices and allocate, and answers what a test tells it to (a hostile value,
a wrong size, a closed connection)."""

from __future__ import annotations

import socket
import struct
import threading
from typing import Callable, Dict, Optional, Union

from dyngraph.rpc_supervisor import CAPS_HELLO, CAPS_OK, CMD, CMD_NAMES, HELLO_REQ, NO_ANSWER, RPC_TENSOR, SUPPORTS

Answer = Union[bytes, None, Callable[[bytes], Optional[bytes]]]
CLOSE = None  # an answer that closes the connection


def _recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return bytes(buf)


def default_answer(cmd: int, body: bytes, state: dict) -> bytes:
    name = CMD_NAMES[cmd]
    if name == "HELLO":
        return bytes([5, 0, 0, 0]) + bytes(24)
    if name == "DEVICE_COUNT":
        return struct.pack("<I", 1)
    if name == "GET_ALIGNMENT":
        return struct.pack("<Q", 32)
    if name == "GET_MAX_SIZE":
        return struct.pack("<Q", 1 << 40)
    if name == "ALLOC_BUFFER":
        size = struct.unpack_from("<Q", body, 4)[0]
        state["next"] = state.get("next", 0x10000) + 0x1000
        return struct.pack("<QQ", state["next"], size)
    if name == "BUFFER_GET_BASE":
        return struct.pack("<Q", 0x7000_0000_0000)
    if name == "GET_ALLOC_SIZE":  # ne[3] * nb[3] of the tensor (a contiguous one)
        t = body[4:4 + RPC_TENSOR]
        ne = struct.unpack_from("<4I", t, 20)
        nb = struct.unpack_from("<4I", t, 36)
        return struct.pack("<Q", ne[3] * nb[3])
    if name == "GET_DEVICE_MEMORY":
        return struct.pack("<QQ", 1 << 30, 1 << 31)
    if name == "GET_TENSOR":
        return bytes(struct.unpack_from("<Q", body, RPC_TENSOR + 8)[0])
    if name in ("SET_TENSOR_HASH", "COPY_TENSOR"):
        return b"\0"
    return b""  # FREE_BUFFER, BUFFER_CLEAR, INIT_TENSOR, MEMSET_TENSOR


class FakeServer:
    """``FakeServer({"GET_ALIGNMENT": struct.pack("<Q", 0)})``: answers overridden per command name;
    an answer is the body (its size is sent before it), ``raw(bytes)`` for exactly these bytes, CLOSE,
    or a function of the request body."""

    def __init__(self, answers: Optional[Dict[str, Answer]] = None, caps: Optional[bytes] = None):
        """``caps``: what to answer dyngraph's capability hello (e.g. CAPS_OK; None: close, as ggml's
        server does); ``answers["SUPPORTS"]`` then answers the queries (default: all supported)."""
        self.answers = dict(answers or {})
        self.caps = caps
        self.seen = []  # command names received
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _run(self):
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        state = {}
        conn.settimeout(30)
        first = True
        try:
            while not self._stop.is_set():
                cmd = _recv_exact(conn, 1)[0]
                if first and self.caps is not None and bytes([cmd]) == CAPS_HELLO[:1]:
                    if _recv_exact(conn, 7) != CAPS_HELLO[1:]:
                        return
                    conn.sendall(self.caps)
                    cmd = _recv_exact(conn, 1)[0]
                if first and cmd != CMD["HELLO"]:
                    return  # (as ggml's server: HELLO first, else the connection is closed)
                first = False
                size = struct.unpack("<Q", _recv_exact(conn, 8))[0]
                body = _recv_exact(conn, size)
                if cmd == SUPPORTS and self.caps is not None:
                    cmd_name, count = "SUPPORTS", struct.unpack_from("<I", body, 8)[0]
                    self.seen.append(cmd_name)
                    ans = self.answers.get(cmd_name, b"\x01" * count)
                    if callable(ans):
                        ans = ans(body)
                    if ans is CLOSE:
                        return
                    conn.sendall(bytes(ans) if isinstance(ans, raw) else struct.pack("<Q", len(ans)) + ans)
                    continue
                name = CMD_NAMES[cmd] if cmd < len(CMD_NAMES) else str(cmd)
                self.seen.append(name)
                if cmd in NO_ANSWER:
                    continue
                ans = self.answers.get(name, default_answer(cmd, body, state))
                if callable(ans):
                    ans = ans(body)
                if ans is CLOSE:
                    return
                if isinstance(ans, raw):
                    conn.sendall(bytes(ans))
                else:
                    conn.sendall(struct.pack("<Q", len(ans)) + ans)
        except (EOFError, OSError):
            pass
        finally:
            conn.close()

    def stop(self):
        self._stop.set()
        self.sock.close()
        self._thread.join(timeout=5)


class raw(bytes):
    """An answer sent as it is (its own size field, or none)."""


class FakeServerProcess:
    """A FakeServer in a forked process: the client's calls (an Engine's destructor among them)
    may hold the GIL while they wait for an answer, which an in-process server thread could not
    give. ``select(key)`` makes the child's answers ``make_answers(key)`` (computed there)."""

    def __init__(self, make_answers: Callable[[int], Dict[str, Answer]]):
        import os

        r1, w1 = os.pipe()
        r2, w2 = os.pipe()
        ready_r, ready_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            try:
                os.close(w1)
                os.close(r2)
                srv = FakeServer()
                os.write(ready_w, struct.pack("<I", srv.port))
                f = os.fdopen(r1)
                for line in f:
                    srv.answers = make_answers(int(line))
                    os.write(w2, b"k")
            finally:
                os._exit(0)
        os.close(r1)
        os.close(w2)
        self.pid, self._w, self._r = pid, w1, r2
        self.port = struct.unpack("<I", os.read(ready_r, 4))[0]
        os.close(ready_r)
        os.close(ready_w)

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    def select(self, key: int) -> None:
        import os

        os.write(self._w, f"{key}\n".encode())
        os.read(self._r, 1)

    def stop(self) -> None:
        import os
        import signal

        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)


__all__ = ["CLOSE", "CMD", "FakeServer", "FakeServerProcess", "HELLO_REQ", "default_answer", "raw"]
