"""``dyngraph rpc-server``'s supervisor: the listening socket, the token, and
ggml's server in a child process that is replaced after every client.

ggml's RPC server (``ggml_backend_rpc_start_server``) ends its process on a
malformed message (its asserts abort; a deep source chain overflows the
stack). So it never faces a client directly:

- the supervisor (this module, the ``dyngraph rpc-server`` process) listens
  on the public address and serves one client at a time, as ggml does;
- ggml's loop runs in a *worker* process listening on 127.0.0.1 at a port of
  its own. The supervisor starts the worker and connects to it before any
  client comes (its HELLO answered: the worker is ready and serves only the
  supervisor), so a new client is served at once;
- with a token (``--token`` / ``DYNGRAPH_RPC_TOKEN``), a client must first
  answer a challenge (HMAC-SHA256 of a fresh nonce, see
  docs/guide/security.md); without one, a plain ggml client works as before;
- the supervisor relays the client's messages to the worker, reading each
  request's command and size: an unknown command, a size a command cannot
  have, or buffers beyond ``--max-alloc-gib`` close the connection before the
  worker sees the message;
- when the client leaves, the supervisor closes its connection to the worker
  (ggml's server frees what that client allocated) and connects again at once
  (a HELLO answered within 2 s, else the worker is replaced: a local process
  that slipped in first is not served under the supervisor's name);
- when the worker dies (an abort on a message the supervisor let through),
  the client's connection is closed and the spare worker, started and
  claimed in advance, serves the next client; a new spare is started;
- a dyngraph client asks which ops the device computes (ggml's client does
  not: backend/rpc_caps.h): it says ``DGCAPS1\n`` before ggml's HELLO, and
  may then send SUPPORTS queries between ggml's requests. The worker answers
  them on a second port of its own (a query ggml's checks crash on ends that
  worker, not the server); ops named by ``--refuse-op`` are never supported,
  and a GRAPH_COMPUTE holding one closes the connection before the worker
  sees it.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from typing import Callable, List, Optional, Tuple

# ggml's RPC protocol 5 (ggml-rpc.cpp): | cmd (1 byte) | size (8 bytes) | data |, answers | size (8) | data |
CMD_NAMES = ("ALLOC_BUFFER", "GET_ALIGNMENT", "GET_MAX_SIZE", "BUFFER_GET_BASE", "FREE_BUFFER", "BUFFER_CLEAR",
             "SET_TENSOR", "SET_TENSOR_HASH", "GET_TENSOR", "COPY_TENSOR", "GRAPH_COMPUTE", "GET_DEVICE_MEMORY",
             "INIT_TENSOR", "GET_ALLOC_SIZE", "HELLO", "DEVICE_COUNT", "GRAPH_RECOMPUTE", "MEMSET_TENSOR")
CMD = {n: i for i, n in enumerate(CMD_NAMES)}
RPC_TENSOR = 296  # sizeof(rpc_tensor)
HELLO_REQ, HELLO_RSP = 24, 28
# the exact request size of each fixed-size command (ggml's server refuses any other)
REQUEST_SIZE = {
    CMD["ALLOC_BUFFER"]: 12, CMD["GET_ALIGNMENT"]: 4, CMD["GET_MAX_SIZE"]: 4, CMD["BUFFER_GET_BASE"]: 8,
    CMD["FREE_BUFFER"]: 8, CMD["BUFFER_CLEAR"]: 9, CMD["SET_TENSOR_HASH"]: RPC_TENSOR + 16,
    CMD["GET_TENSOR"]: RPC_TENSOR + 16, CMD["COPY_TENSOR"]: 2 * RPC_TENSOR, CMD["GET_DEVICE_MEMORY"]: 4,
    CMD["INIT_TENSOR"]: RPC_TENSOR, CMD["GET_ALLOC_SIZE"]: 4 + 11 * RPC_TENSOR, CMD["DEVICE_COUNT"]: 0,
    CMD["GRAPH_RECOMPUTE"]: 4, CMD["MEMSET_TENSOR"]: RPC_TENSOR + 17,
}
NO_ANSWER = {CMD["SET_TENSOR"], CMD["GRAPH_COMPUTE"], CMD["GRAPH_RECOMPUTE"]}
MAX_GRAPH_BYTES = 256 << 20  # a GRAPH_COMPUTE message (ggml's own graphs are a few MiB)

AUTH_HELLO, AUTH_OK, AUTH_CONTEXT, NONCE = b"DGAUTH1\n", b"DGOK", b"dyngraph-rpc-auth-v1", 32
# dyngraph's capability queries (backend/rpc_caps.h)
CAPS_HELLO, CAPS_OK, SUPPORTS, QUERY_MAGIC, MAX_QUERY_NODES = b"DGCAPS1\n", b"DGC1", 0xD0, 0x31514744, 4096
MAX_QUERY_BYTES = 12 + MAX_QUERY_NODES * (4 + 11 * 140)
RPC_TENSOR_OP = 52  # the offset of `op` in ggml's (packed) rpc_tensor
AUTH_TIMEOUT = 10.0


def auth_response(token: bytes, nonce: bytes) -> bytes:
    """What a client sends back for ``nonce`` (the relay of backend/rpc_relay.cpp computes the same)."""
    return hmac.new(token, AUTH_CONTEXT + nonce, hashlib.sha256).digest()


class Refused(Exception):
    """A client's message (or token) is refused: its connection is closed."""


