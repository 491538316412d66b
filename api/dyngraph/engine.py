"""Engines (where partitions run) and streams (how executions are ordered)."""

from __future__ import annotations

import enum
import os
from typing import Optional


class EngineKind(enum.Enum):
    CPU = "cpu"


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


class Engine:
    """``Engine(Engine.CPU, num_threads=None)``: the CPU backend and its thread pool."""

    Kind = EngineKind
    CPU = EngineKind.CPU

    def __init__(self, kind: EngineKind = EngineKind.CPU, num_threads: Optional[int] = None):
        if not isinstance(kind, EngineKind):
            raise ValueError(f"unknown engine kind {kind!r}")
        if num_threads is None:
            num_threads = default_num_threads()
        if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
            raise ValueError(f"num_threads must be a positive int, got {num_threads!r}")
        self.kind = kind
        self.num_threads = num_threads
        self._impl = None

    @property
    def impl(self):
        """The backend's engine (created on first use)."""
        if self._impl is None:
            from . import _backend

            self._impl = _backend.Engine(self.num_threads)
        return self._impl

    def get_kind(self) -> EngineKind:
        return self.kind

    def __repr__(self) -> str:
        return f"Engine({self.kind.name}, num_threads={self.num_threads})"


class Stream:
    """Executions on a CPU engine are synchronous: a stream only records the engine."""

    def __init__(self, engine: Engine):
        if not isinstance(engine, Engine):
            raise TypeError(f"Stream needs an Engine, got {engine!r}")
        self.engine = engine

    def wait(self) -> None:
        """Nothing is in flight once execute() returns."""
