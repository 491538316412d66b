"""The fuzzer's own machinery: the IR codec, the re-sealing of mutated bodies,
the mutators, and the catching of crashes, aborts and hangs."""

from __future__ import annotations

import json
import os
import random
import re
import selectors
import struct
import sys
import time

import numpy as np
import pytest

import dyngraph as dg

from . import irmodel as ir
from .container import Sealer, crc32c, discover
from .fuzzer import Generator, Seed, Worker, Zygote, generate_seeds
from .mutate import Ctx, mutate_bytes, mutate_structure


ASAN = "asan" in os.environ.get("LD_PRELOAD", "")


@pytest.fixture(scope="module")
def seeds_dir(tmp_path_factory):
    """Seeds made as the fuzzer makes them: in a child process, by the release build
    (under the sanitizer job too: saving them is not what these tests test)."""
    d = str(tmp_path_factory.mktemp("seeds"))
    generate_seeds(d, sys.executable, ["mlp", "shape", "llama", "ops"])
    return d


def test_irmodel_roundtrips_the_seeds(seeds_dir):
    for kind in ("mlp", "shape", "llama", "ops"):
        with open(os.path.join(seeds_dir, f"{kind}.dg"), "rb") as f:
            raw = f.read()
        body = raw[ir.body_offset(raw):]
        m = ir.decode(body)
        assert ir.decode(ir.encode(m)) == m
        assert len(m.ops) >= 2 and len(m.tensors) >= 3


def test_an_encoded_model_loads_and_computes_like_the_original(seeds_dir, engine, tmp_path):
    with open(os.path.join(seeds_dir, "mlp.dg"), "rb") as f:
        raw = f.read()
    sealer = discover(raw)
    path = tmp_path / "re.dg"
    path.write_bytes(sealer.seal(ir.encode(ir.decode(raw[ir.body_offset(raw):]))))
    x = np.random.default_rng(1).standard_normal((5, 16)).astype(np.float32)
    (a,) = dg.load(os.path.join(seeds_dir, "mlp.dg"), engine)(x)
    (b,) = dg.load(path, engine)(x)
    np.testing.assert_array_equal(a, b)


def test_a_model_written_with_sharing_reads_back_and_computes_the_same(seeds_dir, engine, tmp_path):
    """encode(share=True) refers to one copy of each equal vector and string: the same
    model, a smaller file, loaded and run like the plain one (sharing that does not
    amplify is within the reader's copy budget)."""
    with open(os.path.join(seeds_dir, "mlp.dg"), "rb") as f:
        raw = f.read()
    m = ir.decode(raw[ir.body_offset(raw):])
    shared = ir.encode(m, share=True)
    assert ir.decode(shared) == m and len(shared) < len(ir.encode(m))
    path = tmp_path / "shared.dg"
    path.write_bytes(discover(raw).seal(shared))
    x = np.random.default_rng(2).standard_normal((3, 16)).astype(np.float32)
    np.testing.assert_array_equal(dg.load(path, engine)(x)[0], dg.load(os.path.join(seeds_dir, "mlp.dg"), engine)(x)[0])


def test_a_fanout_written_with_sharing_is_a_typed_error(seeds_dir, engine, tmp_path):
    """The fanout mutator's 16 copies of a Concat with one 40,000-input list (within the
    limit of op inputs), the list written once: a file far smaller than what a reader
    copying per reference makes."""
    from .mutate import m_fanout

    with open(os.path.join(seeds_dir, "ops.dg"), "rb") as f:
        raw = f.read()
    m = ir.decode(raw[ir.body_offset(raw):])

    class Widest(random.Random):  # the Concat, the widest input list, 16 copies
        def choice(self, seq):
            if all(isinstance(v, ir.Op) for v in seq):
                return next(o for o in seq if o.name.startswith("concat"))
            return 16 if 16 in seq else max(seq)

        def random(self):  # each copy writes a tensor of its own
            return 0.0

    assert re.match(r"op concat_\d+ x16 with 40000 inputs", m_fanout(Widest(3), m, None))
    body = ir.encode(m, share=True)
    assert len(body) * 10 < 16 * 4 * 40000
    path = tmp_path / "fanout.dg"
    path.write_bytes(discover(raw).seal(body))
    with pytest.raises(dg.IRError, match="referred to more than once"):
        dg.load(path, engine)
    with pytest.raises(dg.IRError, match="referred to more than once"):
        dg._backend.CompiledPartition(body, {}, engine.impl, 16)  # the C++ reader alone