class WorkerDied(Exception):
    pass


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise EOFError
        buf += chunk
    return bytes(buf)


def _pipe(src: socket.socket, dst: socket.socket, n: int, buf: memoryview) -> None:
    while n:
        k = src.recv_into(buf, min(n, len(buf)))
        if not k:
            raise EOFError
        dst.sendall(buf[:k])
        n -= k


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Forked:
    """A worker forked by the zygote: the subprocess.Popen methods the supervisor uses."""

    def __init__(self, zygote: "Zygote", pid: int):
        self.zygote, self.pid, self.returncode = zygote, pid, None

    def poll(self):
        if self.returncode is None:
            self.returncode = self.zygote.status(self.pid)
        return self.returncode

    def kill(self):
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def wait(self, timeout: float = 10.0):
        deadline = time.monotonic() + timeout
        while self.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        return self.returncode


class Zygote:
    """A process that has imported dyngraph's extension once and forks workers (~10 ms each, not the
    0.6 s of a new interpreter): a worker that dies is replaced at once."""

    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, "-c", "from dyngraph.rpc_supervisor import _zygote_main; "
                                      "_zygote_main()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)
        self._lock = threading.Lock()
        self._statuses = {}
        self._pids = []
        self._cv = threading.Condition(self._lock)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            kind, pid, *rest = line.split()
            with self._cv:
                if kind == "pid":
                    self._pids.append(int(pid))
                else:
                    self._statuses[int(pid)] = int(rest[0])
                self._cv.notify_all()
        with self._cv:
            self._pids.append(-1)
            self._cv.notify_all()

    def spawn(self, port: int, caps_port: int, threads: int, refused: List[int], devices: List[str]) -> _Forked:
        with self._cv:
            line = [str(port), str(caps_port), str(threads), ",".join(map(str, refused)) or "-"] + devices
            self.proc.stdin.write(" ".join(line) + "\n")
            self.proc.stdin.flush()
            if not self._cv.wait_for(lambda: self._pids, timeout=30):
                raise WorkerDied("the zygote did not fork a worker")
            pid = self._pids.pop(0)
        if pid < 0:
            raise WorkerDied("the zygote exited")
        return _Forked(self, pid)

    def status(self, pid: int):
        with self._lock:
            return self._statuses.get(pid)


def _zygote_main() -> None:  # pragma: no cover - runs in the zygote process
    _die_with_parent()
    from . import _backend  # noqa: F401  (what makes a new interpreter slow, done once)

    def reap(*_):
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
            print(f"exit {pid} {code}", flush=True)

    signal.signal(signal.SIGCHLD, reap)
    for line in sys.stdin:
        port, caps_port, threads, refused, *devices = line.split()
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            os.environ["GGML_NO_BACKTRACE"] = "1"  # (ggml's abort would run gdb on the worker)
            _die_with_parent()
            os.dup2(os.open(os.devnull, os.O_RDWR), 0)
            os.dup2(os.open(os.devnull, os.O_RDWR), 1)  # (ggml's banner)
            try:
                serve_worker("127.0.0.1", int(port), int(threads), devices, int(caps_port),
                             [int(r) for r in refused.split(",") if r != "-"])
            finally:
                os._exit(1)
        print(f"pid {pid}", flush=True)
    os._exit(0)


