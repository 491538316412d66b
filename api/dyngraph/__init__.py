"""dyngraph: compile once, run any shape.

A oneDNN-Graph-style API (logical tensors, ops, graphs, partitions, compiled
partitions) whose dimensions may be dynamic, on top of ggml. A partition is
compiled once; each new binding of the dynamic dimensions builds a ggml graph
once and keeps it in a cache.
"""

import logging as _logging

from ._loader import load_ggml as _load_ggml

# the Python layer logs under "dyngraph" (dyngraph.compiler, dyngraph.onednn, ...);
# nothing is printed unless the application configures logging
_logging.getLogger(__name__).addHandler(_logging.NullHandler())

_load_ggml()

from . import _backend  # noqa: E402,F401  (loads the extension after the ggml libraries)
from .compiled_partition import CacheInfo, CompiledPartition  # noqa: E402
from .dtypes import DataType, bf16, boolean, f8_e4m3, f8_e5m2, f16, f32, i32, i64, s4, s8, u4, u8  # noqa: E402
from .engine import DeviceInfo, Engine, EngineKind, Stream  # noqa: E402
from .errors import (  # noqa: E402
    CompileError,
    DeviceError,
    DTypeError,
    DyngraphError,
    ExecutionError,
    GraphError,
    IRError,
    ShapeError,
    UnsupportedError,
)
from .builder import GraphBuilder  # noqa: E402
from .graph import Graph  # noqa: E402
from .logical_tensor import CONSTANT, STATE, VARIABLE, LogicalTensor, Property  # noqa: E402
from .op import Op, OpKind  # noqa: E402
from .partition import Partition  # noqa: E402
from .loading import load  # noqa: E402
from .stored_weight import StoredWeight  # noqa: E402
from .symbolic import DYNAMIC_DIM, UNKNOWN_DIM, Dim, Expr, sym_max, sym_min  # noqa: E402
from .tensor import Tensor  # noqa: E402

__version__ = "0.1.0"


def _c_root() -> str:
    """The folder of libdyngraph.so (the C API), its header, CMake package and pkg-config file:
    the package's own, or in an in-tree build (DYNGRAPH_DEV=1) the build folder the extension is in."""
    import os

    return os.path.dirname(os.path.realpath(_backend.__file__))


def get_include() -> str:
    """The folder to add to a C/C++ include path for ``#include <dyngraph/dyngraph.h>`` (the C API)."""
    import os

    return os.path.join(_c_root(), "include")


def get_library_dir() -> str:
    """The folder holding libdyngraph.so (link with ``-L<dir> -ldyngraph``)."""
    return _c_root()


def get_cmake_dir() -> str:
    """The folder of dyngraphConfig.cmake: ``find_package(dyngraph)`` gives ``dyngraph::dyngraph``."""
    import os

    return os.path.join(_c_root(), "cmake")


def get_pkgconfig_dir() -> str:
    """The folder of dyngraph.pc (for PKG_CONFIG_PATH)."""
    import os

    return os.path.join(_c_root(), "pkgconfig")


def set_verbose(level: "int | str") -> None:
    """DYNGRAPH_VERBOSE at run time (docs/guide/verbose.md): 1 (or "exec")
    prints a line per execute on stderr, 2 (or "all") adds each compile, graph
    build and eviction, 0 (or "none") turns it off. Anything else raises
    ValueError and leaves the level as it was."""
    if isinstance(level, bool) or not isinstance(level, (int, str)):
        raise ValueError(f"verbose level must be 0, 1, 2, 'none', 'exec' or 'all', not {level!r}")
    n = _backend.parse_verbose(level) if isinstance(level, str) else int(level)
    if n < 0:
        raise ValueError(f"verbose level must be 0, 1, 2, 'none', 'exec' or 'all', not {level!r}")
    _backend.set_verbose(n)


__all__ = [
    "StoredWeight",
    "CONSTANT", "DYNAMIC_DIM", "STATE", "UNKNOWN_DIM", "VARIABLE",
    "CacheInfo", "CompileError", "CompiledPartition", "DTypeError", "DataType", "DeviceError", "DeviceInfo", "Dim",
    "DyngraphError", "Engine", "EngineKind", "ExecutionError", "Expr", "Graph", "GraphBuilder", "GraphError", "IRError",
    "LogicalTensor", "Op", "OpKind", "Partition", "Property", "ShapeError", "Stream", "Tensor", "UnsupportedError",
    "bf16", "boolean", "f16", "f32", "i32", "i64", "load", "set_verbose",
    "get_cmake_dir", "get_include", "get_library_dir", "get_pkgconfig_dir", "sym_max", "sym_min",
    "s8", "u8", "s4", "u4", "f8_e4m3", "f8_e5m2",
]
