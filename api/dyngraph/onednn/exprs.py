"""Dimension expressions as text, for the JSON form of a graph.

``str(expr)`` already prints an expression readably (``seq + 1``,
``2*seq``, ``(seq // 2)``, ``min(a, b)``); :func:`parse_expr` reads that text
back into an :class:`~dyngraph.Expr` over named symbols. The text is
untrusted: its length and nesting are bounded and every error is a
:class:`~dyngraph.GraphError`.
"""

from __future__ import annotations

import re
from typing import Dict, List, Tuple

from ..errors import GraphError
from ..symbolic import Dim, Expr, as_expr, sym_max, sym_min

NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\Z")
MAX_TEXT = 4096
MAX_DEPTH = 64

_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_.]*)|(//|[-+*%(),]))")


def check_name(name: str, where: str) -> None:
    """A symbol name must read back as one token of an expression."""
    if not NAME_RE.match(name) or name in ("min", "max"):
        raise GraphError(f"{where}: dimension name {name!r} cannot be written as JSON "
                         "(names are letters, digits, '_' and '.', starting with a letter or '_')")


def format_expr(e: Expr, where: str) -> str:
    for s in e.free_symbols():
        check_name(s.name, where)
    return str(e)


def _tokens(text: str, where: str) -> List[Tuple[str, str]]:
    out = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise GraphError(f"{where}: cannot read dimension expression {text!r} at position {pos}")
        num, name, op = m.groups()
        out.append(("num", num) if num else ("name", name) if name else ("op", op))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str, symbols: Dict[str, Dim], where: str):
        self.where = where
        self.text = text
        self.toks = _tokens(text, where)
        self.i = 0
        self.symbols = symbols
        self.depth = 0

    def fail(self, msg: str):
        return GraphError(f"{self.where}: dimension expression {self.text!r}: {msg}")

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else ("end", "")

    def take(self, value=None):
        t = self.peek()
        if t[0] == "end" or (value is not None and t[1] != value):
            raise self.fail(f"expected {value or 'more'} at token {self.i}")
        self.i += 1
        return t

    def expr(self) -> Expr:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.fail("nested too deeply")
        neg = False
        if self.peek() == ("op", "-"):
            self.take()
            neg = True
        e = self.term()
        if neg:
            e = -e
        while self.peek()[1] in ("+", "-") and self.peek()[0] == "op":
            op = self.take()[1]
            t = self.term()
            e = e + t if op == "+" else e - t
        self.depth -= 1
        return e

    def term(self) -> Expr:
        e = self.factor()
        while self.peek()[0] == "op" and self.peek()[1] in ("*", "//", "%"):
            op = self.take()[1]
            f = self.factor()
            if op == "*":
                e = e * f
            else:
                if f.is_const and f.value == 0:
                    raise self.fail("division by zero")
                e = e // f if op == "//" else e % f
        return e

    def factor(self) -> Expr:
        kind, v = self.take()
        if kind == "num":
            if len(v) > 19:
                raise self.fail(f"number {v} is too large")
            return as_expr(int(v))
        if kind == "name":
            if v in ("min", "max") and self.peek() == ("op", "("):
                self.take("(")
                a = self.expr()
                self.take(",")
                b = self.expr()
                self.take(")")
                return sym_min(a, b) if v == "min" else sym_max(a, b)
            if v not in self.symbols:
                raise self.fail(f"unknown dimension {v!r} (not in dyngraph_symbols)")
            return self.symbols[v]
        if v == "(":
            e = self.expr()
            self.take(")")
            return e
        if v == "-":
            return -self.factor()
        raise self.fail(f"unexpected {v!r}")


def parse_expr(text, symbols: Dict[str, Dim], where: str) -> Expr:
    """Read an expression over the named ``symbols`` (name -> Dim)."""
    if not isinstance(text, str):
        raise GraphError(f"{where}: a dimension expression must be a string, got {text!r}")
    if len(text) > MAX_TEXT:
        raise GraphError(f"{where}: dimension expression of {len(text)} characters is too long")
    p = _Parser(text, symbols, where)
    e = p.expr()
    if p.peek()[0] != "end":
        raise p.fail(f"unexpected {p.peek()[1]!r} after the expression")
    return e