class Worker:
    """One ggml server process on 127.0.0.1, connected to (and claimed by) the supervisor."""

    def __init__(self, threads: int, devices: List[str], log: Callable[[str], None], zygote: Optional[Zygote] = None,
                 refused: List[int] = ()):
        self.port, self.caps_port = _free_port(), _free_port()
        if zygote is not None:
            self.proc = zygote.spawn(self.port, self.caps_port, threads, list(refused), devices)
        else:
            cmd = [sys.executable, "-m", "dyngraph.cli", "rpc-server", "--worker", "--host", "127.0.0.1",
                   "--port", str(self.port), "--caps-port", str(self.caps_port), "--threads", str(threads)]
            for d in devices:
                cmd += ["--device", d]
            if refused:
                cmd += ["--refused", ",".join(map(str, refused))]
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         env=dict(os.environ, GGML_NO_BACKTRACE="1"),
                                         preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)
        self.sock: Optional[socket.socket] = None
        self.caps: Optional[socket.socket] = None  # the worker's capability port, claimed once
        self.hello: Optional[bytes] = None
        self.log = log

    def claim(self, wait: float = 60.0, hello_timeout: float = 10.0) -> None:
        """Connect first and say HELLO: from then on the worker serves the supervisor only."""
        deadline = time.monotonic() + wait
        while True:
            if self.proc.poll() is not None:
                raise WorkerDied(f"the worker exited with status {self.proc.returncode} before listening")
            try:
                self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=1)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise WorkerDied(f"the worker did not listen within {wait} s") from None
                time.sleep(0.05)
        try:
            self.sock.settimeout(hello_timeout)
            self.sock.sendall(bytes([CMD["HELLO"]]) + struct.pack("<Q", HELLO_REQ) + bytes(HELLO_REQ))
            size = struct.unpack("<Q", _recv_exact(self.sock, 8))[0]
            if size != HELLO_RSP:
                raise WorkerDied(f"the worker answered HELLO with {size} bytes")
            rsp = bytearray(_recv_exact(self.sock, HELLO_RSP))
            rsp[4:] = bytes(HELLO_RSP - 4)  # TCP only: no transport upgrade through the supervisor
            self.hello = bytes(rsp)
            self.sock.settimeout(None)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except (OSError, EOFError) as e:
            # (another local process took the worker's first connection: this one is not trusted)
            raise WorkerDied(f"the worker did not answer HELLO ({e})") from None
        if self.caps is None:
            try:  # (the worker listens there before ggml's loop starts; an empty query must be answered)
                self.caps = socket.create_connection(("127.0.0.1", self.caps_port), timeout=hello_timeout)
                self.caps.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self.ask(struct.pack("<III", QUERY_MAGIC, 0, 0), timeout=hello_timeout)
            except (OSError, EOFError, WorkerDied) as e:
                raise WorkerDied(f"the worker did not answer on its capability port ({e})") from None

    def ask(self, query: bytes, timeout: Optional[float] = None) -> bytes:
        """The worker's answer to a capability query (b"" for a malformed one); WorkerDied when it fails."""
        try:
            self.caps.settimeout(timeout)
            self.caps.sendall(struct.pack("<Q", len(query)) + query)
            n = struct.unpack("<Q", _recv_exact(self.caps, 8))[0]
            if n > MAX_QUERY_NODES:
                raise WorkerDied(f"the worker answered a capability query with {n} bytes")
            return _recv_exact(self.caps, n)
        except (OSError, EOFError) as e:
            raise WorkerDied(f"the worker failed a capability query ({e or type(e).__name__})") from None

    def reclaim(self) -> bool:
        """After a client: a new connection of the supervisor's own (False when the worker is gone or busy)."""
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.proc.poll() is not None:
            return False
        try:
            self.claim(wait=2.0, hello_timeout=2.0)
            return True
        except WorkerDied:
            return False

    def stop(self) -> str:
        """Kill the worker; how it had ended, when it had."""
        for s in (self.sock, self.caps):
            if s is not None:
                s.close()
        try:  # (a worker that just died: its status, to log why)
            status = self.proc.wait(timeout=0.2)
        except subprocess.TimeoutExpired:
            status = None
        if status is None:
            self.proc.kill()
            self.proc.wait()
            return ""
        if status < 0:
            try:
                return f"ended with {signal.Signals(-status).name}"
            except ValueError:
                return f"ended with signal {-status}"
        return f"exited with status {status}"


