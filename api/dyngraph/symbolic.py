"""Symbolic dimensions.

A dimension of a tensor is an :class:`Expr`: an integer polynomial over
*atoms*. Atoms are named symbols (:class:`Dim`) and the opaque results of
floor division, modulo, min and max that could not be simplified away.
Expressions are kept in a canonical form, so two expressions that are equal
as polynomials compare equal (``seq + 1 == 1 + seq``) and hash alike.

``DYNAMIC_DIM`` marks a dimension that is only known at execution (each use
becomes a fresh anonymous symbol); ``UNKNOWN_DIM`` marks one the library
infers at finalize/compile time.
"""

from __future__ import annotations

import itertools
from typing import Dict, Iterable, Mapping, Optional, Tuple, Union

from .errors import ShapeError

INT64_MAX = 2**63 - 1

_symbol_ids = itertools.count()


class SpecialDim:
    __slots__ = ("_name",)

    def __init__(self, name: str):
        self._name = name

    def __repr__(self) -> str:
        return self._name

    def __reduce__(self):
        return self._name


DYNAMIC_DIM = SpecialDim("DYNAMIC_DIM")
"""A dimension unknown until execution (an anonymous symbol of its own)."""

UNKNOWN_DIM = SpecialDim("UNKNOWN_DIM")
"""A dimension the library infers at finalize / compile time."""


class Symbol:
    """A named integer unknown with an inclusive range. Compared by identity."""

    __slots__ = ("name", "min", "max", "_uid")

    def __init__(self, name: str, min: int = 1, max: int = INT64_MAX):
        if not isinstance(name, str) or not name:
            raise ValueError("a dimension symbol needs a non-empty name")
        if not isinstance(min, int) or not isinstance(max, int):
            raise TypeError(f"range of dimension {name!r} must be integers")
        if min < 0:
            raise ValueError(f"symbol {name!r}: min must be non-negative, got {min}")
        if max < min:
            raise ValueError(f"dimension {name!r}: max ({max}) is below min ({min})")
        self.name = name
        self.min = min
        self.max = max
        self._uid = next(_symbol_ids)

    def _key(self):
        return (0, self._uid)

    def __repr__(self) -> str:
        return self.name


class OpAtom:
    """floor division, modulo, min or max of two expressions that did not simplify."""

    __slots__ = ("op", "a", "b", "_hash")

    def __init__(self, op: str, a: "Expr", b: "Expr"):
        self.op = op
        self.a = a
        self.b = b
        self._hash = hash((op, a, b))

    def _key(self):
        return (1, self.op, self.a._sort_key(), self.b._sort_key())

    def __eq__(self, other):
        return isinstance(other, OpAtom) and self.op == other.op and self.a == other.a and self.b == other.b

    def __hash__(self):
        return self._hash

    def __repr__(self) -> str:
        if self.op in ("min", "max"):
            return f"{self.op}({self.a}, {self.b})"
        sym = "//" if self.op == "floordiv" else "%"
        return f"({_paren(self.a)} {sym} {_paren(self.b)})"


def _paren(e: "Expr") -> str:
    s = str(e)
    return f"({s})" if len(e._terms) > 1 else s


Atom = Union[Symbol, OpAtom]
Monomial = Tuple[Atom, ...]
ExprLike = Union["Expr", int]


