"""MkDocs hook: the op page's table, generated from the op registry at build time (tools/op_table.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("op_table", Path(__file__).resolve().parents[2] / "tools" / "op_table.py")
op_table = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(op_table)

PAGE = "reference/ops.md"


def on_page_markdown(markdown, page, config, files):
    if page.file.src_uri == PAGE:
        return op_table.render(markdown)
    return markdown
