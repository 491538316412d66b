"""Engines (where partitions run) and streams (how executions are ordered).

An engine is a ggml backend device, or several:

- ``Engine("cpu")`` (``Engine(Engine.CPU, num_threads=...)``): the host CPU
  with dyngraph's own CPU path (its kernels, its memory planner, inputs and
  outputs used in place);
- ``Engine("rpc", endpoints=["host:port", ...])``: the devices of ggml RPC
  servers (``dyngraph rpc-server`` on each machine), one or more per server;
- ``Engine("gpu")`` / ``Engine("gpu", device="CUDA0")``: a GPU ggml was built
  with (CUDA, Vulkan, ...).

``Engine.devices()`` lists what this process can use. A partition compiled for
a list of engines (``part.compile(..., [Engine("cpu"), Engine("rpc", ...)],
split="layer")``) is split over their devices; see ``compile``.
"""

from __future__ import annotations

import enum
import math
import os
import threading
from typing import List, NamedTuple, Optional, Sequence, Tuple

from .errors import CompileError, DeviceError


class EngineKind(enum.Enum):
    CPU = "cpu"
    GPU = "gpu"
    RPC = "rpc"


class DeviceInfo(NamedTuple):
    """A device this process can run partitions on."""

    kind: str  # "cpu", "gpu", "igpu", "accel" or "rpc"
    name: str  # ggml's name: "CPU", "CUDA0", "RPC0", ...
    description: str
    endpoint: str  # rpc: the server ("" otherwise)
    memory_free: int  # bytes
    memory_total: int


def default_num_threads() -> int:
    """DYNGRAPH_NUM_THREADS if set, else the cores this process may use (at most 8)."""
    env = os.environ.get("DYNGRAPH_NUM_THREADS")
    if env:
        return max(1, int(env))
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        n = os.cpu_count() or 1
    return max(1, min(n, 8))


def _threads(num_threads) -> int:
    if num_threads is None:
        return default_num_threads()
    if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
        raise ValueError(f"num_threads must be a positive int, got {num_threads!r}")
    return num_threads


