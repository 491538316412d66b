"""llama.cpp's own speed on SmolLM2-135M, for comparison with dyngraph.

    python tests/benchmarks/llama_cpp_baseline.py --llama-bench [LABEL=]PATH[,...] --gguf-dir DIR
        [--types F32,F16,Q8_0,Q4_0] [--threads 1,2] [--reps 5] [--passes 2] [--pause 30]

(or set LLAMA_BENCH and SMOLLM2_GGUF_DIR). Several llama-bench binaries (say
one built with -march=native and one with AVX2 only) may be given, separated
by commas; each pass runs all of them, so they are compared side by side. It builds nothing: see README.md
in this folder for how to build llama-bench and make the GGUF files. It is a
plain script, not a test: pytest does not collect it and CI does not run it.

For every weight type it runs `llama-bench -p 32 -n 32` at each thread count,
with flash attention off and on and with weight repacking off and on (where
this llama-bench has those flags), `--reps` repetitions each. The whole set is
run `--passes` times, `--pause` seconds apart, binaries and weight types in a
fresh random order each pass, since the machine is shared and noisy. The table gives
tokens/s: the median over every repetition of every pass, and the median of
each pass, so a pass disturbed by other work shows; the load average before
each pass is printed too.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from collections import defaultdict

MODEL_GLOB = "*{type}.gguf"


def find_models(gguf_dir: str, types: list[str]) -> dict[str, str]:
    models = {}
    for t in types:
        hits = sorted(glob.glob(os.path.join(gguf_dir, MODEL_GLOB.format(type=t))))
        if not hits:
            sys.exit(f"no file matching {MODEL_GLOB.format(type=t)} in {gguf_dir}")
        models[t] = hits[0]
    return models


def bench_flags(llama_bench: str) -> dict[str, str]:
    """The values of the optional dimensions this llama-bench understands."""
    text = subprocess.run([llama_bench, "--help"], check=False, capture_output=True, text=True).stdout
    flags = {}
    if "--flash-attn <on|off" in text:
        flags["-fa"] = "off,on"
    elif "--flash-attn" in text:
        flags["-fa"] = "0,1"
    if "--repack" in text:
        flags["--repack"] = "0,1"
    return flags


def version(llama_bench: str) -> str:
    p = subprocess.run([llama_bench, "--version"], check=False, capture_output=True, text=True)
    return (p.stdout + p.stderr).strip()


def parse_binaries(spec: str) -> dict[str, str]:
    """'a=/x/bin/llama-bench,/y/bin/llama-bench' -> {'a': ..., 'y': ...} (default label: the build folder)."""
    out = {}
    for item in spec.split(","):
        label, _, path = item.rpartition("=")
        if not label:
            d = os.path.dirname(os.path.abspath(path))
            label = os.path.basename(os.path.dirname(d) if os.path.basename(d) == "bin" else d)
        if not os.access(path, os.X_OK):
            sys.exit(f"not an executable: {path}")
        out[label] = path
    return out


def run_one(llama_bench: str, model: str, threads: str, reps: int, flags: dict[str, str]) -> list[dict]:
    cmd = [llama_bench, "-m", model, "-p", "32", "-n", "32", "-t", threads, "-r", str(reps), "-o", "jsonl"]
    for k, v in flags.items():
        cmd += [k, v]
    print("  $", " ".join(cmd), file=sys.stderr, flush=True)
    p = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"llama-bench failed ({p.returncode}):\n{p.stderr[-4000:]}")
    return [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]


def on_off(v) -> str:
    if v is None:
        return "-"
    return {"0": "off", "1": "on", "false": "off", "true": "on"}.get(str(v).lower(), str(v))


def key_of(r: dict, build: str, wtype: str) -> tuple:
    test = f"pp{r['n_prompt']}" if r["n_prompt"] else f"tg{r['n_gen']}"
    return (build, wtype, r["n_threads"], on_off(r.get("flash_attn")), on_off(r.get("repack")), test)


def cpu_times() -> tuple[int, int] | None:
    """(total, steal) jiffies of all CPUs, where /proc/stat exists."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except OSError:
        return None
    return sum(v[:8]), v[7] if len(v) > 7 else 0


