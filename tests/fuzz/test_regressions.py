"""Every input the fuzzer ever saved, and every hand-made reproducer, replayed
in a child process: each must end in success or a typed dyngraph error,
never a crash, an abort, a hang, a sanitizer report or an untyped exception.

Cases that still fail are marked ``xfail(strict=True)`` from their record
(``fails_in``: the builds where they fail today, "release" and/or "asan"),
so the suite stays green while they are known, and fails loudly once one is
fixed: then remove the build from ``fails_in`` (or the whole record entry).
"""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CASE_DIRS = [os.path.join(HERE, "corpus", "crashes"), os.path.join(HERE, "reproducers")]


def build() -> str:
    return "asan" if "asan" in os.environ.get("LD_PRELOAD", "") else "release"


def _env(expected_to_fail: bool) -> dict:
    env = dict(os.environ)
    paths = [ROOT] + ([os.path.join(ROOT, "api")] if env.get("DYNGRAPH_DEV") == "1" else [])
    env["PYTHONPATH"] = os.pathsep.join(paths + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.setdefault("GGML_NO_BACKTRACE", "1")
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    if expected_to_fail and build() == "asan" and os.environ.get("DG_SANITIZER_EXPECTED_LOG"):
        # a case expected to fail writes its report aside, so it does not fail the sanitizer job's report check
        for var in ("ASAN_OPTIONS", "UBSAN_OPTIONS"):
            opts = re.sub(r"(^|:)log_path=[^:]*", "", env.get(var, ""))
            env[var] = f"{opts}:log_path={os.environ['DG_SANITIZER_EXPECTED_LOG']}".lstrip(":")
    return env


def _script_meta(path: str) -> dict:
    meta = {"fails_in": [], "reason": "", "timeout": 30}
    with open(path) as f:
        for line in f:
            m = re.match(r"#\s*(fails-in|reason|timeout):\s*(.*)", line)
            if m:
                key, val = m.group(1), m.group(2).strip()
                if key == "fails-in":
                    meta["fails_in"] = val.split()
                elif key == "timeout":
                    meta["timeout"] = float(val)
                else:
                    meta["reason"] = val
    return meta


def _cases():
    out = []
    for d in CASE_DIRS:
        for p in sorted(glob.glob(os.path.join(d, "*.json"))):
            with open(p) as f:
                rec = json.load(f)
            meta = {"fails_in": rec.get("fails_in", []), "reason": rec.get("reason") or rec.get("signature", ""),
                    "timeout": rec.get("timeout", 20)}
            out.append((p, "ir", meta))
        for p in sorted(glob.glob(os.path.join(d, "[a-z]*.py"))):
            out.append((p, "script", _script_meta(p)))
    params = []
    for path, kind, meta in out:
        marks = []
        if build() in meta["fails_in"]:
            marks.append(pytest.mark.xfail(strict=True, reason=meta["reason"][:300]))
        name = os.path.relpath(path, HERE)
        params.append(pytest.param(path, kind, meta, marks=marks, id=name))
    return params


@pytest.mark.parametrize("path, kind, meta", _cases())
def test_replay_ends_in_success_or_a_typed_error(path, kind, meta):
    env = _env(build() in meta["fails_in"])
    if kind == "ir":
        cmd = [sys.executable, "-m", "tests.fuzz.replay", path]
    else:  # a reproducer script, run as a module of the tests.fuzz.reproducers package
        cmd = [sys.executable, "-m", "tests.fuzz.reproducers." + os.path.basename(path)[:-3]]
    timeout = meta["timeout"] * (3 if build() == "asan" else 1)
    try:
        r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"hang: no result within {timeout:.0f} s")
    tail = (r.stdout[-1500:] + "\n" + r.stderr[-3000:]).strip()
    assert r.returncode == 0, f"exit status {r.returncode}:\n{tail}"
    assert "runtime error:" not in r.stderr and "AddressSanitizer" not in r.stderr, tail
