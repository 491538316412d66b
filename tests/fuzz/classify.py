"""Turning how an input ended into a finding class (a stable signature)."""

from __future__ import annotations

import os
import re
import signal
from typing import Optional

_NUM = re.compile(r"(0x[0-9a-fA-F]+|-?\d+)")


def normalize(s: str) -> str:
    return _NUM.sub("N", s).strip()[:200]


def _basename_paths(s: str) -> str:
    return re.sub(r"(/[^\s:()]+/)([^/\s:()]+)", r"\2", s)


def crash_detail(stderr: str) -> str:
    """The most telling line of a dead worker's stderr tail."""
    lines = stderr.splitlines()
    for ln in lines:  # ggml's own abort message says more than the signal it raises
        m = re.search(r"GGML_ASSERT\((.*)\) failed", ln)
        if m:
            return f"GGML_ASSERT({m.group(1)})"
    for ln in lines:
        m = re.search(r"SUMMARY: (AddressSanitizer|UndefinedBehaviorSanitizer|LeakSanitizer): (.*)", ln)
        if m:
            s = _basename_paths(m.group(2))
            s = re.sub(r":\d+(:\d+)?", "", s)
            return f"{m.group(1)}: {s}"
    for i, ln in enumerate(lines):
        m = re.search(r"([\w./-]+):\d+:\d+: runtime error: (.*)", ln)
        if m:
            # the function of the first frame tells two faults of one file apart (line numbers move with edits)
            fn = next((f.group(1) for f in (re.search(r"#0 0x[0-9a-f]+ in ([\w:~<>]+)", x) for x in lines[i + 1:i + 3])
                       if f), "")
            return f"UBSan {os.path.basename(m.group(1))}{' in ' + fn if fn else ''}: {normalize(m.group(2))}"
    for ln in lines:
        m = re.search(r"GGML_ASSERT\((.*)\) failed", ln)
        if m:
            return f"GGML_ASSERT({m.group(1)})"
        m = re.search(r"ggml[\w./-]*\.(?:c|cpp|h):\d+: (.*)", ln)
        if m:
            return f"ggml abort: {normalize(m.group(1))}"
    for ln in lines:
        if "terminate called" in ln or "what():" in ln:
            return normalize(ln)
    # faulthandler: the innermost Python frame of the thread that crashed
    for i, ln in enumerate(lines):
        if ln.startswith("Fatal Python error"):
            for ln2 in lines[i + 1 :]:
                m = re.search(r'File "([^"]+)", line \d+ in (\w+)', ln2)
                if m:
                    return f"{ln.split(':', 1)[1].strip()} in {os.path.basename(m.group(1))}:{m.group(2)}"
            return ln
    return ""


def signal_name(rc: int) -> Optional[str]:
    if rc < 0:
        try:
            return signal.Signals(-rc).name
        except ValueError:
            return f"signal {-rc}"
    return None


def crash_class(rc: int, stderr: str) -> str:
    sig = signal_name(rc)
    if re.search(r"GGML_ASSERT\(.*\) failed|ggml[\w./-]*\.(?:c|cpp|h):\d+: ", stderr):
        return "abort"  # ggml refused (under ASan with handle_abort=1 too)
    if "runtime error:" in stderr:
        return "ubsan"
    m = re.search(r"SUMMARY: AddressSanitizer: (\S+)", stderr)
    if m:  # a deadly signal ASan caught is the same class as in a release build; a memory error is its own
        kind = m.group(1)
        if kind == "ABRT":
            return "abort"
        if kind in ("SEGV", "FPE", "BUS", "ILL"):
            return f"crash:SIG{kind}"
        return "asan"
    if "ERROR: AddressSanitizer" in stderr:
        return "asan"
    if sig == "SIGABRT":
        return "abort"
    if sig:
        return f"crash:{sig}"
    return f"exit:{rc}"


def signature(outcome: str, phase: Optional[str], detail: str) -> str:
    return f"{outcome}@{phase or '?'}: {detail}".strip()


def untyped_parts(outcome: str):
    """("untyped:IndexError", "ir_reader.py:_expr_nodes", message) from a harness outcome."""
    head, _, rest = outcome.partition("|")
    where, _, msg = rest.partition("|")
    return head, where, msg


def is_finding(outcome: str) -> bool:
    return not (outcome == "ok" or outcome == "oversized" or outcome.startswith("typed:"))
