"""oneDNN's own graph cases, run through dyngraph: the conformance report.

    python tests/onednn/conformance.py [--markdown] [--jobs N] [--json FILE] [--own-size]
    python tests/onednn/conformance.py --round-trip   # to_json of every case: op for op, same values

(with DYNGRAPH_DEV=1 it uses the in-tree build, like the tests). Every JSON
case under ``../shared/onednn-graph-cases`` (beside the repository) is
imported, compiled, run at its own shapes (or the smaller ones of SMALL
below; every file at its own with --own-size) and compared with the numpy
reference, each in a worker process, so
that a crash or a hang is recorded against its case instead of taking the
run down. The outcome of a case is one of:

- ``pass``: every output matches the reference;
- ``fail``: an output differs;
- ``unsupported``: refused with an UnsupportedError naming what dyngraph lacks;
- ``error``: another typed dyngraph error;
- ``untyped``: an exception that is not a dyngraph error; ``crash``: the
  worker died; ``hang``: the case took longer than the timeout.

The table counts files by group and outcome, and refusals by the gap they
name (a file may name several), with how many files that gap alone blocks.
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import selectors
import subprocess
import sys
import time
import traceback
from typing import Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))


def _find_cases() -> str:
    """DYNGRAPH_ONEDNN_CASES, else shared/onednn-graph-cases beside the clone
    (or beside one of its parent folders, for a git worktree)."""
    env = os.environ.get("DYNGRAPH_ONEDNN_CASES")
    if env:
        return env
    d = ROOT
    while True:
        cand = os.path.join(os.path.dirname(d), "shared", "onednn-graph-cases")
        if os.path.isdir(cand) or os.path.dirname(d) == d:
            return cand if os.path.isdir(cand) else os.path.join(os.path.dirname(ROOT), "shared", "onednn-graph-cases")
        d = os.path.dirname(d)


CASES = _find_cases()

# cases too large to check quickly at their own shapes: benchdnn rewrites to smaller ones
SMALL: Dict[str, List[str]] = {
    "complex_fusion/mha/JAX-MHA-inf-fp32.json": ["--mb=1", "--op-attrs=6:shape:1x384x16x64"],
    "complex_fusion/mha/JAX-MQA-inf-fp32.json": ["--mb=1", "--op-attrs=1:shape:1x384x16x384+6:shape:1x384x6144"],
    "complex_fusion/mlp/gated-mlp-f32.json": ["--in-shapes=0:1x128+1:128x256+4:128x256+13:256x128"],
    "complex_fusion/mlp/gated-mlp-gelu-f32.json": ["--in-shapes=0:1x128+1:128x256+4:128x256+12:256x128"],
    "op/f32/static_reshape.json": ["--in-shapes=0:1024x1024", "--op-attrs=0:shape:2x512x16x64"],
    "op/f32/static_transpose.json": ["--mb=2"],
    "op/f32/concat.json": ["--mb=2"],
    "op/f32/concat_2.json": ["--in-shapes=0:1x32x50x50+1:1x32x50x50+2:1x32x50x50"],
    "op/f32/concat_3.json": ["--mb=1"],
    "pattern/f32/binary_post_ops_chain_fusion.json": ["--mb=2"],
    "pattern/f32/unary_post_ops_gelu_fusion.json": ["--mb=2"],
    "pattern/f32/unary_post_ops_log_fusion.json": ["--mb=2"],
    "pattern/f32/unary_post_ops_sqrt_fusion.json": ["--mb=2"],
    "pattern/f32/unary_post_ops_square_fusion.json": ["--mb=2"],
    "pattern/f32/unary_post_ops_tanh_fusion.json": ["--mb=2"],
    "op/f32/softmax_w_stats.json": ["--in-shapes=1:2x4x64x64"],
    "complex_fusion/mha/GQA-f32-v2.json": ["--in-shapes=1:1x2x8x64x64+3:1x2x1x64x64+11:1x1x1x1x64+19:1x2x1x64x64"],
    "complex_fusion/mha/sdpa-vit-training-fwd-no-mask-bf16-f32.json": [
        "--in-shapes=0:1x12x64x64+1:1x12x64x64+2:1x12x64x64"],
    "complex_fusion/mha/timms-sdpa-fwd-no-mask-bf16-f32.json": ["--in-shapes=0:1x12x64x64+1:1x12x64x64+5:1x12x64x64"],
    "complex_fusion/mha/torchbench-sdpa-fwd-bf16-f32.json": ["--in-shapes=0:1x6x128x64+1:1x6x128x64+5:1x6x128x64"],
    "complex_fusion/mha/hf-sdpa-fwd-w-mask-bf16-f32.json": ["--mb=1"],
    "complex_fusion/mha/torchbench-sdpa-fwd-w-mask-bf16-f32.json": [
        "--in-shapes=0:1x12x128x64+1:1x12x128x64+4:1x1x128x128+5:1x12x128x64"],
    "complex_fusion/mha/sdpa-training-fwd-no-mask-f16-f32.json": ["--in-shapes=0:1x1x256x128+1:1x1x256x128+5:1x1x256x128"],
    "complex_fusion/mlp/gated-mlp-f16-f32.json": ["--in-shapes=0:1x128+1:128x256+4:128x256+15:256x128"],
    "complex_fusion/mlp/gated-mlp-gelu-f16-f32.json": ["--in-shapes=0:1x128+1:128x256+4:128x256+13:256x128"],
    "pattern/int8/int8_concat_fusion.json": ["--in-shapes=0:2x64x28x28+2:2x64x28x28"],
    "complex_fusion/mha/GQA-f32.json": [
        "--mb=1", "--op-attrs=5:shape:1x2x8x384x64+6:shape:1x2x1x384x64+13:shape:1x1x1x1x384+21:shape:1x2x1x384x64"
                  "+24:shape:1x16x384x64"],
    "complex_fusion/mha/hf-sdpa-fwd-implicit-mask-bf16-f32.json": [
        "--in-shapes=0:1x8x2x256x128+1:1x8x1x256x128+5:1x8x1x256x128"],
    # u4 weights [K, N] in groups of 128 along N (K 4096 -> 256, N 14336 -> 512)
    "complex_fusion/mlp/gated-mlp-int4.json": [
        "--in-shapes=0:256x512+1:256x4+2:256x4+5:1x256+8:256x512+9:256x4+10:256x4+23:512x256+24:512x2+25:512x2"],
    # backward MHA blocks (plain MatMul / Exp / ReduceSum ops, no *Backward kind) at smaller batch and sequence
    "complex_fusion/mha/hf-sdpa-bwd-implicit-mask-bf16-f32.json": ["--mb=2"],
    "complex_fusion/mha/hf-sdpa-bwd-no-mask-bf16-f32.json": [
        "--in-shapes=0:1x8x256x64+1:1x8x256x64+2:1x8x256x64+3:1x8x256x64+4:1x8x256x64+5:1x8x256x1"],
    "complex_fusion/mha/hf-sdpa-bwd-w-mask-bf16-f32.json": [
        "--in-shapes=0:1x4x256x64+1:1x4x256x64+2:1x4x256x64+3:1x4x256x64+4:1x4x256x64+5:1x4x256x1+8:1x1x256x256"],
    "complex_fusion/mha/torchbench-sdpa-bwd-bf16-f32.json": [
        "--in-shapes=0:1x6x300x64+1:1x6x300x64+2:1x6x300x64+3:1x6x300x64+4:1x6x300x64+5:1x6x300x1"],
    "complex_fusion/mha/torchbench-sdpa-bwd-w-mask-bf16-f32.json": [
        "--in-shapes=0:1x4x256x64+1:1x4x256x64+2:1x4x256x64+3:1x4x256x64+4:1x4x256x64+5:1x4x256x1+8:1x1x256x256"],
}

STATUSES = ("pass", "fail", "unsupported", "error", "untyped", "crash", "hang")


def case_files() -> List[str]:
    return sorted(os.path.relpath(p, CASES) for p in glob.glob(os.path.join(CASES, "**", "*.json"), recursive=True))


def group_of(rel: str) -> str:
    parts = rel.split(os.sep)
    return "/".join(parts[:2]) if len(parts) > 2 else parts[0]


# -- a worker: one case at a time, a JSON line per result -----------------------------------
def split_options(task: dict):
    """A task's options: (``--dynamic`` and ``--shapes``, benchdnn's rewrites), by name."""
    values, choice = {}, {}
    for opt in task.get("options", []):
        name, _, value = opt.partition("=")
        (values if name in ("--dynamic", "--shapes") else choice)[name] = value
    return values, choice


def run_task(task: dict) -> dict:
    if task.get("round_trip"):
        return round_trip_task(task)
    import dyngraph as dg
    from dyngraph.cli.run import overrides_for
    from dyngraph.engine import Engine
    from dyngraph.onednn.options import parse_bindings
    from dyngraph.onednn.reader import import_graph
    from dyngraph.onednn.runner import run_case

    out = {"case": task["case"], "features": [], "decomposed": [], "runs": 0, "graphs_built": 0}
    try:
        values, choice = split_options(task)
        imp = import_graph(os.path.join(CASES, task["case"]), overrides_for(values, choice))
        out["decomposed"] = sorted(set(imp.decomposed))
        bindings = [parse_bindings(b) for b in values.get("--shapes", "").split("+") if b]
        res = run_case(imp, bindings, engine=Engine(num_threads=1), max_bytes=task.get("max_bytes", 1 << 30))
        out.update(status=res.status, message=res.message, features=list(res.features), runs=len(res.runs),
                   graphs_built=res.graphs_built, partitions=res.partitions)
    except dg.UnsupportedError as e:
        out.update(status="unsupported", message=str(e), features=list(e.features))
    except dg.DyngraphError as e:
        out.update(status="error", message=f"{type(e).__name__}: {e}")
    except Exception as e:  # noqa: BLE001 - what the conformance run exists to find
        out.update(status="untyped", message=f"{type(e).__name__}: {e}\n{traceback.format_exc()}")
    return out


def round_trip_task(task: dict) -> dict:
    """A case read, written back with to_json and read again: ``same`` when the
    file is written back op for op (with rewrites: the written file again) and,
    where dyngraph runs it, both graphs compute the same values bit for bit."""
    import dyngraph as dg
    from dyngraph.cli.run import overrides_for
    from dyngraph.onednn.options import parse_bindings

    if os.path.dirname(HERE) not in sys.path:  # (a worker runs this file as a script)
        sys.path.insert(0, os.path.dirname(HERE))
    from onednn.roundtrip import check_case

    out = {"case": task["case"], "options": task.get("options", []), "ran": False}
    try:
        values, choice = split_options(task)
        ov = overrides_for(values, choice) if task.get("options") else None
        bindings = [parse_bindings(b) for b in values.get("--shapes", "").split("+") if b]
        r = check_case(os.path.join(CASES, task["case"]), ov, bindings, task.get("max_bytes", 1 << 30))
        problems = r["written"] + r["results"]
        out.update(status="differs" if problems else "same", ran=r["ran"], message="; ".join(problems)[:2000])
    except dg.DyngraphError as e:
        out.update(status="error", message=f"{type(e).__name__}: {e}")
    except Exception as e:  # noqa: BLE001
        out.update(status="untyped", message=f"{type(e).__name__}: {e}\n{traceback.format_exc()}")
    return out


def round_trip_report(results: List[dict]) -> str:
    plain = [r for r in results if not r.get("options")]
    counts = collections.Counter(r["status"] for r in results)
    ran = [r for r in results if r.get("ran")]
    lines = [f"written back op for op: {sum(r['status'] == 'same' for r in plain)} of {len(plain)} files "
             f"as they are, {sum(r['status'] == 'same' for r in results if r.get('options'))} of "
             f"{len(results) - len(plain)} with benchdnn's rewrites or dynamic dims",
             f"the graph read back computes the same values, bit for bit: "
             f"{sum(r['status'] == 'same' for r in ran)} of {len(ran)} that run",
             "by outcome: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))]
    lines += [f"{r['status'].upper()}: {r['case']} {' '.join(r.get('options', []))}: {r.get('message', '')[:300]}"
              for r in results if r["status"] != "same"]
    return "\n".join(lines)


def round_trip_tasks(max_bytes: int = 1 << 30) -> List[dict]:
    """Every file as it is; the large ones at smaller shapes; the dynamic variants."""
    plain = [{"case": c, "options": [], "max_bytes": max_bytes, "round_trip": True} for c in case_files()]
    return plain + [dict(t, round_trip=True) for t in conformance_tasks(max_bytes) + dynamic_tasks(max_bytes)
                    if t["options"]]


def worker() -> None:
    for line in sys.stdin:
        task = json.loads(line)
        print(json.dumps(run_task(task)), flush=True)


# -- the pool: worker processes, restarted when one dies or hangs ---------------------------------
class _Worker:
    def __init__(self):
        env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", DYNGRAPH_NUM_THREADS="1")
        if os.environ.get("DYNGRAPH_DEV") == "1":
            env["PYTHONPATH"] = os.path.join(ROOT, "api") + os.pathsep + env.get("PYTHONPATH", "")
        self.proc = subprocess.Popen([sys.executable, __file__, "--worker"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, bufsize=1)
        self.task: Optional[dict] = None
        self.started = 0.0

    def send(self, task: dict) -> None:
        self.task, self.started = task, time.monotonic()
        self.proc.stdin.write(json.dumps(task) + "\n")
        self.proc.stdin.flush()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def run_all(tasks: List[dict], jobs: int = 2, timeout: float = 300.0) -> List[dict]:
    pending = list(tasks)
    results: List[dict] = []
    sel = selectors.DefaultSelector()
    workers = []
    for _ in range(max(1, min(jobs, len(tasks)))):
        w = _Worker()
        workers.append(w)
        sel.register(w.proc.stdout, selectors.EVENT_READ, w)
        if pending:
            w.send(pending.pop(0))
    while any(w.task is not None for w in workers):
        for key, _ in sel.select(timeout=1.0):
            w = key.data
            line = w.proc.stdout.readline()
            if line:
                results.append(json.loads(line))
                w.task = None
                if pending:
                    w.send(pending.pop(0))
                continue
            # the worker died: its case crashed it; start another for the rest
            sel.unregister(w.proc.stdout)
            w.stop()
            results.append({"case": w.task["case"], "status": "crash", "features": [], "decomposed": [],
                            "message": f"the worker exited with status {w.proc.returncode}"})
            workers.remove(w)
            nw = _Worker()
            workers.append(nw)
            sel.register(nw.proc.stdout, selectors.EVENT_READ, nw)
            if pending:
                nw.send(pending.pop(0))
        now = time.monotonic()
        for w in list(workers):
            if w.task is not None and now - w.started > timeout:
                sel.unregister(w.proc.stdout)
                w.stop()
                results.append({"case": w.task["case"], "status": "hang", "features": [], "decomposed": [],
                                "message": f"no result after {timeout:.0f} s"})
                workers.remove(w)
                nw = _Worker()
                workers.append(nw)
                sel.register(nw.proc.stdout, selectors.EVENT_READ, nw)
                if pending:
                    nw.send(pending.pop(0))
    for w in workers:
        w.proc.stdin.close()
        w.stop()
    return sorted(results, key=lambda r: r["case"])


# what a case's reference may hold at once at its own shapes (--own-size): the largest
# forward files need about 3.5 GiB by the runner's estimate (7 GB resident with the backend's)
OWN_SIZE_MAX_BYTES = 8 << 30


def conformance_tasks(max_bytes: int = 1 << 30, own_size: bool = False) -> List[dict]:
    """One task per file: at the smaller shapes of SMALL, or every file at its own (``own_size``)."""
    if own_size:
        return [{"case": c, "options": [], "max_bytes": max(max_bytes, OWN_SIZE_MAX_BYTES)} for c in case_files()]
    return [{"case": c, "options": SMALL.get(c, []), "max_bytes": max_bytes} for c in case_files()]


# the MHA and gated-MLP cases with batch and sequence dims dynamic, each run at
# three sizes through one compiled partition: (options, bindings)
_B3 = "b=1,s=7+b=2,s=33+b=3,s=64"
DYNAMIC: Dict[str, List[str]] = {
    "complex_fusion/mha/MHA-bert_large-inf-fp32-bs1.json":
        ["--dynamic=3:0:b+4:0:b+0:0:b+3:2:s+4:3:s+1:3:s+0:2:s", f"--shapes={_B3}"],
    "complex_fusion/mha/MHA-distill_bert-inf-fp32-bs1.json":
        ["--dynamic=4:0:b+5:0:b+0:0:b+4:2:s+5:3:s+1:3:s+0:2:s", f"--shapes={_B3}"],
    "complex_fusion/mha/MHA-GPT-inf-fp32-bs1.json":
        ["--dynamic=4:0:b+5:0:b+0:0:b+4:2:q+3:2:q+5:3:kv+3:3:kv+1:3:kv+0:2:kv",
         "--shapes=b=1,q=1,kv=9+b=2,q=16,kv=33+b=3,q=32,kv=64"],
    "complex_fusion/mha/MHA-stable_diffusion-inf-fp32-bs1.json":
        ["--dynamic=0:0:b+1:0:b+2:0:b+0:2:q+1:2:kv+2:2:kv", "--shapes=b=1,q=7,kv=9+b=2,q=64,kv=77+b=3,q=100,kv=5"],
    "complex_fusion/mha/sdpa-plain-implicit-causal-mask-fp32-bs1.json":
        ["--dynamic=1:0:b+2:0:b+3:0:b+1:2:s+2:2:s+3:2:s", f"--shapes={_B3}"],
    "complex_fusion/mha/sdpa-plain-simplified-f32.json":
        ["--dynamic=0:0:b+1:0:b+8:0:b+0:2:s+1:2:s+8:2:s+5:2:s+5:3:s", f"--shapes={_B3}"],
    "complex_fusion/mha/JAX-MHA-inf-fp32.json":
        ["--dynamic=1:0:b+2:0:b+0:0:b+7:0:b+1:2:s+2:3:s+0:3:s+7:3:s", f"--shapes={_B3}"],
    "complex_fusion/mha/JAX-MQA-inf-fp32.json":  # its key length is folded into 6144 = 16 heads x 384
        ["--dynamic=1:0:b+2:0:b+6:0:b+11:0:b+1:1:q+6:2:q+11:2:q", "--shapes=b=1,q=7+b=2,q=33+b=3,q=64"],
    "complex_fusion/mha/sdpa-plain-training-backward-f32.json":
        ["--dynamic=100:0:b+101:0:b+103:0:b+8:0:b+105:0:b+104:0:b+10:0:b"
         "+100:2:s+101:2:s+103:2:s+103:3:s+8:2:s+105:2:s+104:2:s+10:2:s", f"--shapes={_B3}"],
    "complex_fusion/mlp/gated-mlp-f32.json":
        ["--in-shapes=0:1x128+1:128x256+4:128x256+13:256x128", "--dynamic=0:0:b", "--shapes=b=1+b=7+b=32"],
    "complex_fusion/mlp/gated-mlp-gelu-f32.json":
        ["--in-shapes=0:1x128+1:128x256+4:128x256+12:256x128", "--dynamic=0:0:b", "--shapes=b=1+b=7+b=32"],
    "complex_fusion/mlp/gated-mlp-int4.json":  # u4 weights, f16 scales and u8 zero points per group of 128
        SMALL["complex_fusion/mlp/gated-mlp-int4.json"] + ["--dynamic=5:0:b", "--shapes=b=1+b=7+b=32"],
}


def dynamic_tasks(max_bytes: int = 1 << 30) -> List[dict]:
    return [{"case": c, "options": opts, "max_bytes": max_bytes} for c, opts in DYNAMIC.items()]


# -- the table --------------------------------------------------------------------------------
_QUANT_DTYPES = ("dtype s8", "dtype u8", "dtype s4", "dtype u4", "dtype f8_e5m2", "dtype f8_e4m3")
_CONV_KINDS = ("Convolution", "ConvTranspose", "AvgPool", "MaxPool", "BatchNormInference", "GroupNorm",
               "Interpolate")


def family(feature: str) -> str:
    """The kind of gap a refusal names (what one piece of work would close)."""
    if "(quantization)" in feature or feature in _QUANT_DTYPES:
        return "quantization (s8/u8/s4/u4/f8, Quantize, Dequantize)"
    if "(training)" in feature:
        return "training ops (backward)"
    if feature.startswith("op kind ") and feature.split()[2] in _CONV_KINDS:
        return "convolution, pooling, batch/group norm, interpolate"
    if feature.startswith("mixed precision"):
        return "mixed precision (bf16/f16 in, f32 out)"
    if feature.startswith(("SoftMax output", "LayerNorm output", "LayerNorm keep_stats")):
        return "stats outputs (SoftMax stats, LayerNorm mean/variance)"
    if feature.startswith("rank "):
        return "a rank the op does not take"
    if feature.startswith("op kind "):
        return "other op kinds (Dropout, ...)"
    return feature


def table(results: List[dict], markdown: bool = False) -> str:
    groups = collections.OrderedDict()
    for r in results:
        g = groups.setdefault(group_of(r["case"]), collections.Counter())
        g[r["status"]] += 1
    cols = ["files"] + [s for s in STATUSES if any(g[s] for g in groups.values())]
    rows = [[name, str(sum(g.values()))] + [str(g[s]) for s in cols[1:]] for name, g in groups.items()]
    tot = collections.Counter(r["status"] for r in results)
    rows.append(["all", str(len(results))] + [str(tot[s]) for s in cols[1:]])
    out = [_grid(["group"] + cols, rows, markdown), ""]
    by = collections.Counter(f for r in results if r["status"] == "unsupported" for f in set(r["features"]))
    alone = collections.Counter(r["features"][0] for r in results
                                if r["status"] == "unsupported" and len(set(r["features"])) == 1)
    fam = collections.Counter(x for r in results if r["status"] == "unsupported" for x in {family(f) for f in r["features"]})
    fam_alone = collections.Counter(next(iter({family(f) for f in r["features"]})) for r in results
                                    if r["status"] == "unsupported" and len({family(f) for f in r["features"]}) == 1)
    frows = [[f, str(n), str(fam_alone[f])] for f, n in sorted(fam.items(), key=lambda kv: (-kv[1], kv[0]))]
    out.append(_grid(["refused for (kind of gap)", "files", "files only it blocks"], frows, markdown))
    out.append("")
    rrows = [[f, str(n), str(alone[f])] for f, n in sorted(by.items(), key=lambda kv: (-kv[1], kv[0]))]
    out.append(_grid(["refused for", "files", "files only it blocks"], rrows, markdown))
    dec = collections.Counter(d for r in results if r["status"] == "pass" for d in r.get("decomposed", []))
    if dec:
        out.append("")
        out += [f"passing through an exact multi-op form of {d}: {n} files" for d, n in dec.items()]
    other = [r for r in results if r["status"] not in ("pass", "unsupported")]
    if other:
        out.append("")
        out += [f"{r['status'].upper()}: {r['case']}: {r['message'][:300]}" for r in other]
    return "\n".join(out)


def _grid(head: List[str], rows: List[List[str]], markdown: bool) -> str:
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])
    w = [max(len(x[i]) for x in [head] + rows) for i in range(len(head))]
    fmt = "  ".join("{:<%d}" % w[0:1][0] if i == 0 else "{:>%d}" % w[i] for i in range(len(head)))
    return "\n".join([fmt.format(*head), "  ".join("-" * x for x in w)] + [fmt.format(*r) for r in rows])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--json", help="also write every case's result to this file")
    ap.add_argument("--round-trip", action="store_true",
                    help="instead: write every case back with to_json, compare op for op, run both graphs")
    ap.add_argument("--own-size", action="store_true",
                    help="run every file at its own shapes, SMALL's too (up to about 7 GiB a worker)")
    args = ap.parse_args()
    if args.worker:
        worker()
        return 0
    if not os.path.isdir(CASES):
        print(f"no cases at {CASES}", file=sys.stderr)
        return 2
    t0 = time.time()
    if args.round_trip:
        results = run_all(round_trip_tasks(), args.jobs)
        print(round_trip_report(results))
        print(f"\n{len(results)} round trips in {time.time() - t0:.0f} s")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=1)
        return 0 if all(r["status"] == "same" for r in results) else 1
    results = run_all(conformance_tasks(own_size=args.own_size), args.jobs)
    print(table(results, args.markdown))
    print(f"\n{len(results)} files in {time.time() - t0:.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0 if all(r["status"] in ("pass", "unsupported") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