class Supervisor:
    def __init__(self, host: str, port: int, threads: int, devices: List[str], token: Optional[bytes],
                 max_alloc: int, log: Callable[[str], None], refused: List[int] = ()):
        self.host, self.port, self.threads, self.devices = host, port, threads, devices
        self.refused = sorted(set(refused))  # ggml op numbers no client may run here (--refuse-op)
        self.token = token or None
        self.max_alloc = max_alloc
        self.log = log
        self.served = 0
        self._spare: Optional[Worker] = None
        self._spare_error: Optional[str] = None
        self._spare_ready = threading.Event()
        self._worker: Optional[Worker] = None
        self._current: Optional[Worker] = None  # the worker that serves, claimed by the supervisor
        self._zygote: Optional[Zygote] = Zygote()

    # -- workers ---------------------------------------------------------------------------
    def _start_spare(self) -> None:
        """Start and claim the next worker in the background (ready when the current client leaves)."""
        self._spare_ready.clear()
        # started from this (the main) thread: PR_SET_PDEATHSIG kills a child when the *thread* that
        # started it ends, so only its claim runs in the background
        try:
            w = Worker(self.threads, self.devices, self.log, self._zygote, self.refused)
        except WorkerDied as e:  # (the zygote is gone: new interpreters from now on)
            self.log(f"{e}: workers start as new processes from now on")
            self._zygote = None
            w = Worker(self.threads, self.devices, self.log, None, self.refused)

        def run():
            try:
                w.claim()
                self._spare, self._spare_error = w, None
            except WorkerDied as e:
                w.stop()
                self._spare, self._spare_error = None, str(e)
            self._spare_ready.set()

        threading.Thread(target=run, daemon=True).start()

    def _take_worker(self) -> Worker:
        if self._current is not None:
            return self._current
        for attempt in range(5):
            self._spare_ready.wait()
            w = self._spare
            self._spare = None
            if w is not None:
                self._start_spare()
                self._current = w
                return w
            self.log(f"worker failed: {self._spare_error}; starting another")
            time.sleep(min(2.0, 0.1 * 2 ** attempt))
            self._start_spare()
        raise SystemExit(f"dyngraph rpc-server: ggml's server cannot start: {self._spare_error}")

    # -- clients ---------------------------------------------------------------------------
    def start(self) -> Optional[str]:
        """Start the first worker and wait until it serves: None, or why ggml's server cannot start."""
        self._start_spare()
        self._spare_ready.wait()
        return self._spare_error if self._spare is None else None

    def serve_forever(self, listener: socket.socket, max_clients: Optional[int] = None) -> None:
        if self._spare is None and not self._spare_ready.is_set():
            self._start_spare()
        while max_clients is None or self.served < max_clients:
            client, addr = listener.accept()
            who = f"{addr[0]}:{addr[1]}"
            why, ended = "", ""
            self._worker = None
            try:
                client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self._session(client, who)
            except Refused as e:
                why = f"refused: {e}"
            except WorkerDied as e:
                why = str(e)
            except (EOFError, ConnectionError, OSError):
                pass  # the client left
            finally:
                client.close()
                if self._worker is not None and not self._worker.reclaim():
                    ended = self._worker.stop() or "could not be claimed again"
                    self._current = None
                self.served += 1
            if ended:
                why = (why + "; " if why else "") + f"the worker {ended}: replaced by a fresh one"
            if why:
                self.log(f"client {who}: {why}")

    def _authenticate(self, client: socket.socket) -> None:
        client.settimeout(AUTH_TIMEOUT)
        try:
            hello = _recv_exact(client, len(AUTH_HELLO))
            if hello != AUTH_HELLO:
                raise Refused("no token (this server runs with --token: the client needs the same token)")
            nonce = secrets.token_bytes(NONCE)
            client.sendall(nonce)
            answer = _recv_exact(client, 32)
        except socket.timeout:
            raise Refused(f"no answer to the token's challenge within {AUTH_TIMEOUT} s") from None
        if not hmac.compare_digest(answer, auth_response(self.token, nonce)):
            raise Refused("wrong token")
        client.sendall(AUTH_OK)
        client.settimeout(None)

    def _session(self, client: socket.socket, who: str) -> None:
        if self.token is not None:
            self._authenticate(client)
        client.settimeout(AUTH_TIMEOUT)
        caps = False
        try:
            head = _recv_exact(client, 8)
            if head == AUTH_HELLO:  # (refused at once: the client waits for a challenge that will not come)
                raise Refused("a client with a token (this server runs without one)")
            if head == CAPS_HELLO:  # a dyngraph client: it will ask which ops the device computes
                client.sendall(CAPS_OK)
                caps = True
                head = _recv_exact(client, 8)
            head += _recv_exact(client, 1)
        except socket.timeout:
            raise Refused(f"no HELLO within {AUTH_TIMEOUT} s") from None
        if head[0] != CMD["HELLO"] or struct.unpack("<Q", head[1:])[0] != HELLO_REQ:
            raise Refused("the first message is not ggml's HELLO")
        _recv_exact(client, HELLO_REQ)  # (the client's transport capabilities: TCP only here)
        client.settimeout(None)
        # a worker only for a client that said HELLO (a port probe costs none)
        worker = self._worker = self._take_worker()
        client.sendall(struct.pack("<Q", HELLO_RSP) + worker.hello)
        ws = worker.sock
        buf = memoryview(bytearray(1 << 20))
        buffers = {}  # remote buffer -> size, for --max-alloc-gib
        freed = False  # a buffer was freed since the last GRAPH_COMPUTE
        while True:
            ready, _, _ = select.select([client, ws], [], [])
            if ws in ready and client not in ready:
                raise WorkerDied("the worker closed the connection")
            try:
                head = _recv_exact(client, 9)
            except EOFError:
                return
            cmd, size = head[0], struct.unpack("<Q", head[1:])[0]
            if cmd == SUPPORTS and caps:
                self._supports(client, worker, size)
                continue
            name = CMD_NAMES[cmd] if cmd < len(CMD_NAMES) else str(cmd)
            if cmd >= len(CMD_NAMES) or cmd == CMD["HELLO"]:
                raise Refused(f"command {name}")
            want = REQUEST_SIZE.get(cmd)
            if want is not None and size != want:
                raise Refused(f"{name} of {size} bytes (it has {want})")
            if cmd == CMD["SET_TENSOR"] and not RPC_TENSOR + 8 <= size <= RPC_TENSOR + 8 + max(buffers.values(), default=0):
                # (ggml zero-fills the declared size before it reads a byte: no more than the largest buffer)
                raise Refused(f"SET_TENSOR of {size} bytes (larger than any buffer of this client)")
            if cmd == CMD["GRAPH_RECOMPUTE"] and freed:
                raise Refused("GRAPH_RECOMPUTE after FREE_BUFFER (the stored graph may use freed memory)")
            if cmd == CMD["GRAPH_COMPUTE"]:
                freed = False
            if cmd == CMD["GRAPH_COMPUTE"] and size > MAX_GRAPH_BYTES:
                raise Refused(f"GRAPH_COMPUTE of {size} bytes (at most {MAX_GRAPH_BYTES})")
            if cmd == CMD["GRAPH_COMPUTE"] and self.refused:
                want = size  # (read whole, to look at its ops)
            if want is not None:
                body = _recv_exact(client, size)
                if cmd == CMD["GRAPH_COMPUTE"]:
                    self._check_graph(body)
                if cmd == CMD["ALLOC_BUFFER"]:
                    asked = struct.unpack_from("<Q", body, 4)[0]
                    if sum(buffers.values()) + asked > self.max_alloc:
                        raise Refused(f"buffers of more than {self.max_alloc} bytes (--max-alloc-gib)")
                if cmd == CMD["FREE_BUFFER"]:
                    buffers.pop(struct.unpack("<Q", body)[0], None)
                    freed = True
                try:
                    ws.sendall(head + body)
                except OSError:
                    raise WorkerDied(f"the worker stopped reading at {name}") from None
            else:
                try:
                    ws.sendall(head)
                    _pipe(client, ws, size, buf)
                except (BrokenPipeError, ConnectionResetError):
                    raise WorkerDied(f"the worker stopped reading at {name}") from None
            if cmd in NO_ANSWER:
                continue
            try:
                rsize = struct.unpack("<Q", _recv_exact(ws, 8))[0]
                if cmd == CMD["ALLOC_BUFFER"] and rsize == 16:
                    rsp = _recv_exact(ws, 16)
                    ptr, got = struct.unpack("<QQ", rsp)
                    if ptr:
                        buffers[ptr] = got
                    client.sendall(struct.pack("<Q", rsize) + rsp)
                    continue
                client.sendall(struct.pack("<Q", rsize))
                _pipe(ws, client, rsize, buf)
            except EOFError:
                raise WorkerDied(f"the worker closed the connection at {name}") from None


    def _supports(self, client: socket.socket, worker: Worker, size: int) -> None:
        """A client's capability query: the worker answers, one byte per node."""
        if not 12 <= size <= MAX_QUERY_BYTES:
            raise Refused(f"a capability query of {size} bytes")
        query = _recv_exact(client, size)
        magic, _, count = struct.unpack_from("<III", query)
        if magic != QUERY_MAGIC or count > MAX_QUERY_NODES:
            raise Refused("a malformed capability query")
        answer = worker.ask(query, timeout=60)  # (a worker that takes longer is replaced)
        if len(answer) != count:
            raise Refused("a malformed capability query")
        client.sendall(struct.pack("<Q", count) + answer)

    def _check_graph(self, body: bytes) -> None:
        """--refuse-op: a graph holding a refused op never reaches the worker."""
        if len(body) < 8:
            return  # (ggml's server refuses it)
        n_nodes = struct.unpack_from("<I", body, 4)[0]
        at = 8 + 8 * n_nodes
        if len(body) < at + 4:
            return
        n_tensors = struct.unpack_from("<I", body, at)[0]
        at += 4
        if len(body) < at + n_tensors * RPC_TENSOR:
            return
        for k in range(n_tensors):
            op = struct.unpack_from("<I", body, at + k * RPC_TENSOR + RPC_TENSOR_OP)[0]
            if op in self.refused:
                from . import _backend

                raise Refused(f"a graph with {_backend.ggml_op_names()[op]} (this server runs with --refuse-op)")