def measure(args, binaries: dict[str, str], models: dict[str, str], samples: dict, passes: list) -> dict:
    flags = {b: bench_flags(path) for b, path in binaries.items()}
    info: dict[str, dict] = {}
    for pass_no in range(args.passes):
        if pass_no:
            time.sleep(args.pause)
        load, t0, c0 = os.getloadavg(), time.strftime("%Y-%m-%d %H:%M:%S"), cpu_times()
        print(f"pass {pass_no + 1}/{args.passes} at {t0}, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
              flush=True)
        # one llama-bench run per binary, weight type and thread count, in a random order
        order = [(b, t, n) for b in binaries for t in models for n in args.threads.split(",")]
        random.shuffle(order)
        for b, t, n in order:
            for r in run_one(binaries[b], models[t], n, args.reps, flags[b]):
                samples[key_of(r, b, t)].append(r["samples_ts"])
                info[b] = {k: r.get(k) for k in ("build_commit", "build_number", "cpu_info", "backends")}
        c1 = cpu_times()
        steal = 100.0 * (c1[1] - c0[1]) / max(1, c1[0] - c0[0]) if c0 and c1 else float("nan")
        passes.append({"start": t0, "loadavg": load, "steal_percent": steal})
        print(f"  done at {time.strftime('%H:%M:%S')}, CPU time stolen by the host: {steal:.1f}%", flush=True)
    return info


def print_table(samples: dict, types: list[str], builds: list[str]) -> None:
    print("tokens/s: median over all repetitions of all passes [median of each pass]\n")
    cols = sorted({k[-1] for k in samples}, key=lambda s: (s[:2] != "pp", s))
    print("| build | type | threads | fa | repack | " + " | ".join(cols) + " |")
    print("|---|---|---|---|---|" + "---|" * len(cols))
    rows = sorted({k[:-1] for k in samples}, key=lambda k: (types.index(k[1]), k[2], k[3], k[4], builds.index(k[0])))
    for row in rows:
        cells = []
        for c in cols:
            per_pass = samples.get((*row, c), [])
            if not per_pass:
                cells.append("")
                continue
            allv = [v for p in per_pass for v in p]
            cells.append(f"{statistics.median(allv):.1f} [" +
                         " ".join(f"{statistics.median(p):.1f}" for p in per_pass) + "]")
        print("| " + " | ".join(str(x) for x in row) + " | " + " | ".join(cells) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llama-bench", default=os.environ.get("LLAMA_BENCH"))
    ap.add_argument("--gguf-dir", default=os.environ.get("SMOLLM2_GGUF_DIR"))
    ap.add_argument("--types", default="F32,F16,Q8_0,Q4_0")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--pause", type=float, default=30.0, help="seconds between passes")
    ap.add_argument("--json", help="also write every repetition's tokens/s to this file")
    ap.add_argument("--from-json", help="measure nothing: print the table of these --json files (comma-separated)")
    args = ap.parse_args()

    samples: dict[tuple, list[list[float]]] = defaultdict(list)  # key -> one list per pass
    passes: list[dict] = []
    if args.from_json:
        for path in args.from_json.split(","):
            with open(path) as f:
                d = json.load(f)
            for s in d["samples"]:
                samples[tuple(s["key"])] += s["passes"]
            passes += d.get("passes", [])
            for b, i in d["info"].items():
                print(f"{path}: {b}: {i}")
        for p in passes:
            print(f"pass at {p['start']}: load average {' '.join(f'{x:.2f}' for x in p['loadavg'])}, "
                  f"stolen {p['steal_percent']:.1f}%")
        builds = list(dict.fromkeys(k[0] for k in samples))
        types = [t for t in args.types.split(",") if any(k[1] == t for k in samples)]
        print_table(samples, types, builds)
        return
    if not args.llama_bench or not args.gguf_dir:
        ap.error("give --llama-bench and --gguf-dir (or LLAMA_BENCH and SMOLLM2_GGUF_DIR)")

    types = args.types.split(",")
    models = find_models(args.gguf_dir, types)
    binaries = parse_binaries(args.llama_bench)
    for b, path in binaries.items():
        print(f"{b}: {path}\n  " + version(path).replace("\n", "\n  "))
    print(f"host: {platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs")
    info = measure(args, binaries, models, samples, passes)
    for b, i in info.items():
        print(f"{b}: {i}")
    print_table(samples, types, list(binaries))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"info": info, "passes": passes,
                       "samples": [{"key": list(k), "passes": v} for k, v in samples.items()]}, f)


if __name__ == "__main__":
    main()
