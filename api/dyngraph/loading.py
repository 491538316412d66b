"""dyngraph.load: a saved compiled partition (dyngraph.serialization's file
format) back into a CompiledPartition, on the host CPU or on devices."""

from __future__ import annotations

import logging
import os
import time

from . import _backend
from .compiled_partition import CompiledPartition, check_capacity
from .engine import Engine, split_devices
from .ir_reader import read_program, validate_program
from .serialization import read_body

log = logging.getLogger(__name__)


def load(path: "os.PathLike | str", engine=None, cache_capacity: int = 16, mmap_weights: bool = True,
         split: str = "layer", shares=None, placement: str = "auto"):
    """Load a compiled partition saved with ``CompiledPartition.save``.

    The file is untrusted input: its header and checksum are checked, the IR
    is verified (FlatBuffers verifier, then every op against its kind's
    declared arity, dtypes and attributes, every size with checked
    arithmetic and bounds) and its shapes are inferred again from its ops and
    compared with the ones it records. A file that fails any check raises
    ``IRError``; nothing of it is used. Nothing of the original graph (or of
    PyTorch) is needed.

    With ``mmap_weights`` (the default) the weights are used where they lie in
    the memory-mapped file: no copy, and memory the OS can share and page. The
    file must then stay unchanged while the partition is alive (truncating a
    mapped file makes reads of it fault). Weights a CPU kernel reads in a
    layout of its own (f32 and q8_0 / q4_* MatMul weights in panels, quantized ones ggml
    repacks; ``cache_info().panel_bytes``, ``repacked_bytes``) are written
    into that layout instead, and their pages of the file released; where
    that happens, constants under 2 MiB are copied too (reading one in place
    would map its neighbours' released pages back: files are mapped in folios
    of up to 2 MiB).
    ``mmap_weights=False`` reads the file into memory and keeps no tie to it.

    ``engine`` (default: the process's shared CPU engine, ``Engine.shared()``),
    ``split``, ``shares`` and ``placement`` are those of ``Partition.compile``:
    an RPC or GPU engine, or a list of engines, runs the loaded partition on
    those devices (its weights are uploaded there; ``mmap_weights`` then only
    says how the file is read).
    """
    chosen = engine is not None  # else the first stream of another CPU engine may take the partition
    engines = list(engine) if isinstance(engine, (list, tuple)) else [engine if chosen else Engine.shared()]
    if not engines:
        raise TypeError("engine must be a dyngraph.Engine or a non-empty list of them")
    for e in engines:
        if not isinstance(e, Engine):
            raise TypeError(f"engine must be a dyngraph.Engine or a list of them, got {type(e).__name__}")
    check_capacity(cache_capacity)
    devices = split_devices(engines, split, shares, placement)  # None: the host CPU path
    t0 = time.perf_counter()
    body, keep = read_body(path, bool(mmap_weights))
    try:
        program = read_program(body)
        validate_program(program)
        if devices is None:
            impl = _backend.CompiledPartition(body, {}, engines[0].impl, cache_capacity, mmap_weights)
        else:
            impl = _backend.CompiledPartition(body, {}, [e.impl for e in engines], devices[1], devices[0], cache_capacity,
                                              devices[2])
    except BaseException:
        body.release()
        if mmap_weights:
            keep.close()
        raise
    body.release()
    borrowed = mmap_weights and devices is None  # on devices, the weights were uploaded: the mapping can go
    if mmap_weights and not borrowed:
        keep.close()
    log.info("loaded %s: %d ops, %d bytes of constants: %.1f ms", os.fspath(path), len(program.ops),
             impl.stats()["constant_bytes"], (time.perf_counter() - t0) * 1e3)
    return CompiledPartition(program, impl, engines[0], keepalive=keep if borrowed else None, engines=engines,
                             engine_chosen=chosen)