class Expr:
    """An integer expression over dimension symbols, in canonical form."""

    __slots__ = ("_terms", "_hash")

    def __init__(self, terms: Mapping[Monomial, int] = ()):  # type: ignore[assignment]
        items = [(m, c) for m, c in dict(terms).items() if c != 0]
        items.sort(key=lambda mc: tuple(a._key() for a in mc[0]))
        self._terms: Tuple[Tuple[Monomial, int], ...] = tuple(items)
        self._hash = hash(self._terms)

    # -- construction -------------------------------------------------------
    @staticmethod
    def const(v: int) -> "Expr":
        return Expr({(): int(v)})

    @staticmethod
    def symbol(s: Symbol) -> "Expr":
        return Expr({(s,): 1})

    @staticmethod
    def _atom(a: OpAtom) -> "Expr":
        return Expr({(a,): 1})

    # -- inspection ---------------------------------------------------------
    @property
    def is_const(self) -> bool:
        return all(len(m) == 0 for m, _ in self._terms)

    @property
    def value(self) -> int:
        if not self.is_const:
            raise ValueError(f"{self} is not a constant")
        return self._terms[0][1] if self._terms else 0

    def as_symbol(self) -> Optional[Symbol]:
        """The symbol, if this expression is exactly one symbol."""
        if len(self._terms) == 1:
            (m, c), = self._terms
            if c == 1 and len(m) == 1 and isinstance(m[0], Symbol):
                return m[0]
        return None

    def atoms(self) -> Iterable[Atom]:
        for m, _ in self._terms:
            yield from m

    def free_symbols(self) -> set:
        out = set()
        for a in self.atoms():
            if isinstance(a, Symbol):
                out.add(a)
            else:
                out |= a.a.free_symbols() | a.b.free_symbols()
        return out

    def linear_in(self, s: Symbol) -> Optional[Tuple[int, "Expr"]]:
        """If self == coeff * s + rest with rest free of s, return (coeff, rest)."""
        coeff = 0
        rest = {}
        for m, c in self._terms:
            if m == (s,):
                coeff = c
            elif any(s is a for a in m) or any(
                isinstance(a, OpAtom) and s in (a.a.free_symbols() | a.b.free_symbols()) for a in m
            ):
                return None
            else:
                rest[m] = c
        if coeff == 0:
            return None
        return coeff, Expr(rest)

    def _sort_key(self):
        return tuple((tuple(a._key() for a in m), c) for m, c in self._terms)

    def bounds(self) -> Tuple[int, int]:
        """Inclusive (lo, hi) over every value the symbols may take (their ranges)."""
        lo = hi = 0
        for m, c in self._terms:
            tlo = thi = 1
            for a in m:
                alo, ahi = _atom_bounds(a)
                cands = (tlo * alo, tlo * ahi, thi * alo, thi * ahi)
                tlo, thi = min(cands), max(cands)
            lo += min(c * tlo, c * thi)
            hi += max(c * tlo, c * thi)
        return lo, hi

    def provably_le(self, other: ExprLike) -> bool:
        """True when self <= other for every value the symbols may take."""
        return (as_expr(other) - self).bounds()[0] >= 0

    # -- evaluation ---------------------------------------------------------
    def evaluate(self, env: Mapping[Symbol, int]) -> int:
        total = 0
        for m, c in self._terms:
            p = c
            for a in m:
                p *= _eval_atom(a, env)
            total += p
        return total

    def substitute(self, env: Mapping[Symbol, "Expr"]) -> "Expr":
        out = Expr.const(0)
        for m, c in self._terms:
            p = Expr.const(c)
            for a in m:
                if isinstance(a, Symbol):
                    p = p * env.get(a, Expr.symbol(a))
                else:
                    p = p * _apply(a.op, a.a.substitute(env), a.b.substitute(env))
            out = out + p
        return out

    # -- arithmetic ---------------------------------------------------------
    def __add__(self, other: ExprLike) -> "Expr":
        o = as_expr(other)
        terms = dict(self._terms)
        for m, c in o._terms:
            terms[m] = terms.get(m, 0) + c
        return Expr(terms)

    __radd__ = __add__

    def __neg__(self) -> "Expr":
        return Expr({m: -c for m, c in self._terms})

    def __sub__(self, other: ExprLike) -> "Expr":
        return self + (-as_expr(other))

    def __rsub__(self, other: ExprLike) -> "Expr":
        return as_expr(other) + (-self)

    def __mul__(self, other: ExprLike) -> "Expr":
        o = as_expr(other)
        terms: Dict[Monomial, int] = {}
        for m1, c1 in self._terms:
            for m2, c2 in o._terms:
                m = tuple(sorted(m1 + m2, key=lambda a: a._key()))
                terms[m] = terms.get(m, 0) + c1 * c2
        return Expr(terms)

    __rmul__ = __mul__

    def __floordiv__(self, other: ExprLike) -> "Expr":
        return _apply("floordiv", self, as_expr(other))

    def __rfloordiv__(self, other: ExprLike) -> "Expr":
        return _apply("floordiv", as_expr(other), self)

    def __mod__(self, other: ExprLike) -> "Expr":
        return _apply("mod", self, as_expr(other))

    def __rmod__(self, other: ExprLike) -> "Expr":
        return _apply("mod", as_expr(other), self)

    # -- comparison ---------------------------------------------------------
    def __eq__(self, other) -> bool:
        if isinstance(other, int) and not isinstance(other, bool):
            other = Expr.const(other)
        if not isinstance(other, Expr):
            return NotImplemented
        return self._terms == other._terms

    def __ne__(self, other) -> bool:
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    def __hash__(self) -> int:
        return self._hash

    def __int__(self) -> int:
        return self.value

    def __index__(self) -> int:
        if not self.is_const:
            raise TypeError(f"dimension {self} is symbolic, not an integer")
        return self.value

    def __bool__(self) -> bool:
        return not (self.is_const and self.value == 0)

    def __repr__(self) -> str:
        if not self._terms:
            return "0"
        parts = []
        for m, c in self._terms:
            body = "*".join(str(a) for a in m)
            if not body:
                s = str(abs(c))
            elif abs(c) == 1:
                s = body
            else:
                s = f"{abs(c)}*{body}"
            parts.append(("-" if c < 0 else "+", s))
        # constants last reads better: seq + 1
        parts.sort(key=lambda p: p[1].lstrip("-").isdigit())
        out = ("-" if parts[0][0] == "-" else "") + parts[0][1]
        for sign, s in parts[1:]:
            out += f" {sign} {s}"
        return out

    __str__ = __repr__


