"""Side-by-side timing: every round calls each case once, in a fresh random
order (so no case always follows the same neighbour, whose memory traffic it
would inherit), timed with time.perf_counter_ns; compare medians.

On several threads, a call that follows another framework's shares the cores
with that framework's idle workers, still spinning for their next task:
ggml's pool (dyngraph's engines) spins about 200 ms after a call, PyTorch's
OpenMP pool about 10 ms. Interleaved call by call on 2 cores, PyTorch's
2-thread MLP at batch 1 took 7.3 ms and dyngraph's 3.7 ms, against 0.16 and
0.09 ms each run alone. A spin counts pause instructions, not time: a
spinner sharing its core with the next case's threads spins longer (ggml's
took well over 0.25 s then). So with ``settle``, each timed call first waits,
asleep, until the process's threads are idle (wait_idle: every pool done
spinning), then runs its case untimed for ``settle`` seconds (its own pool
and caches warm, as for a user calling it over and over), so each timed call
meets the machine as a user running one framework would."""

from __future__ import annotations

import gc
import random
import statistics
import time
from typing import Callable, Dict, List

SETTLE_THREADS = 0.1  # seconds: interleaved(settle=...) for cases on more than one thread


def wait_idle(max_wait: float = 3.0, window: float = 0.02, busy: float = 0.05) -> float:
    """Sleep until this process's threads use less than ``busy`` of a core over ``window`` seconds
    (at most ``max_wait``); the seconds waited."""
    t0 = time.perf_counter()
    c0 = time.process_time()
    while time.perf_counter() - t0 < max_wait:
        time.sleep(window)
        c1 = time.process_time()
        if c1 - c0 < busy * window:
            break
        c0 = c1
    return time.perf_counter() - t0


def interleaved(fns: Dict[str, Callable[[], object]], rounds: int, warmup: int = 3,
                max_seconds: float = 60.0, after: Callable[[str], None] = None,
                settle: float = 0.0) -> Dict[str, List[int]]:
    """ns per call of every case, ``rounds`` times (fewer if ``max_seconds`` runs out).
    ``after(name)``, if given, runs untimed after each call; ``settle`` (seconds): before each timed call,
    wait_idle(), then untimed calls of the same case until that much time has passed (at least one)."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    samples: Dict[str, List[int]] = {name: [] for name in fns}
    order = list(fns)
    shuffle = random.Random(0).shuffle
    clock = time.perf_counter_ns
    t_end = time.perf_counter() + max_seconds
    gc.collect()
    gc.disable()
    try:
        for _ in range(rounds):
            shuffle(order)
            for name in order:
                fn = fns[name]
                if settle > 0:
                    wait_idle()
                    t_settle = time.perf_counter() + settle
                    fn()
                    while time.perf_counter() < t_settle:
                        fn()
                t0 = clock()
                fn()
                samples[name].append(clock() - t0)
                if after is not None:
                    after(name)
            if time.perf_counter() > t_end:
                break
    finally:
        gc.enable()
    return samples


def median(v) -> float:
    return float(statistics.median(v))


def fmt(ns: float) -> str:
    if ns >= 1e9:
        return f"{ns / 1e9:.2f} s"
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e3:.1f} us"
