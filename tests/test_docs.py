"""Every ```python block of README.md and docs/**/*.md runs, and the README's set-up commands are CI's.

The blocks of one page run in order in one namespace (a page's example may go on from the one before it),
in a temporary folder (files they write go there). A block that cannot run here is preceded by the line

    <!-- docs-test: skip (why, and which test covers it instead) -->

which this file counts: at most MAX_SKIPPED in all, each with its reason. Blocks in other languages (sh,
plain output) do not run.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md"))
SKIP = re.compile(r"^<!-- docs-test: skip \((?P<why>.{20,})\) -->$")
FENCE = re.compile(r"^(?P<indent>\s*)```(?P<lang>[\w-]*)\s*$")
MAX_SKIPPED = 3


class Block:
    def __init__(self, page: Path, line: int, lang: str, code: str, skip: str | None):
        self.page, self.line, self.lang, self.code, self.skip = page, line, lang, code, skip


def blocks(page: Path):
    """The fenced code blocks of a page, with their language and skip reason (None: runs)."""
    lines = page.read_text().splitlines()
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, indent = i, m.group("indent")
        j = i + 1
        while j < len(lines) and lines[j].strip() != "```":
            j += 1
        assert j < len(lines), f"{page.name}:{start + 1}: a code block that is never closed"
        code = textwrap.dedent("\n".join(lines[start + 1:j]))
        prev = lines[start - 1].strip() if start else ""
        s = SKIP.match(prev)
        if prev.startswith("<!-- docs-test") and not s:
            raise AssertionError(f"{page.name}:{start}: a docs-test marker must read "
                                 f"'<!-- docs-test: skip (a reason of 20 characters or more) -->'")
        out.append(Block(page, start + 1, m.group("lang"), code, s.group("why") if s else None))
        i = j + 1
    return out


def _python(page):
    return [b for b in blocks(page) if b.lang == "python"]


def test_the_pages_have_python_examples_and_few_skipped():
    every = [b for p in PAGES for b in _python(p)]
    skipped = [f"{b.page.relative_to(ROOT)}:{b.line}: {b.skip}" for b in every if b.skip]
    assert len(every) >= 12, len(every)
    assert len(skipped) <= MAX_SKIPPED, "too many python blocks skipped:\n" + "\n".join(skipped)
    print("skipped python blocks:\n" + "\n".join(skipped))


@pytest.mark.parametrize("page", [p for p in PAGES if any(not b.skip for b in _python(p))],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_the_python_blocks_of_a_page_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__docs__"}
    for b in _python(page):
        if b.skip:
            continue
        try:
            exec(compile(b.code, f"{page.relative_to(ROOT)}:{b.line}", "exec"), namespace)
        except Exception as e:
            raise AssertionError(f"{page.relative_to(ROOT)}, the block at line {b.line} fails: "
                                 f"{type(e).__name__}: {e}") from e


def test_the_readme_set_up_commands_are_what_ci_runs():
    """The two commands a newcomer copies from README.md: each of their steps is a step of .ci/run."""
    readme = (ROOT / "README.md").read_text()
    setup = readme[readme.index("## Set up"):readme.index("\n## ", readme.index("## Set up") + 1)]
    commands = [b.code.strip() for b in blocks(ROOT / "README.md") if b.lang == "sh" and b.code.strip() in setup]
    assert len(commands) == 2, commands
    ci = (ROOT / ".ci" / "run").read_text()
    assert "pytest" in commands[1] and "examples/" in commands[0]
    assert commands[1] in ci  # the test command, whole
    for step in (s.strip() for s in commands[0].split("&&")):
        assert step in ci or step == "python3 -m venv .venv" and "python3 -m venv .venv" in ci, step


def test_the_extractor_reads_markers_and_indented_blocks(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("text\n\n  ```python\n  x = 1\n  ```\n"
                    "<!-- docs-test: skip (needs a server that the tests cannot start) -->\n```python\nboom\n```\n"
                    "```sh\nls\n```\n")
    bs = blocks(page)
    assert [(b.lang, b.code, b.skip) for b in bs] == [
        ("python", "x = 1", None), ("python", "boom", "needs a server that the tests cannot start"), ("sh", "ls", None)]
    page.write_text("<!-- docs-test: skip (short) -->\n```python\nx\n```\n")
    with pytest.raises(AssertionError, match="marker must read"):
        blocks(page)