class Dim(Expr):
    """A named dynamic dimension, shared by every tensor that uses it.

    ``Dim("seq", min=1, max=4096)`` behaves like an expression, so
    ``seq + 1`` or ``2 * seq`` describe derived dimensions.
    """

    __slots__ = ("sym",)

    def __init__(self, name: str, min: int = 1, max: int = INT64_MAX):
        if isinstance(min, int) and min < 1:
            raise ValueError(
                f"dimension {name!r}: min must be at least 1 (zero-size dimensions are not supported), got {min}"
            )
        sym = Symbol(name, min, max)
        super().__init__({(sym,): 1})
        self.sym = sym

    @property
    def name(self) -> str:
        return self.sym.name

    @property
    def min(self) -> int:
        return self.sym.min

    @property
    def max(self) -> int:
        return self.sym.max


def as_expr(v) -> Expr:
    if isinstance(v, Expr):
        return v
    if isinstance(v, Symbol):
        return Expr.symbol(v)
    if isinstance(v, bool) or not isinstance(v, int):
        try:
            import numpy as np

            if isinstance(v, np.integer):
                return Expr.const(int(v))
        except ImportError:  # pragma: no cover
            pass
        raise TypeError(f"expected an integer or a dimension expression, got {v!r}")
    return Expr.const(v)


def sym_sum(items: Iterable[ExprLike]) -> Expr:
    """a + b + c + ...: one canonical form made at the end (adding n terms one by one
    makes n of them, which a Concat of thousands of inputs felt)."""
    terms: Dict[Monomial, int] = {}
    for v in items:
        for m, c in as_expr(v)._terms:
            terms[m] = terms.get(m, 0) + c
    return Expr(terms)


