"""Sizes at which a converter's symbolic sizes are compared with torch's.

A converter may write a size in another form than torch's (``(2*s)//2`` for
``s``); it must still be the same size wherever the exported program is valid.
That is where each symbol is in its range *and* the conditions torch.export's
tracing assumed hold (its shape environment's guards: a chunked scan whose
padded length stays within one chunk is a guard, not a range). The probes are
the traced sizes, then points spread over the ranges that satisfy those guards.
"""

from __future__ import annotations

import operator
from typing import Dict, List, Optional, Tuple

import sympy

from ..symbolic import INT64_MAX, Expr, Symbol, as_expr, sym_max, sym_min
from .converters.registry import Unsupported
from .symbols import SymbolTable

# values of each symbol (clipped to its range) from which probe points are made
_PROBES = (1, 2, 3, 5, 8, 13, 64, 127, 1000)
_RELATIONS = ((sympy.Ge, ">=", operator.ge), (sympy.Gt, ">", operator.gt), (sympy.Le, "<=", operator.le),
              (sympy.Lt, "<", operator.lt), (sympy.Eq, "==", operator.eq), (sympy.Ne, "!=", operator.ne))

Env = Dict[Symbol, int]


def _values(s: Symbol) -> List[int]:
    ends = (s.min,) if s.max >= INT64_MAX else (s.min, s.max)
    return sorted({min(max(v, s.min), s.max) for v in _PROBES + ends})


def range_points(syms: List[Symbol]) -> List[Env]:
    """Points over the symbols' ranges: the same probe for every symbol, then shifted combinations."""
    values = [_values(s) for s in syms]
    n = max((len(v) for v in values), default=0)
    return [{s: v[(i + k * shift) % len(v)] for k, (s, v) in enumerate(zip(syms, values))}
            for shift in range(3) for i in range(n)]


def _shape_env(ep):
    try:
        from torch.export.exported_program import _get_shape_env  # (private: used only if it is there)

        return _get_shape_env(ep.graph_module)
    except Exception:  # noqa: BLE001 - another torch version: the ranges alone
        return None


class Guard:
    """``lhs op rhs``: a condition on sizes the export assumed."""

    __slots__ = ("lhs", "rhs", "op", "fn")

    def __init__(self, lhs: Expr, rhs: Expr, op: str, fn):
        self.lhs, self.rhs, self.op, self.fn = lhs, rhs, op, fn

    def __str__(self) -> str:
        return f"{self.lhs} {self.op} {self.rhs}"

    def implied(self) -> bool:
        """Whether every value the symbols' ranges allow satisfies it."""
        lo, hi = (self.lhs - self.rhs).bounds()
        return {">=": lo >= 0, ">": lo > 0, "<=": hi <= 0, "<": hi < 0,
                "==": lo == hi == 0, "!=": lo > 0 or hi < 0}[self.op]

    def symbols(self) -> set:
        return self.lhs.free_symbols() | self.rhs.free_symbols()

    def as_check(self) -> Tuple[Expr, Expr, str]:
        """Two sizes equal exactly where it holds, and what it is: a compiled partition's shape
        check (``size_checks``), which a saved program keeps. ``a >= b`` is ``max(a, b) == a``,
        ``a > b`` is ``max(a, b + 1) == a``, ``a != b`` is ``min(max(a - b, b - a), 1) == 1``."""
        a, b = self.lhs, self.rhs
        one = as_expr(1)
        lhs, rhs = {
            "==": lambda: (a, b),
            ">=": lambda: (sym_max(a, b), a),
            ">": lambda: (sym_max(a, b + one), a),
            "<=": lambda: (sym_min(a, b), a),
            "<": lambda: (sym_min(a + one, b), a + one),
            "!=": lambda: (sym_min(sym_max(a - b, b - a), one), one),
        }[self.op]()
        return lhs, rhs, (f"these sizes fail a condition torch.export traced the program under: {self}; "
                          f"torch's ep.module() refuses them too")

    def holds(self, env: Env) -> bool:
        """Whether it holds at these sizes (False where it cannot be evaluated)."""
        try:
            return bool(self.fn(self.lhs.evaluate(env), self.rhs.evaluate(env)))
        except (ValueError, ArithmeticError):
            return False


def guard_of(e, table: SymbolTable) -> Guard:
    """A sympy relation between sizes (``u0 <= s0``) as a Guard; Unsupported if it is not one."""
    rel = next((r for r in _RELATIONS if isinstance(e, r[0])), None)
    if rel is None:
        raise Unsupported(f"{e} is not a relation between sizes")
    return Guard(table.expr(e.lhs), table.expr(e.rhs), rel[1], rel[2])


def program_guards(ep, table: SymbolTable) -> List[Guard]:
    """The guards of the export's shape environment over symbols the table already maps
    (the inputs' sizes), as dyngraph expressions; none where torch keeps them elsewhere."""
    shape_env = _shape_env(ep)
    known = table.dims
    out, seen = [], set()
    for g in getattr(shape_env, "guards", None) or ():
        e = getattr(g, "expr", None)
        if not isinstance(e, sympy.Basic) or not e.free_symbols or not e.free_symbols <= known.keys():
            continue
        try:
            guard = guard_of(e, table)
        except (Unsupported, ValueError, ArithmeticError, TypeError):
            continue
        if str(guard) not in seen:
            seen.add(str(guard))
            out.append(guard)
    return out


def traced_sizes(ep, table: SymbolTable) -> Optional[Env]:
    """The sizes the program was traced at (its example inputs'), by dyngraph symbol."""
    shape_env = _shape_env(ep)
    hints = getattr(shape_env, "backed_var_to_val", None)
    if hints is None:  # (its name before torch 2.10)
        hints = getattr(shape_env, "var_to_val", None) or {}
    try:
        return {d.sym: int(hints[s]) for s, d in table.dims.items()}
    except (KeyError, TypeError, ValueError):
        return None


def program_points(ep, table: SymbolTable, guards: List[Guard]) -> List[Env]:
    """The traced sizes, and range points where every guard of the export holds (``guards``:
    program_guards'), over the symbols the table already maps."""
    if not table.dims:
        return []
    syms = sorted((d.sym for d in table.dims.values()), key=lambda s: s.name)
    traced = traced_sizes(ep, table)
    points = [traced] if traced is not None else []
    points += [env for env in range_points(syms) if env != traced and all(g.holds(env) for g in guards)]
    return points


def differ_at(a: Expr, b: Expr, points: Optional[List[Env]] = None) -> Optional[Env]:
    """A point at which ``a`` and ``b`` take different values, or None.

    Equal canonical forms agree everywhere; otherwise both are evaluated at
    ``points`` (default: :func:`range_points` of their symbols), skipping a point
    that lacks one of their symbols or where either cannot be evaluated (a
    division by zero)."""
    a, b = as_expr(a), as_expr(b)
    if a == b:
        return None
    syms = a.free_symbols() | b.free_symbols()
    if points is None:
        points = range_points(sorted(syms, key=lambda s: s.name)) if syms else [{}]
    for env in points:
        if not syms <= env.keys():
            continue
        try:
            if a.evaluate(env) != b.evaluate(env):
                return {s: env[s] for s in sorted(syms, key=lambda s: s.name)}
        except (ValueError, ArithmeticError):
            continue
    return None
