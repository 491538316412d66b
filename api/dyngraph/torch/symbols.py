"""torch.export's symbolic sizes as dyngraph dimensions.

``torch.export`` describes dynamic sizes with sympy expressions over its own
symbols (``s0``, ``s0 + 1``, ``2*s0``, ``FloorDiv(s0, 2)``), with a range per
symbol in ``ep.range_constraints``. Each symbol becomes a :class:`dyngraph.Dim`
(a torch range starting at 0 or 1 starts at 1: dyngraph dimensions are at
least 1), and each expression the equal :class:`dyngraph.Expr`, so no size is
ever fixed at its trace-time value.
"""

from __future__ import annotations

from typing import Dict, Mapping, Optional

import sympy
import torch
from torch.utils._sympy import functions as F
from torch.utils._sympy.numbers import int_oo

from ..symbolic import INT64_MAX, Dim, Expr, as_expr, sym_max, sym_min
from .converters.registry import Unsupported


_TO_INT = tuple(getattr(F, n) for n in ("TruncToInt", "FloorToInt", "CeilToInt", "RoundToInt") if hasattr(F, n))


def _int_bound(v, default: int) -> int:
    """An integer range bound; ``default`` when infinite (torch's int_oo) or missing."""
    if v is None or v in (int_oo, -int_oo, sympy.oo, -sympy.oo):
        return default
    try:
        return int(v)
    except (TypeError, ValueError, OverflowError, AttributeError):
        return default


class SymbolTable:
    """Maps torch's sympy symbols to dyngraph Dims and sympy expressions to Exprs."""

    def __init__(self, range_constraints: Mapping, names: Optional[Mapping] = None):
        self._ranges = dict(range_constraints or {})
        self._names = dict(names or {})
        self.dims: Dict[sympy.Symbol, Dim] = {}
        self._cache: Dict[sympy.Expr, Expr] = {}
        self._used_names: set = set()

    def dim(self, s: sympy.Symbol) -> Dim:
        d = self.dims.get(s)
        if d is not None:
            return d
        vr = self._ranges.get(s)
        lo = max(1, _int_bound(getattr(vr, "lower", None), 1))
        hi = _int_bound(getattr(vr, "upper", None), INT64_MAX)
        if hi < lo:
            raise Unsupported(f"symbol {s} has the empty range [{lo}, {hi}] once sizes start at 1")
        name = self._names.get(s) or str(s)
        base, k = name, 1
        while name in self._used_names:
            k += 1
            name = f"{base}_{k}"
        self._used_names.add(name)
        d = Dim(name, min=lo, max=hi)
        self.dims[s] = d
        return d

    def expr(self, v) -> Expr:
        """An int, a torch.SymInt or a sympy expression as an Expr."""
        if isinstance(v, bool):
            raise Unsupported(f"{v!r} is a bool, not a size")
        if isinstance(v, int):
            return Expr.const(v)
        if isinstance(v, torch.SymInt):
            node = v.node
            if node.is_nested_int():
                raise Unsupported("nested (jagged) sizes are not supported")
            return self.expr(node.expr)
        if isinstance(v, sympy.Expr):
            got = self._cache.get(v)
            if got is None:
                got = self._convert(v)
                self._cache[v] = got
            return got
        raise Unsupported(f"{v!r} is not an integer size")

    def dim_or_int(self, v):
        """An int when the size is static, else its Expr."""
        e = self.expr(v)
        return e.value if e.is_const else e

    def _convert(self, e: sympy.Expr) -> Expr:
        if e.is_Integer:
            return Expr.const(int(e))
        if isinstance(e, sympy.Symbol):
            return self.dim(e)
        if isinstance(e, sympy.Rational):
            raise Unsupported(f"the size {e} is not an integer")
        if isinstance(e, _TO_INT):  # of an integral float: a size scaled by an integral scale factor
            return self._integral(e.args[0])
        args = [self._convert(a) for a in e.args] if not isinstance(e, (sympy.Pow, F.PowByNatural)) else None
        if isinstance(e, sympy.Add):
            out = Expr.const(0)
            for a in args:
                out = out + a
            return out
        if isinstance(e, sympy.Mul):
            out = Expr.const(1)
            for a in args:
                out = out * a
            return out
        if isinstance(e, (sympy.Pow, F.PowByNatural)):
            base, exp = e.args
            if not (exp.is_Integer and int(exp) >= 0):
                raise Unsupported(f"the size {e} has a non-natural power")
            b = self._convert(base)
            out = Expr.const(1)
            for _ in range(int(exp)):
                out = out * b
            return out
        if isinstance(e, (F.FloorDiv, F.CleanDiv)):
            return args[0] // args[1]
        if isinstance(e, F.CeilDiv):
            a, b = args
            return (a + b - 1) // b
        if isinstance(e, (F.Mod, F.PythonMod)):
            return args[0] % args[1]
        if isinstance(e, F.ModularIndexing):
            base, div, mod = args
            return (base // div) % mod
        if isinstance(e, F.Identity):
            return args[0]
        if isinstance(e, (F.Max, sympy.Max)):
            out = args[0]
            for a in args[1:]:
                out = sym_max(out, a)
            return out
        if isinstance(e, (F.Min, sympy.Min)):
            out = args[0]
            for a in args[1:]:
                out = sym_min(out, a)
            return out
        raise Unsupported(f"the size expression {e} ({type(e).__name__}) has no dyngraph form")

    def _integral(self, e: sympy.Expr) -> Expr:
        """A float expression that is an integer for every value of its sizes
        (``2.0*ToFloat(s0)``), as that integer expression."""
        if isinstance(e, sympy.Float) or e.is_Integer:
            if float(e) != int(e):
                raise Unsupported(f"the size factor {e} is not an integer")
            return Expr.const(int(e))
        if isinstance(e, F.ToFloat):
            return self._convert(e.args[0])
        if isinstance(e, (sympy.Add, sympy.Mul)):
            out = Expr.const(0 if isinstance(e, sympy.Add) else 1)
            for a in e.args:
                out = out + self._integral(a) if isinstance(e, sympy.Add) else out * self._integral(a)
            return out
        raise Unsupported(f"the size expression {e} ({type(e).__name__}) has no dyngraph form")

    def shape(self, t) -> tuple:
        """The shape of a (fake) tensor: ints and Exprs."""
        return tuple(self.dim_or_int(s) for s in t.shape)

    def evaluate(self, e, env: Mapping) -> int:
        """The value of an int or Expr, given the Dims' symbols' values."""
        return e if isinstance(e, int) else as_expr(e).evaluate(env)
