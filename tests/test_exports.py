"""The package's shared libraries export their own API and nothing else.

A library that exports the C++ standard library's template instantiations (or
any other library's symbols) can interpose on them for every library loaded
after it: a CUDA build's libggml-cuda exported about 2,000 libstdc++ symbols,
and _backend's calls into std::ostream landed in its copies and crashed at the
first compile. The build links every library with a version script
(cmake/*.map); this test reads the dynamic symbol tables of the libraries this
process actually loaded for dyngraph (the installed package or an in-tree
build) and fails on a symbol outside each library's API, whichever backends
(CPU, RPC, CUDA, ...) this build has."""

from __future__ import annotations

import functools
import os
import re

import pytest
from elftools.elf.elffile import ELFFile

import dyngraph as dg  # noqa: F401  (loads the extension and its libraries)

# library file name -> the exported names allowed
RULES = [
    (re.compile(r"^_backend\..*\.so$"), re.compile(r"^PyInit__backend$"), "the Python module's init function"),
    (re.compile(r"^libggml(-[a-z0-9]+)?\.so(\.\d+)*$"),
     re.compile(r"^(ggml_|gguf_|quantize_|dequantize_|iq[23]xs_|llamafile_sgemm$)"), "ggml's C API"),
    (re.compile(r"^libdyngraph\.so(\.\d+)*$"), re.compile(r"^dg_"), "dyngraph's C API"),
]


def loaded_libraries() -> dict[str, str]:
    """Path of each shared object mapped into this process, by file name."""
    out = {}
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(maxsplit=5)
            if len(parts) == 6 and parts[5].startswith("/") and ".so" in parts[5]:
                path = parts[5].strip()
                out.setdefault(os.path.basename(path), path)
    return out


@functools.lru_cache(maxsize=None)
def exported(path: str) -> frozenset[str]:
    """Names a shared object defines and exports (global or weak, default or protected visibility)."""
    names = set()
    with open(path, "rb") as f:
        dynsym = ELFFile(f).get_section_by_name(".dynsym")
        for s in dynsym.iter_symbols():
            if not s.name or s["st_shndx"] == "SHN_UNDEF":
                continue
            if s["st_info"]["bind"] in ("STB_GLOBAL", "STB_WEAK") and s["st_other"]["visibility"] in ("STV_DEFAULT", "STV_PROTECTED"):
                names.add(s.name)
    return frozenset(names)


LIBS = loaded_libraries()
OURS = {name: path for name, path in LIBS.items() if any(r[0].match(name) for r in RULES)}


def test_the_extension_and_ggml_are_among_the_loaded_libraries():
    names = set(OURS)
    assert any(n.startswith("_backend.") for n in names), names
    for lib in ("libggml.so", "libggml-base.so", "libggml-cpu.so"):
        assert any(n.startswith(lib) for n in names), (lib, names)


@pytest.mark.parametrize("name", sorted(OURS))
def test_a_library_exports_only_its_api(name):
    _, allowed, what = next(r for r in RULES if r[0].match(name))
    stray = sorted(n for n in exported(OURS[name]) if not allowed.match(n))
    assert not stray, f"{name} exports {len(stray)} symbols outside {what}, e.g. {stray[:8]}"


@functools.lru_cache(maxsize=None)
def exported_by_others() -> frozenset[str]:
    # the C++ runtime, libc, OpenBLAS, CUDA's runtime, ...: one definition each, theirs
    others = set()
    for other, path in LIBS.items():
        if other not in OURS:
            try:
                others |= exported(path)
            except Exception:  # not an ELF file we can read (a deleted mapping): nothing to compare
                continue
    return frozenset(others)


@pytest.mark.parametrize("name", sorted(OURS))
def test_a_library_defines_no_symbol_another_loaded_library_exports(name):
    clash = sorted(exported(OURS[name]) & exported_by_others())
    assert not clash, f"{name} exports symbols that other libraries define: {clash[:8]}"
