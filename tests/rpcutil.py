"""`dyngraph rpc-server` processes on 127.0.0.1 for the tests (each stops with its test or session)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from typing import List

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_command() -> List[str]:
    """The installed console script, or the module in an in-tree build (DYNGRAPH_DEV=1)."""
    exe = os.path.join(os.path.dirname(sys.executable), "dyngraph")
    if os.environ.get("DYNGRAPH_DEV") != "1" and os.path.exists(exe):
        return [exe, "rpc-server"]
    return [sys.executable, "-m", "dyngraph.cli", "rpc-server"]


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    """Linux: the server gets SIGKILL when the test process ends, however it ends (no server left behind)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def popen_options() -> dict:
    """subprocess options for a server started by a test."""
    return {"env": server_env(), "stdin": subprocess.DEVNULL,
            "preexec_fn": _die_with_parent if sys.platform.startswith("linux") else None}


def server_env() -> dict:
    env = dict(os.environ)
    if os.environ.get("DYNGRAPH_DEV") == "1":
        env["PYTHONPATH"] = os.path.join(ROOT, "api") + os.pathsep + env.get("PYTHONPATH", "")
    return env


class RpcServer:
    """One `dyngraph rpc-server --host 127.0.0.1 --port N --threads 1` process."""

    def __init__(self, port: int = 0):
        self.port = port or free_port()
        self.proc = None
        self.start()

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, wait: float = 30.0) -> None:
        cmd = server_command() + ["--host", "127.0.0.1", "--port", str(self.port), "--threads", "1"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **popen_options())
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:  # until it listens (a connection it accepts, then sees closed)
            if self.proc.poll() is not None:
                raise RuntimeError(f"rpc-server on port {self.port} exited with {self.proc.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"rpc-server on port {self.port} did not listen within {wait} s")

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def pause(self) -> None:
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


def one_server():
    """A module fixture's body: one server for the module's tests (None where this ggml has no RPC
    backend), stopped after the engines that used it let go of their connections."""
    import gc

    import dyngraph as dg

    if not dg._backend.has_rpc():
        yield None
        return
    s = RpcServer()
    yield s
    gc.collect()
    s.stop()
