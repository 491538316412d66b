"""The reference implementations, one function per op kind.

An implementation takes the op's normalized attributes, its input values
(float64 / int64 / bool arrays, see :mod:`.values`) and a :class:`Ctx`
(the op, the output dtypes, the values of the dimension symbols), and
returns its output values, which the interpreter rounds to the output dtypes.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Mapping

from ..dtypes import DataType
from ..errors import DyngraphError, UnsupportedError
from ..op import Op, OpKind
from ..symbolic import Expr, Symbol, as_expr


class NoReferenceError(UnsupportedError):
    """The reference interpreter cannot compute a graph (an op kind it has no
    implementation for, a dimension whose value it cannot tell)."""


class Ctx:
    def __init__(self, op: Op, out_dtypes: List[DataType], env: Mapping[Symbol, int], out_shapes=None):
        self.op = op
        self.out_dtypes = out_dtypes
        self.env = env
        # the output shapes the graph inferred (an op's own output may be declared without one)
        self.out_shapes = out_shapes if out_shapes is not None else [lt.shape for lt in op.outputs]

    def value(self, e) -> int:
        """An int or a dimension expression, evaluated for this run."""
        e = as_expr(e) if not isinstance(e, Expr) else e
        try:
            return e.evaluate(self.env)
        except DyngraphError as err:
            raise NoReferenceError(f"{self.op.label}: {err}") from None


Impl = Callable[[dict, list, Ctx], list]
IMPLS: Dict[OpKind, Impl] = {}


def implements(*kinds: OpKind):
    def deco(fn: Impl) -> Impl:
        for k in kinds:
            if k in IMPLS:
                raise RuntimeError(f"reference for {k.name} registered twice")
            IMPLS[k] = fn
        return fn

    return deco