def sym_min(a: ExprLike, b: ExprLike) -> Expr:
    return _apply("min", as_expr(a), as_expr(b))


def sym_max(a: ExprLike, b: ExprLike) -> Expr:
    return _apply("max", as_expr(a), as_expr(b))


def floordiv(a: int, b: int) -> int:
    if b == 0:
        raise ShapeError("division by zero in a dimension expression")
    return a // b


def _eval_atom(a: Atom, env: Mapping[Symbol, int]) -> int:
    if isinstance(a, Symbol):
        try:
            return env[a]
        except KeyError:
            raise ShapeError(f"dimension symbol {a.name!r} has no value") from None
    x, y = a.a.evaluate(env), a.b.evaluate(env)
    return _fold(a.op, x, y)


def _fold(op: str, x: int, y: int) -> int:
    if op == "floordiv":
        return floordiv(x, y)
    if op == "mod":
        if y == 0:
            raise ShapeError("modulo by zero in a dimension expression")
        return x % y
    if op == "min":
        return min(x, y)
    return max(x, y)


def _atom_bounds(a: Atom) -> Tuple[int, int]:
    if isinstance(a, Symbol):
        return a.min, a.max
    alo, ahi = a.a.bounds()
    blo, bhi = a.b.bounds()
    if a.op == "min":
        return min(alo, blo), min(ahi, bhi)
    if a.op == "max":
        return max(alo, blo), max(ahi, bhi)
    if blo <= 0:  # a divisor that may be zero or negative: give up on a tight range
        return -INT64_MAX, INT64_MAX
    if a.op == "mod":
        return (0, bhi - 1) if alo >= 0 else (-INT64_MAX, INT64_MAX)
    cands = (alo // blo, alo // bhi, ahi // blo, ahi // bhi)
    return min(cands), max(cands)


def _split_divisible(a: Expr, c: int) -> Tuple[Expr, int]:
    """Write a == c * q + r with r the constant term; q is exact when every
    non-constant coefficient is divisible by c. Returns (q, r) or raises."""
    q = {}
    r = 0
    for m, coef in a._terms:
        if not m:
            r = coef
        elif coef % c == 0:
            q[m] = coef // c
        else:
            raise ArithmeticError
    return Expr(q), r


def _apply(op: str, a: Expr, b: Expr) -> Expr:
    if a.is_const and b.is_const:
        return Expr.const(_fold(op, a.value, b.value))
    if op in ("floordiv", "mod"):
        if b.is_const:
            c = b.value
            if c == 0:
                raise ShapeError(f"{'division' if op == 'floordiv' else 'modulo'} by zero in dimension expression {a}")
            if c > 0:
                try:
                    q, r = _split_divisible(a, c)
                except ArithmeticError:
                    pass
                else:
                    # (c*q + r) // c == q + r // c ; (c*q + r) % c == r % c
                    return q + (r // c) if op == "floordiv" else Expr.const(r % c)
        elif a == b:
            return Expr.const(1 if op == "floordiv" else 0)
        return Expr._atom(OpAtom(op, a, b))
    # min / max: decided where the symbols' ranges decide it (min(1, seq) is 1: seq >= 1)
    d = a - b
    lo, hi = d.bounds()
    if hi <= 0 or lo >= 0:
        if op == "min":
            return a if hi <= 0 else b
        return a if lo >= 0 else b
    x, y = sorted((a, b), key=lambda e: e._sort_key())
    return Expr._atom(OpAtom(op, x, y))


DimLike = Union[int, Expr, SpecialDim]


def is_concrete(shape) -> bool:
    """True when every dimension is a known integer."""
    return shape is not None and all(isinstance(d, int) or (isinstance(d, Expr) and d.is_const) for d in shape)


def format_shape(shape) -> str:
    if shape is None:
        return "[?]"
    return "[" + ", ".join(str(d) for d in shape) + "]"
