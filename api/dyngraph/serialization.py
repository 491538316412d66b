"""Saved compiled partitions: the file format (dyngraph.loading turns a file into a
compiled partition; CompiledPartition.save writes one with write_file).

A file is a 64-byte header followed by the body, the FlatBuffers IR
(schema/dyngraph_ir.fbs) with the constants' data::

    offset  size  field
         0     8  magic b"DYNGRAPH"
         8     4  format version (1), little-endian
        12     4  checksum kind (1: CRC-32C of the body)
        16     8  body size in bytes
        24     4  the body's checksum
        28    36  zeros

The header is 64 bytes so the body's 64-byte aligned constant data stays
aligned in a memory-mapped file (it is used in place).
"""

from __future__ import annotations

import mmap
import os
import stat
import struct

import crc32c

from .errors import IRError


MAGIC = b"DYNGRAPH"
FORMAT_VERSION = 1
CHECKSUM_CRC32C = 1
HEADER = struct.Struct("<8sIIQI36s")
HEADER_SIZE = 64
assert HEADER.size == HEADER_SIZE


def checksum(body) -> int:
    """CRC-32C of the body (hardware-accelerated; releases the GIL for large buffers)."""
    return crc32c.crc32c(body)


def header_for(body) -> bytes:
    """The 64-byte header of a file holding ``body``."""
    return HEADER.pack(MAGIC, FORMAT_VERSION, CHECKSUM_CRC32C, len(body), checksum(body), bytes(36))


def seal(body: bytes) -> bytes:
    """The bytes of a file holding ``body`` (header + body)."""
    return header_for(body) + bytes(body)


def write_file(path: "os.PathLike | str", body: bytes) -> None:
    """Write header + body to ``path`` atomically (a temporary file renamed over it)."""
    tmp = f"{os.fspath(path)}.tmp"
    with open(tmp, "wb") as f:
        f.write(header_for(body))
        f.write(body)
    os.replace(tmp, path)


def check_header(head: bytes, file_size: int, where: str) -> int:
    """Validate a header against the file's size; returns the body size."""
    if file_size < HEADER_SIZE:
        raise IRError(f"{where}: {file_size} bytes is too short for a dyngraph file (the header alone is {HEADER_SIZE})")
    magic, version, kind, size, _, reserved = HEADER.unpack(head[:HEADER_SIZE])
    if magic != MAGIC:
        if head[4:8] == b"DGIR":
            raise IRError(f"{where}: an IR without a file header (written by dyngraph 0.1 or by write_program): "
                          "save it again with CompiledPartition.save")
        raise IRError(f"{where}: not a dyngraph file (its first bytes are {magic!r}, expected {MAGIC!r})")
    if version != FORMAT_VERSION:
        raise IRError(f"{where}: file format version {version} is not supported (this dyngraph reads {FORMAT_VERSION})")
    if kind != CHECKSUM_CRC32C:
        raise IRError(f"{where}: unknown checksum kind {kind}")
    if reserved != bytes(36):
        raise IRError(f"{where}: the header's reserved bytes are not zero (a damaged file)")
    if size != file_size - HEADER_SIZE:
        raise IRError(f"{where}: the header says the body has {size} bytes, the file has {file_size - HEADER_SIZE} "
                      "after its header (a truncated or damaged file)")
    return size


def open_regular(path: "os.PathLike | str") -> int:
    """A read-only descriptor of a regular file. Opened without blocking (a FIFO
    would wait for a writer) and refused at once when it is not a regular file."""
    where = os.fspath(path)
    try:
        fd = os.open(where, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise IRError(f"cannot read {where}: {e.strerror or e}") from e
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode) else \
                "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "not a regular file"
            raise IRError(f"{where} is {kind}: dyngraph loads regular files only")
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_body(path: "os.PathLike | str", mapped: bool):
    """(body as a memoryview, what keeps it alive) for a checked file. With
    ``mapped`` the file is memory-mapped, else read into memory."""
    where = os.fspath(path)
    fd = open_regular(path)
    try:
        size = os.fstat(fd).st_size
        if size < HEADER_SIZE:
            check_header(b"", size, where)
        if mapped:
            keep = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        else:
            keep = bytearray(size)
            view = memoryview(keep)
            got = 0
            while got < size:
                n = os.readv(fd, [view[got:]])
                if n == 0:
                    raise IRError(f"{where}: the file shrank while it was read")
                got += n
            view.release()
    except OSError as e:
        raise IRError(f"cannot read {where}: {e.strerror or e}") from e
    finally:
        os.close(fd)
    view = memoryview(keep)
    try:
        body_size = check_header(bytes(view[:HEADER_SIZE]), len(view), where)
        body = view[HEADER_SIZE:HEADER_SIZE + body_size]
        _, _, _, _, want, _ = HEADER.unpack(bytes(view[:HEADER_SIZE]))
        if checksum(body) != want:
            body.release()
            raise IRError(f"{where}: the checksum does not match its content (a damaged or modified file)")
    except BaseException:
        view.release()
        if mapped:
            keep.close()
        raise
    view.release()
    return body, keep

