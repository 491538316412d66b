"""The saved-file container around the IR, and how the fuzzer re-seals a
mutated IR so that it still reaches the parser.

A saved file is today the bare IR FlatBuffer. It may gain a header (magic,
version, length, checksum of the IR). A mutation of the IR would then be
refused by the checksum before any parser runs, so the fuzzer *seals* each
mutated body the way the library would, and keeps a raw mode (no re-seal) to
test the integrity check itself.

How sealing is found, in order:
1. the library's own function: ``dyngraph.serialization.seal(body) -> bytes``
   (or ``seal_ir``), when it exists — the contract this fuzzer asks for;
2. discovery from a file the library saved: the bytes in front of the IR are
   the header; the fields that hold the IR's length or a checksum of it
   (CRC-32, CRC-32C, Adler-32, xxHash when installed, SHA-256, BLAKE2b,
   MD5 prefixes; little or big endian; over the IR or over the file past
   any field) are located once and rewritten for each new body;
3. none needed: the file is the bare IR.

``describe()`` says which one is in use; the fuzzer prints it at start.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from typing import Callable, List, Optional, Tuple

from .irmodel import body_offset


def _crc32c_table():
    poly = 0x82F63B78
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C = None


def crc32c(data: bytes) -> int:
    try:
        import google_crc32c  # noqa: F401  (fast, when present)

        return int(google_crc32c.value(data))
    except ImportError:
        pass
    global _CRC32C
    if _CRC32C is None:
        _CRC32C = _crc32c_table()
    t = _CRC32C
    c = 0xFFFFFFFF
    for b in data:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def _digests(data: bytes) -> List[Tuple[str, bytes]]:
    out = []
    c = zlib.crc32(data) & 0xFFFFFFFF
    out += [("crc32-le", struct.pack("<I", c)), ("crc32-be", struct.pack(">I", c))]
    a = zlib.adler32(data) & 0xFFFFFFFF
    out += [("adler32-le", struct.pack("<I", a))]
    if len(data) <= (4 << 20):  # the pure-Python CRC-32C is slow: only for small files
        c = crc32c(data)
        out += [("crc32c-le", struct.pack("<I", c)), ("crc32c-be", struct.pack(">I", c))]
    try:
        import xxhash

        out += [("xxh64-le", struct.pack("<Q", xxhash.xxh64_intdigest(data))),
                ("xxh32-le", struct.pack("<I", xxhash.xxh32_intdigest(data))),
                ("xxh3-le", struct.pack("<Q", xxhash.xxh3_64_intdigest(data)))]
    except ImportError:
        pass
    for name in ("sha256", "blake2b", "md5"):
        out.append((name, hashlib.new(name, data).digest()))
    return out


def _digest(name: str, data: bytes) -> bytes:
    for n, d in _digests(data):
        if n == name:
            return d
    raise KeyError(name)


class Sealer:
    """Turns a bare IR into a file the loader accepts, and back."""

    def __init__(self, kind: str, header: bytes = b"", fields: Optional[list] = None,
                 seal_fn: Optional[Callable[[bytes], bytes]] = None):
        self.kind = kind
        self.header = header
        self.fields = fields or []  # (offset in header, kind, name, span start in the file or None for the body)
        self.seal_fn = seal_fn

    def describe(self) -> str:
        if self.kind == "library":
            return "sealing: the library's dyngraph.serialization.seal"
        if self.kind == "bare":
            return "sealing: none needed (a saved file is the bare IR)"
        f = ", ".join(f"{k} {n} at header byte {o}" for o, k, n, _ in self.fields) or "NO checksum found: mutations stop at it"
        return f"sealing: a {len(self.header)}-byte header, rewritten: {f}"

    def seal(self, body: bytes) -> bytes:
        if self.kind == "library":
            return bytes(self.seal_fn(body))
        if self.kind == "bare":
            return body
        head = bytearray(self.header)
        for off, kind, name, span in sorted(self.fields, key=lambda f: f[1] != "length"):
            if kind == "length":
                total = len(head) + len(body)
                v = {"body32": len(body), "file32": total, "body64": len(body), "file64": total}[name]
                fmt = "<I" if name.endswith("32") else "<Q"
                struct.pack_into(fmt, head, off, v & ((1 << (8 * struct.calcsize(fmt))) - 1))
        for off, kind, name, span in self.fields:
            if kind == "digest":
                data = body if span is None else (bytes(head) + body)[span:]
                d = _digest(name, data)
                head[off : off + len(d)] = d
        return bytes(head) + body

    @staticmethod
    def unseal(file: bytes) -> bytes:
        """The IR inside a file (the bytes from its FlatBuffer root on)."""
        return file[body_offset(file):]


def discover(sample_file: bytes, use_library: bool = True) -> Sealer:
    """A Sealer for the format of ``sample_file`` (a file the library saved):
    the library's own sealing function when it has one (and ``use_library``),
    else the header fields found by comparing the header with the body."""
    if use_library:
        try:
            from dyngraph import serialization

            for name in ("seal", "seal_ir"):
                fn = getattr(serialization, name, None)
                if callable(fn):
                    return Sealer("library", seal_fn=fn)
        except ImportError:
            pass
    off = body_offset(sample_file)
    if off == 0:
        return Sealer("bare")
    header, body = sample_file[:off], sample_file[off:]
    fields = []
    for name, fmt, v in (("body32", "<I", len(body)), ("file32", "<I", len(sample_file)),
                         ("body64", "<Q", len(body)), ("file64", "<Q", len(sample_file))):
        i = header.find(struct.pack(fmt, v))
        if i >= 0 and not any(i < o + 8 and o < i + struct.calcsize(fmt) for o, *_ in fields):
            fields.append((i, "length", name, None))
    spans = [None] + list(range(0, off + 1, 4))
    found = False
    for span in spans:
        data = body if span is None else sample_file[span:]
        for name, d in _digests(data):
            i = header.find(d)
            if i >= 0 and (span is None or i + len(d) <= span):
                fields.append((i, "digest", name, span))
                found = True
                break
        if found:
            break
    return Sealer("header", header, fields)
