"""Typed errors raised by dyngraph.

Every error names what was wrong: which tensor, which dimension, what was
expected and what was given. The C++ runtime raises the same classes (its
exceptions are translated when they cross into Python).
"""


class DyngraphError(Exception):
    """Base class of every error dyngraph raises on purpose."""


class GraphError(DyngraphError, ValueError):
    """A graph is malformed: unknown op kind or attribute, a tensor id used
    inconsistently, a cycle, a wrong number of inputs or outputs."""


class ShapeError(DyngraphError, ValueError):
    """Shapes do not fit: at finalize/compile (inconsistent graph) or at
    execution (input shapes that do not match what was compiled)."""


class DTypeError(DyngraphError, TypeError):
    """A data type does not fit what an op or a compiled partition expects."""


class CompileError(DyngraphError):
    """A partition cannot be compiled as asked (missing constant data, a
    symbol that no input determines, an unsupported partition)."""


class ExecutionError(DyngraphError):
    """Execution failed: bad buffers, or the backend refused to compute."""


class IRError(DyngraphError, ValueError):
    """A serialized IR (a saved compiled partition) is malformed."""


class UnsupportedError(DyngraphError, NotImplementedError):
    """A well-formed request for something dyngraph does not have: an op kind,
    an attribute value, a data type, an op form (e.g. a second output).

    ``features`` lists what is missing, each a short name such as
    ``"op kind Convolution"`` or ``"dtype s8"``: the same name for the same
    gap in every graph, so refusals can be counted by what they lack."""

    def __init__(self, message: str, features=()):
        super().__init__(message)
        self.features = tuple(features) or (message,)


__all__ = [
    "DyngraphError",
    "GraphError",
    "ShapeError",
    "DTypeError",
    "CompileError",
    "ExecutionError",
    "IRError",
    "UnsupportedError",
]
