"""The package's modules import each other without cycles, and take no private name from one another.

The import graph is built with `ast` from the sources of api/dyngraph (no import runs), and counts every
import statement, also the ones inside functions and under `if TYPE_CHECKING:`: an import deferred into a
function is the usual way to hide a cycle, not to remove one. A module imports a package's `__init__` when
it names the package (`from .. import x` where x is not a submodule). The compiled extension `_backend`
is a leaf. Layering: docs/design/architecture.md, "Module layering".
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "api" / "dyngraph"


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules(root: Path) -> dict:
    return {_module_name(p, root): p for p in sorted(root.rglob("*.py"))}


def _imports(name: str, path: Path, modules: dict, extensions: set):
    """(line, imported module, names taken from it) for each import of a package module in `name`."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for a in node.names:
                target = a.name
                while target not in modules and "." in target:
                    target = target.rsplit(".", 1)[0]
                if target in modules:
                    yield node.lineno, target, []
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source not in modules:
                continue
            taken = []
            for a in node.names:
                sub = f"{source}.{a.name}"
                if sub in extensions:
                    continue
                if sub in modules:
                    yield node.lineno, sub, []
                else:
                    taken.append(a.name)
            if taken:
                yield node.lineno, source, taken


def import_graph(root: Path = PKG):
    modules = _modules(root)
    extensions = {_module_name(p.with_name(p.name.split(".")[0] + ".py"), root) for p in root.rglob("*.so")}
    # the compiled extension is a module even where the tree holds no build of it (a fresh clone: the
    # installed package has it)
    extensions.add(f"{root.name}._backend")
    edges, private = {}, []
    for name, path in modules.items():
        for line, target, names in _imports(name, path, modules, extensions):
            if target != name:
                edges.setdefault(name, {}).setdefault(target, line)
            private += [f"{path.relative_to(root.parent)}:{line}: {n} from {target}"
                        for n in names if n.startswith("_") and not n.startswith("__") and target != name]
    return modules, edges, private


def cycles(edges: dict) -> list:
    """The strongly connected components of more than one module (Tarjan), each as a sorted list."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(set(edges) | {w for t in edges.values() for w in t}):
        if v not in index:
            visit(v)
    return found


def _describe(comp, edges) -> str:
    inside = set(comp)
    return "; ".join(f"{m} -> {t} (line {edges[m][t]})" for m in comp for t in sorted(edges.get(m, {})) if t in inside)


def test_the_package_has_no_import_cycle():
    _, edges, _ = import_graph()
    assert len(edges) > 50  # the walk found the package's imports
    found = cycles(edges)
    assert not found, "import cycles: " + " | ".join(_describe(c, edges) for c in found)


def test_no_private_name_is_taken_from_another_module():
    _, _, private = import_graph()
    assert not private, "private names imported across modules (make them public there):\n" + "\n".join(private)


def test_the_core_does_not_import_a_front_end():
    """The graph, compiler and runtime stand below the front ends: none of them imports one."""
    _, edges, _ = import_graph()
    # (dyngraph.__main__ is `python -m dyngraph`: a command, like dyngraph.cli)
    front = ("dyngraph.onednn", "dyngraph.torch", "dyngraph.reference", "dyngraph.cli", "dyngraph.models",
             "dyngraph.__main__")
    core = [m for m in edges if m.count(".") == 1 and not m.startswith(front)]
    bad = [f"{m} -> {t}" for m in core for t in edges[m] if t.startswith(front)]
    assert not bad, bad


@pytest.mark.parametrize("files,cycle", [
    ({"a.py": "from . import b\n", "b.py": "def f():\n    from .a import x\n"}, ["pkg.a", "pkg.b"]),
    ({"a.py": "import pkg.sub.c\n", "sub/__init__.py": "", "sub/c.py": "from ..a import y\n"}, ["pkg.a", "pkg.sub.c"]),
    ({"a.py": "from .b import z\n", "b.py": "import os\n"}, None),
])
def test_the_check_sees_a_cycle_also_through_a_deferred_import(tmp_path, files, cycle):
    root = tmp_path / "pkg"
    for rel, text in {"__init__.py": "", **files}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    _, edges, _ = import_graph(root)
    assert cycles(edges) == ([cycle] if cycle else [])


def test_the_check_sees_a_private_name(tmp_path):
    root = tmp_path / "pkg"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "a.py").write_text("_hidden = 1\n")
    (root / "b.py").write_text("def f():\n    from .a import _hidden\n")
    _, _, private = import_graph(root)
    assert private == ["pkg/b.py:2: _hidden from pkg.a"]
