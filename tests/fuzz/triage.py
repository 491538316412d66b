"""Replay saved findings and say how each ends today, with the C++ frames of
a sanitizer's stack when the sanitized build is used.

    python -m tests.fuzz.triage [--update] [DIR_OR_JSON...]                      # release build
    tools/sanitize.sh env python -m tests.fuzz.triage [--update] [DIR_OR_JSON...] # ASan+UBSan build (stacks)

--update records in each finding's fails_in whether it fails in this build
(what test_regressions marks xfail), and how it ends today.

Each line: the record, how the replay ended (ok/typed, untyped, signal,
sanitizer), and the innermost frames in dyngraph's own code (dg::...).
"""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys

from .classify import crash_class, crash_detail
from .fuzzer import DEFAULT_CRASH_DIR, ROOT, child_env


def frames(text: str, n: int = 4):
    out = []
    for ln in text.splitlines():
        m = re.match(r"\s*#\d+ 0x[0-9a-f]+ in (.+?) (/\S+)$", ln)
        if m and ("dg::" in m.group(1) or "/backend/" in m.group(2)):
            fn = re.sub(r"\(.*", "", m.group(1))
            out.append(f"{fn} ({os.path.basename(m.group(2))})")
            if len(out) >= n:
                break
    return out


def triage(path: str, timeout: float) -> str:
    env = child_env()
    if "asan" in env.get("LD_PRELOAD", ""):
        # reports to stderr, and a stack for aborts too
        env["ASAN_OPTIONS"] = "detect_leaks=0:handle_abort=1:halt_on_error=1:allocator_may_return_null=1"
        env["UBSAN_OPTIONS"] = f"halt_on_error=1:print_stacktrace=1:suppressions={ROOT}/tools/ubsan-ggml.supp"
    try:
        r = subprocess.run([sys.executable, "-m", "tests.fuzz.replay", path], cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "hang"
    if r.returncode == 0:
        return f"passes ({r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ''})"
    if r.returncode == 3:
        return r.stdout.strip().splitlines()[-1][:200]
    cls = crash_class(r.returncode, r.stderr)
    return f"{cls}: {crash_detail(r.stderr)} | " + " <- ".join(frames(r.stderr))


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    update = "--update" in sys.argv  # record in each file's fails_in whether it fails in this build
    build = "asan" if "asan" in os.environ.get("LD_PRELOAD", "") else "release"
    timeout = 30.0 if build == "release" else 90.0
    paths = []
    for a in args or [DEFAULT_CRASH_DIR]:
        paths += sorted(glob.glob(os.path.join(a, "*.json"))) if os.path.isdir(a) else [a]
    for p in paths:
        with open(p) as f:
            rec = json.load(f)
        result = triage(p, timeout)
        print(f"{os.path.basename(p)}  [{rec['signature'][:90]}]\n    -> {result}", flush=True)
        if update:
            fails = set(rec.get("fails_in", [])) - {build}
            if not result.startswith("passes"):
                fails.add(build)
            rec["fails_in"] = sorted(fails, reverse=True)
            rec.setdefault("today", {})[build] = result[:400]
            with open(p, "w") as f:
                json.dump(rec, f, indent=1)


if __name__ == "__main__":
    main()
