"""Peak memory of a generation with a saved artifact, in a process of its own:

    python rss_probe.py ARTIFACT [n_prompt] [n_decode]

Loads a StaticCacheLM saved by dyngraph.torch's CompiledProgram.save (inputs:
token ids [1, seq] and positions [seq]) with dyngraph.load, prefills n_prompt tokens,
decodes n_decode greedily, and prints one JSON line: the resident set before
loading (after importing numpy and dyngraph), its peak (VmHWM), the bytes the
partition reports (constants, state, compute arena), and whether torch was
ever imported. Needs neither torch nor the model's source."""

from __future__ import annotations

import json
import sys

import numpy as np

import dyngraph as dg


def status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def main() -> None:
    path = sys.argv[1]
    n_prompt = int(sys.argv[2]) if len(sys.argv) > 2 else 32
    n_decode = int(sys.argv[3]) if len(sys.argv) > 3 else 32
    base = status_kib("VmRSS")
    cp = dg.load(path, dg.Engine(dg.Engine.CPU, num_threads=1))
    def step(tokens, positions):  # the torch program's inputs, in its order (CompiledProgram.save)
        return cp(np.asarray([tokens], np.int64), np.asarray(positions, np.int64))[0]

    prompt = list(range(100, 100 + n_prompt))
    logits = step(prompt, range(n_prompt))
    tokens = []
    for i in range(n_decode):
        tokens.append(int(logits[0, -1].argmax()))
        logits = step(tokens[-1:], [n_prompt + i])
    info = cp.cache_info()
    print(json.dumps({
        "baseline_bytes": base * 1024,
        "peak_bytes": status_kib("VmHWM") * 1024,
        "constant_bytes": info.constant_bytes,
        "state_bytes": info.state_bytes,
        "arena_bytes": info.arena_bytes,
        "metadata_bytes": info.metadata_bytes,
        "entries": info.entries,
        "torch_imported": "torch" in sys.modules,
        "tokens": tokens,
    }))


if __name__ == "__main__":
    main()