def _serve_caps(listener: socket.socket, devices: List[str], refused: List[int]) -> None:  # pragma: no cover - worker
    """The worker's capability port: its first connection (the supervisor's) only, one query at a time."""
    from . import _backend

    conn, _ = listener.accept()
    listener.close()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        while True:
            n = struct.unpack("<Q", _recv_exact(conn, 8))[0]
            if n > MAX_QUERY_BYTES:
                return
            try:
                answer = _backend.rpc_supports(devices, _recv_exact(conn, n), refused)
            except ValueError:
                answer = b""
            conn.sendall(struct.pack("<Q", len(answer)) + answer)
    except (OSError, EOFError):
        return
    finally:
        conn.close()


def serve_worker(host: str, port: int, threads: int, devices: List[str], caps_port: int = 0,
                 refused: List[int] = ()) -> int:
    """The worker: ggml's own loop, never returns while it can listen (and, on `caps_port`, the answers to
    capability queries)."""
    from . import _backend

    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if caps_port:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", caps_port))
        listener.listen(1)
        threading.Thread(target=_serve_caps, args=(listener, devices, list(refused)), daemon=True).start()
    try:
        _backend.rpc_serve(host, port, threads, devices)
    except Exception as e:  # noqa: BLE001 - std::length_error / bad_alloc out of ggml's loop: the worker ends
        print(f"dyngraph rpc-server worker: ggml's server stopped: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
    return 1
