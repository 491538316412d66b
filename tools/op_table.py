"""The table of supported op kinds, generated from the op registry
(api/dyngraph/ops/): one row per kind with its family, inputs, attributes
(default, or "required") and the dtypes it takes.

    python tools/op_table.py            # print the table

The documentation site's op page (docs/reference/ops.md) holds the marker
MARKER; the MkDocs hook docs/hooks/op_table.py replaces it with this table
each time the site is built, so no copy of the table is committed to go
stale. It loads the registry without the compiled extension (as
schema/generate.py does), so it runs before anything is built.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKER = "<!-- op-table -->"

sys.path.insert(0, str(ROOT / "schema"))
import gen_ops  # noqa: E402

DTYPE_WORDS = {"any": "any", "float": "f32/f16/bf16", "int": "i32/i64", "bool": "bool", "nonbool": "not bool",
               "float_or_bool": "float or bool", "int_or_f32": "i32/i64/f32", "any_or_f8": "any or f8"}


def _default(spec, required) -> str:
    if spec.default is required:
        return "required"
    v = spec.default
    if isinstance(v, tuple):
        v = list(v)
    return repr(v)


def _inputs(s) -> str:
    lo, hi = s.inputs
    names = list(s.input_names)
    if hi == 0:
        return "-"
    if hi < 0:
        return f"{lo}+"
    if names:
        shown = [n if i < lo else f"[{n}]" for i, n in enumerate(names[:hi])]
        return ", ".join(shown)
    return str(lo) if lo == hi else f"{lo}-{hi}"


def _dtypes(s, registry) -> str:
    if s.inputs[1] == 0:
        return "-"
    classes = list(dict.fromkeys(s.dtypes))
    return " / ".join(DTYPE_WORDS.get(c) or "/".join(d.name for d in registry.DTYPE_CLASSES[c]) for c in classes)


def table() -> str:
    registry, _ = gen_ops.load_registry()
    rows = []
    for kind in sorted(registry.registered_kinds(), key=lambda k: k.name):
        s = registry.schema_of(kind)
        family = s.infer.__module__.rsplit(".", 1)[-1]
        attrs = ", ".join(f"{n}={_default(a, registry.REQUIRED)}" for n, a in s.attrs.items()) or "-"
        rank = "6" if s.high_rank else "4"
        rows.append(f"| {kind.name} | {family} | {_inputs(s)} | {attrs} | {_dtypes(s, registry)} | {rank} |")
    head = ["| op kind | family | inputs | attributes (default) | input dtypes | max rank |",
            "|---|---|---|---|---|---|"]
    return "\n".join(head + rows)


def render(markdown: str) -> str:
    """The page with its MARKER line replaced by the table."""
    if markdown.count(MARKER) != 1:
        raise ValueError(f"the op page must hold {MARKER!r} exactly once")
    return markdown.replace(MARKER, table())


def main() -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    print(table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