def _seconds(name: str, value, upper: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not 0 < value <= upper:
        raise ValueError(f"{name} must be a number of seconds in (0, {upper:g}], got {value!r}")
    return float(value)


class Engine:
    """``Engine(kind="cpu", num_threads=None, *, endpoints=None, device=None, timeout=60, connect_timeout=5, token=None)``.

    ``num_threads`` sizes the host CPU's thread pool (the CPU engine's, or the
    one that runs the host parts of a device engine's graphs). RPC engines
    connect at creation (``DeviceError`` naming the endpoint when a server
    cannot be reached within ``connect_timeout`` seconds); every later call to
    a server is bounded by ``timeout`` seconds. ``token`` (default: the
    ``DYNGRAPH_RPC_TOKEN`` environment variable) is the shared secret of
    servers started with ``--token``: the connection authenticates before any
    ggml message (docs/guide/security.md). Every answer of a server is checked
    (device count, alignment, sizes): a bad one is a ``DeviceError`` naming
    the endpoint and what was wrong.
    """

    Kind = EngineKind
    CPU = EngineKind.CPU
    GPU = EngineKind.GPU
    RPC = EngineKind.RPC

    def __init__(self, kind=EngineKind.CPU, num_threads: Optional[int] = None, *,
                 endpoints: Optional[Sequence[str]] = None, device: Optional[str] = None,
                 timeout: float = 60.0, connect_timeout: float = 5.0, token: Optional[str] = None):
        if isinstance(kind, str):
            try:
                kind = EngineKind(kind.lower())
            except ValueError:
                raise ValueError(f"unknown engine kind {kind!r} (one of 'cpu', 'gpu', 'rpc')") from None
        if not isinstance(kind, EngineKind):
            raise ValueError(f"unknown engine kind {kind!r}")
        num_threads = _threads(num_threads)
        self.kind = kind
        self.num_threads = num_threads
        self.endpoints: Tuple[str, ...] = ()
        self._impl = None
        self._devices: list = []
        if kind is EngineKind.CPU:
            if endpoints is not None or device is not None:
                raise ValueError("a CPU engine takes neither endpoints nor device")
            return
        from . import _backend

        if kind is EngineKind.RPC:
            if device is not None:
                raise ValueError("an RPC engine takes endpoints, not device")
            if isinstance(endpoints, str) or not endpoints or not all(isinstance(e, str) for e in endpoints):
                raise ValueError(f"an RPC engine needs endpoints=['host:port', ...], got {endpoints!r}")
            if len(set(endpoints)) != len(endpoints):
                raise ValueError(f"endpoints {list(endpoints)} name a server twice")
            timeout = _seconds("timeout", timeout, 86400)
            connect_timeout = _seconds("connect_timeout", connect_timeout, 3600)
            self.endpoints = tuple(endpoints)
            if token is None:
                token = os.environ.get("DYNGRAPH_RPC_TOKEN", "")
            if not isinstance(token, str) or len(token.encode()) > 4096:
                raise ValueError("token must be a str of at most 4096 bytes")
            for e in endpoints:
                self._devices += _backend.open_rpc_devices(e, connect_timeout, timeout, token.encode())
        else:
            if endpoints is not None:
                raise ValueError("a GPU engine takes device, not endpoints")
            if device is None:
                gpus = [d for d in Engine.devices() if d.kind in ("gpu", "igpu")]
                if not gpus:
                    raise DeviceError(
                        "this ggml has no GPU device (build it with GGML_CUDA=ON or GGML_VULKAN=ON: "
                        "third_party/ggml/README.md)"
                    )
                device = gpus[0].name
            if not isinstance(device, str):
                raise ValueError(f"device must be a device name such as 'CUDA0', got {device!r}")
            self._devices = [_backend.open_local_device(device)]
        self._impl = _backend.Engine(self.num_threads, self._devices)

    @staticmethod
    def shared(num_threads: Optional[int] = None) -> "Engine":
        """The process's CPU engine of ``num_threads`` threads (default: ``default_num_threads()``),
        made on first use. ``dyngraph.torch.compile``, ``GraphBuilder.compile`` and ``dyngraph.load``
        use it when given no engine (``dyngraph.torch`` also for a thread count), so a process's
        programs share one thread pool, as PyTorch's share one: after each call a ggml pool's
        workers spin for their next task (about 0.2 s), and the spinners of a second pool take the
        cores from the program that runs next. Programs on one engine compute one at a time; give a
        program its own ``Engine(...)`` to run it beside others. A child process made by ``fork``
        makes its own."""
        num_threads = _threads(num_threads)
        with _shared_lock:
            e = _shared.get(num_threads)
            if e is None:
                e = _shared[num_threads] = Engine(EngineKind.CPU, num_threads)
            return e

    @staticmethod
    def devices() -> List[DeviceInfo]:
        """The devices this process can use: ggml's (the CPU, GPUs it was built
        with) and those of the RPC servers it is connected to."""
        from . import _backend

        return [DeviceInfo(**d) for d in _backend.list_devices()]

    @property
    def impl(self):
        """The backend's engine (a CPU engine's is created on first use)."""
        if self._impl is None:
            from . import _backend

            self._impl = _backend.Engine(self.num_threads)
        return self._impl

    @property
    def device_names(self) -> List[str]:
        """The engine's devices ("CPU (host)" for a CPU engine)."""
        return [d.name for d in self._devices] if self._devices else ["CPU (host)"]

    @property
    def num_devices(self) -> int:
        return max(1, len(self._devices))

    def traffic(self) -> Tuple[int, int]:
        """(bytes sent, bytes received) over this engine's RPC connections so far
        (shared with every engine connected to the same servers)."""
        seen, sent, received = set(), 0, 0
        for d in self._devices:
            e = d.endpoint
            if e in seen:
                continue
            seen.add(e)
            s, r = d.traffic()
            sent += s
            received += r
        return sent, received

    def get_kind(self) -> EngineKind:
        return self.kind

    def _identity(self) -> tuple:
        # what makes two engines interchangeable: kind, devices (by name; an RPC device's name holds its
        # endpoint) and threads (the size of the thread pool the CPU parts run on)
        return (self.kind, tuple(self.device_names), self.num_threads)

    def __eq__(self, other) -> bool:
        """Engines are equal when they are interchangeable (oneDNN asks for the same device and
        context, not the same object): same kind, same devices and same ``num_threads``. A stream
        or tensor of one serves partitions compiled for the other."""
        if not isinstance(other, Engine):
            return NotImplemented
        return self is other or self._identity() == other._identity()

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        return hash(self._identity())

    def __repr__(self) -> str:
        if self.kind is EngineKind.RPC:
            return f"Engine(RPC, endpoints={list(self.endpoints)}, num_threads={self.num_threads})"
        if self.kind is EngineKind.GPU:
            return f"Engine(GPU, device={self.device_names[0]!r}, num_threads={self.num_threads})"
        return f"Engine({self.kind.name}, num_threads={self.num_threads})"


_shared: dict = {}  # num_threads -> Engine: Engine.shared's
_shared_lock = threading.Lock()
_parents: list = []  # in a forked child: the parent's shared engines, kept (see below)


def _forget_shared_in_child() -> None:
    # A forked child has the parent's pools but none of their threads: computing on them would wait
    # forever, so the child makes its own. The parent's are kept, not freed: this runs inside fork
    # (subprocess's preexec_fn too), where no destructor should run.
    global _shared_lock
    _shared_lock = threading.Lock()
    _parents.extend(_shared.values())
    _shared.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_shared_in_child)


class Stream:
    """Executions are synchronous: a stream only records the engine."""

    def __init__(self, engine: Engine):
        if not isinstance(engine, Engine):
            raise TypeError(f"Stream needs an Engine, got {engine!r}")
        self.engine = engine

    def wait(self) -> None:
        """Nothing is in flight once execute() returns."""


SPLIT_RULES = {"layer": 0, "memory": 1}


PLACEMENTS = ("auto", "strict")


def split_devices(engines, split, shares, placement="auto"):
    """(rule code, shares per device, strict placement) for a partition on ``engines``, or None
    for the host CPU path; ``split``, ``shares`` and ``placement`` are those of ``Partition.compile``."""
    if split not in SPLIT_RULES:
        raise CompileError(f"split must be one of {sorted(SPLIT_RULES)}, got {split!r}")
    if not isinstance(placement, str) or placement not in PLACEMENTS:
        raise CompileError(f"placement must be one of {list(PLACEMENTS)}, got {placement!r}")
    n = sum(e.num_devices for e in engines)
    if len(engines) == 1 and engines[0].kind is EngineKind.CPU:
        if shares is not None:
            raise CompileError("shares split a partition over several devices; a CPU engine is one")
        return None
    if len(set(map(id, engines))) != len(engines):
        raise CompileError("an engine is listed twice")
    if shares is None:
        shares = [1.0] * n
    shares = list(shares)
    if len(shares) != n or not all(
        isinstance(s, (int, float)) and not isinstance(s, bool) and s > 0 and s < float("inf") for s in shares
    ):
        raise CompileError(f"shares must be {n} positive numbers (one per device: "
                           f"{[d for e in engines for d in e.device_names]}), got {shares!r}")
    return SPLIT_RULES[split], [float(s) for s in shares], placement == "strict"
