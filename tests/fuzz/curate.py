"""Keep one input per finding class: the smallest.

    python -m tests.fuzz.curate SRC_DIR [DEST_DIR]

Copies, for each signature found in SRC_DIR (a fuzz run's --crash-dir) that
DEST_DIR (default tests/fuzz/corpus/crashes) does not have yet, its smallest
input and record. The regression test then replays each of them.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import sys

from . import classify
from .fuzzer import DEFAULT_CRASH_DIR


def records(d: str):
    for p in sorted(glob.glob(os.path.join(d, "*.json"))):
        with open(p) as f:
            rec = json.load(f)
        ir_path = os.path.join(d, rec["ir"])
        if os.path.exists(ir_path):
            yield p, ir_path, rec


def curate(src: str, dest: str) -> int:
    have = {rec["signature"] for _, _, rec in records(dest)} if os.path.isdir(dest) else set()
    best = {}
    for p, ir_path, rec in records(src):
        if rec["outcome"] in ("hang", "oom"):  # older runs put the time limit in the detail
            rec["detail"] = "no result within the time limit" if rec["outcome"] == "hang" else "RSS over the memory limit"
        elif rec["outcome"].startswith("untyped") and ": " in rec["detail"]:  # older runs: "where: message"
            rec["detail"], rec["message"] = rec["detail"].split(": ", 1)
        elif rec["outcome"] not in ("asan", "ubsan") and not rec["outcome"].startswith("untyped"):
            rec["detail"] = classify.crash_detail(rec.get("stderr_tail", "")) or rec["detail"]
        rec["signature"] = classify.signature(rec["outcome"], rec["phase"], rec["detail"])
        size = os.path.getsize(ir_path)
        sig = rec["signature"]
        if sig not in have and (sig not in best or size < best[sig][0]):
            best[sig] = (size, p, ir_path, rec)
    os.makedirs(dest, exist_ok=True)
    for sig, (size, p, ir_path, rec) in sorted(best.items()):
        rec["stderr_tail"] = rec.get("stderr_tail", "")[-1500:]
        shutil.copy(ir_path, os.path.join(dest, rec["ir"]))
        with open(os.path.join(dest, os.path.basename(p)), "w") as f:
            json.dump(rec, f, indent=1)
        print(f"{size:8d} B  {sig}")
    return len(best)


if __name__ == "__main__":
    n = curate(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else DEFAULT_CRASH_DIR)
    print(f"{n} new classes")
