"""Op definitions: one module per op family, each with its attributes and shape rules."""

from . import elementwise, indexing, layout, matmul, norm, reduce  # noqa: F401  (registration)
from . import compare, generate  # noqa: F401  (registration)
from .registry import AttrSpec, InferContext, OpSchema, TensorType, registered_kinds, schema_of

__all__ = ["AttrSpec", "InferContext", "OpSchema", "TensorType", "registered_kinds", "schema_of"]
