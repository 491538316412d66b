"""Loading a saved compiled partition (see CompiledPartition.save)."""

from __future__ import annotations

import logging
import mmap
import os
import time
from typing import Optional

from .engine import Engine
from .errors import IRError

log = logging.getLogger(__name__)


def load(path: "os.PathLike | str", engine: Optional[Engine] = None, cache_capacity: int = 16, mmap_weights: bool = True):
    """Load a compiled partition saved with ``CompiledPartition.save``.

    The IR is checked as untrusted input: its FlatBuffer is verified, and its
    shapes are inferred again from its ops and compared with the ones it
    records. Nothing of the original graph (or of PyTorch) is needed.

    With ``mmap_weights`` (the default) the weights are used where they lie in
    the memory-mapped file: no copy, and memory the OS can share and page.
    The file must not be modified while the partition is alive.
    """
    from .compiled_partition import CompiledPartition
    from .ir_reader import read_program, validate_program
    from . import _backend

    engine = engine or Engine()
    t0 = time.perf_counter()
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                raise IRError(f"{os.fspath(path)}: the file is empty")
            buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as e:
        raise IRError(f"cannot read {os.fspath(path)}: {e}") from e
    view = memoryview(buf)
    try:
        program = read_program(view)
        validate_program(program)
        impl = _backend.CompiledPartition(view, {}, engine.impl, cache_capacity, mmap_weights)
    except BaseException:
        view.release()
        buf.close()
        raise
    view.release()
    if not mmap_weights:
        buf.close()
        buf = None
    log.info("loaded %s: %d ops, %d bytes of constants: %.1f ms", os.fspath(path), len(program.ops),
             impl.stats()["constant_bytes"], (time.perf_counter() - t0) * 1e3)
    return CompiledPartition(program, impl, engine, keepalive=buf)
