"""A persistent fuzzing worker: runs many inputs, one at a time, and tells the
parent which input it is on (and in which phase) before running it, so that
when it dies or hangs the parent knows what killed it.

    python -m tests.fuzz.worker STATUS_FD SEEDS_DIR MEMORY_LIMIT_MB
    python -m tests.fuzz.worker --zygote SOCKET_FD SEEDS_DIR MEMORY_LIMIT_MB

(the second form imports dyngraph once and forks workers on request).

Tasks arrive on stdin (4-byte length, then a pickled dict); status lines go
to STATUS_FD:  "R <sealing>" once ready, "S <idx>" when an input starts,
"P <idx> <phase>", "D <idx> <outcome>" when it ends. stdout is redirected to
stderr, which the parent keeps the tail of (ggml's abort message, a
sanitizer's report, faulthandler's Python stack).
"""

from __future__ import annotations

import faulthandler
import json
import os
import pickle
import resource
import shutil
import struct
import sys
import tempfile


def _under_asan() -> bool:
    return "asan" in os.environ.get("LD_PRELOAD", "")


def _faulthandler() -> None:
    """Python stacks on fatal signals; not under ASan, whose handler must see the fault itself
    (faulthandler re-raises it from its own handler, and ASan then reports a kill, not the fault)."""
    if not _under_asan():
        faulthandler.enable()


def _limit_memory(mb: int) -> None:
    if mb <= 0 or _under_asan():  # ASan reserves terabytes of address space: the parent watches RSS instead
        return
    resource.setrlimit(resource.RLIMIT_AS, (mb << 20, mb << 20))


def seal_input(sealer, body: bytes, seal: str) -> bytes:
    if seal == "no":
        return body
    data = sealer.seal(body)
    if seal == "header-flip":
        n = len(data) - len(body)
        if n > 0:
            b = bytearray(data)
            i = (len(body) * 7919) % n  # deterministic: the replay flips the same byte
            b[i] ^= 0x10
            data = bytes(b)
    return data


def selftest(what: str) -> None:
    import ctypes
    import signal
    import time

    if what == "segv":
        ctypes.string_at(0)
    elif what == "abort":
        os.abort()
    elif what == "hang":
        time.sleep(3600)
    elif what == "fpe":
        os.kill(os.getpid(), signal.SIGFPE)


def serve(status_fd: int, seeds_dir: str, task_in, tmpdir: str) -> None:
    """The worker loop: tasks from ``task_in``, status lines to ``status_fd``."""
    import dyngraph as dg

    from .container import discover
    from .harness import Counters, run_case

    engine = dg.Engine(dg.Engine.CPU, num_threads=1)
    with open(os.path.join(seeds_dir, "mlp.dg"), "rb") as f:
        sealer = discover(f.read())
    steps_of = {}

    def say(line: str) -> None:
        os.write(status_fd, (line.replace("\n", " ") + "\n").encode())

    say(f"R {sealer.describe()}")
    if True:
        while True:
            head = task_in.read(4)
            if len(head) < 4:
                break
            task = pickle.loads(task_in.read(struct.unpack("<I", head)[0]))
            idx = task["idx"]
            kind = task["kind"]
            steps = task.get("steps")
            if steps is None:
                if kind not in steps_of:
                    with open(os.path.join(seeds_dir, f"{kind}.json")) as f:
                        steps_of[kind] = json.load(f)["steps"]
                steps = steps_of[kind]
            data = task["body"] if task["mode"] == "raw" else seal_input(sealer, task["body"], task["seal"])
            say(f"S {idx}")
            if task.get("selftest"):  # the parent's own test: a crash, an abort, a hang, an untyped error
                selftest(task["selftest"])
            before = Counters.oversized
            out = run_case(data, task["mode"], steps, engine, tmpdir, phase=lambda p: say(f"P {idx} {p}"),
                           name=f"w{os.getpid()}")
            if out == "ok" and Counters.oversized != before:
                out = "oversized"
            say(f"D {idx} {out}")


def _tmpdir() -> str:
    return tempfile.mkdtemp(prefix="dgfuzz-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)


def zygote(sock_fd: int, seeds_dir: str, mem_mb: int) -> None:
    """Import dyngraph once, then fork a worker per request: a restart after a
    crash costs a fork, not an interpreter start. Requests carry the worker's
    stdin, status and stderr pipes (SCM_RIGHTS); replies are "pid N" and,
    when a worker ends, "exit N RC" (RC negative for a signal)."""
    import select
    import socket

    import dyngraph  # noqa: F401  (what the workers share)

    from . import container, harness  # noqa: F401

    sock = socket.socket(fileno=sock_fd)
    live = set()
    tmpdir = _tmpdir()
    while True:
        r, _, _ = select.select([sock], [], [], 0.02)
        if r:
            try:
                msg, fds, _, _ = socket.recv_fds(sock, 64, 3)
            except OSError:
                msg, fds = b"", []
            if not msg:
                break
            pid = os.fork()
            if pid == 0:
                sock.close()
                os.setsid()
                task_r, status_w, err_w = fds
                os.dup2(err_w, 2)
                os.dup2(err_w, 1)
                os.close(err_w)
                _faulthandler()
                _limit_memory(mem_mb)
                try:
                    serve(status_w, seeds_dir, os.fdopen(task_r, "rb"), tmpdir)
                finally:
                    os._exit(0)
            for fd in fds:
                os.close(fd)
            live.add(pid)
            sock.send(f"pid {pid}".encode())
        while live:
            try:
                pid, st = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            live.discard(pid)
            try:  # the input a crashed worker was loading
                os.unlink(os.path.join(tmpdir, f"w{pid}.dg"))
            except FileNotFoundError:
                pass
            sock.send(f"exit {pid} {os.waitstatus_to_exitcode(st)}".encode())
    for pid in live:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
    shutil.rmtree(tmpdir, ignore_errors=True)


def main() -> None:
    if sys.argv[1] == "--zygote":
        os.dup2(2, 1)
        zygote(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]))
        return
    status_fd, seeds_dir, mem_mb = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    os.dup2(2, 1)
    _faulthandler()
    _limit_memory(mem_mb)
    tmpdir = _tmpdir()
    try:
        serve(status_fd, seeds_dir, sys.stdin.buffer, tmpdir)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


if __name__ == "__main__":
    main()