def test_a_changed_dimension_reaches_the_loader_as_a_typed_error(seeds_dir, engine, tmp_path):
    with open(os.path.join(seeds_dir, "mlp.dg"), "rb") as f:
        raw = f.read()
    m = ir.decode(raw[ir.body_offset(raw):])
    w1 = next(t for t in m.tensors if t.name == "w1")
    m.exprs.append((0, 17, 0))
    w1.shape[0] = len(m.exprs) - 1  # [17, 32] with data for [16, 32]
    path = tmp_path / "bad.dg"
    path.write_bytes(discover(raw).seal(ir.encode(m)))
    with pytest.raises(dg.IRError, match="w1"):
        dg.load(path, engine)


def test_a_header_checksum_is_found_and_rewritten():
    """A made-up container (magic, body length, CRC-32C of the body): the
    discovered sealer gives a new body a header the same format would give it."""
    body = ir.encode(ir.Program(version=1, exprs=[(0, 3, 0)]))

    def container(b: bytes) -> bytes:
        return b"DGF1" + struct.pack("<IQ", crc32c(b), len(b)) + b

    s = discover(container(body), use_library=False)
    assert s.kind == "header" and any(f[1] == "digest" and f[2] == "crc32c-le" for f in s.fields), s.describe()
    other = body + b"\0" * 8
    assert s.seal(other) == container(other)
    assert Sealer.unseal(container(other)) == other


def test_mutators_are_repeatable_given_the_seed(seeds_dir):
    seeds = [Seed(k, seeds_dir) for k in ("mlp", "shape")]
    with open(os.path.join(seeds_dir, "schema.json")) as f:
        ctx = Ctx(json.load(f), [s.body for s in seeds])

    def bodies(seed):
        g = Generator(seeds, ctx, random.Random(seed), 0.3)
        return [g.next(i)["body"] for i in range(40)]

    assert bodies(5) == bodies(5)
    assert bodies(5) != bodies(6)
    rng = random.Random(0)
    changed = sum(ir.encode(mutate_structure(rng, seeds[0].model, ctx)[0]) != seeds[0].body for _ in range(50))
    assert changed >= 45
    assert all(mutate_bytes(rng, seeds[0].body, ctx)[0] != seeds[0].body for _ in range(20))


def test_the_parent_catches_crashes_aborts_hangs_and_goes_on(seeds_dir, monkeypatch):
    """Workers forked by the zygote: each selftest ends its worker the way a bug would."""
    if ASAN and os.environ.get("DG_SANITIZER_EXPECTED_LOG"):  # these reports are wanted: keep them aside
        monkeypatch.setenv("ASAN_OPTIONS", re.sub(r"log_path=[^:]*", "log_path=" + os.environ["DG_SANITIZER_EXPECTED_LOG"],
                                                  os.environ["ASAN_OPTIONS"]))
    z = Zygote(sys.executable, seeds_dir, 4096)
    sel = selectors.DefaultSelector()
    seen = {}
    try:
        for what, limit in (("segv", 20), ("abort", 20), ("fpe", 20), ("hang", 2), ("ok", 20)):
            w = Worker(z, sel)
            task = {"idx": 1, "kind": "mlp", "mode": "raw", "seal": "yes", "selftest": None if what == "ok" else what,
                    "body": Seed("mlp", seeds_dir).body}
            end = time.monotonic() + 60
            result = None
            while result is None and time.monotonic() < end:
                if w.ready and w.task is None:
                    w.send(task)
                for key, _ in sel.select(0.05):
                    for line in key.data.lines():
                        if line is None:
                            result = ("died", w.wait())
                        elif line.startswith("R"):
                            w.ready = True
                        elif line.startswith("D"):
                            result = ("done", line.split(" ", 2)[2])
                if w.task is not None and time.monotonic() - w.t0 > limit:
                    w.kill()
                    result = ("hang", w.wait())
            w.close()
            seen[what] = result
    finally:
        z.close()
    # ASan reports a SIGSEGV or SIGFPE itself and exits with status 1
    assert seen["segv"] == ("died", 1 if ASAN else -11)
    assert seen["abort"] == ("died", -6)
    assert seen["fpe"] == ("died", 1 if ASAN else -8)
    assert seen["hang"] == ("hang", -9)
    assert seen["ok"] == ("done", "ok")
