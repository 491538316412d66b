"""Side-by-side timing: every round calls each case once, in a fresh random
order (so no case always follows the same neighbour, whose memory traffic it
would inherit), timed with time.perf_counter_ns; compare medians."""

from __future__ import annotations

import gc
import random
import statistics
import time
from typing import Callable, Dict, List


def interleaved(fns: Dict[str, Callable[[], object]], rounds: int, warmup: int = 3,
                max_seconds: float = 60.0, after: Callable[[str], None] = None) -> Dict[str, List[int]]:
    """ns per call of every case, ``rounds`` times (fewer if ``max_seconds`` runs out).
    ``after(name)``, if given, runs untimed after each call."""
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
