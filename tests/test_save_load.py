"""A compiled partition saves to one file and loads back in another process;
malformed files raise IRError and never crash."""


import os

import numpy as np
import pytest

import dyngraph as dg
from dyngraph.ir_reader import read_program
from dyngraph.ir_writer import write_program
from dyngraph.serialization import CHECKSUM_CRC32C, FORMAT_VERSION, HEADER, HEADER_SIZE, MAGIC, checksum, write_file
from subproc import run_python


def lt(i, shape=None, **kw):
    return dg.LogicalTensor(i, dg.f32, shape, **kw)


@pytest.fixture
def mlp(engine, rng):
    """y = relu(x @ w1 + b1)[:, :seq-independent slice] ... a small MLP with a dynamic batch."""
    n = dg.Dim("n", min=1, max=512)
    x, w1, b1, w2 = lt(0, [n, 8], name="x"), lt(1, [8, 16], property=dg.CONSTANT), lt(2, [16], property=dg.CONSTANT), lt(3, [16, 4], property=dg.CONSTANT)
    h, a, y = lt(4), lt(5), lt(6, name="y")
    g = dg.Graph()
    g.add_op(dg.Op(0, dg.OpKind.MatMul, [x, w1, b1], [h]))
    g.add_op(dg.Op(1, dg.OpKind.GELU, [h], [a], {"mode": "tanh"}))
    g.add_op(dg.Op(2, dg.OpKind.MatMul, [a, w2], [y]))
    g.finalize()
    (p,) = g.get_partitions()
    consts = {1: rng.standard_normal((8, 16), dtype=np.float32), 2: rng.standard_normal(16, dtype=np.float32),
              3: rng.standard_normal((16, 4), dtype=np.float32)}
    return p.compile([x, w1, b1, w2], [y], engine, constants=consts)


def test_a_saved_partition_runs_in_a_fresh_process(mlp, tmp_path, rng):
    path = tmp_path / "mlp.dgir"
    mlp.save(path)
    xs = [rng.standard_normal((n, 8), dtype=np.float32) for n in (1, 5, 33)]
    np.savez(tmp_path / "x.npz", *xs)
    expected = [mlp(x)[0] for x in xs]
    code = f"""
import sys, numpy as np
import dyngraph as dg
assert 'torch' not in sys.modules
cp = dg.load({str(path)!r})
xs = np.load({str(tmp_path / 'x.npz')!r})
outs = [cp(xs[k])[0] for k in sorted(xs.files, key=lambda s: int(s.split('_')[1]))]
np.savez({str(tmp_path / 'y.npz')!r}, *outs)
print(cp.cache_info().builds)
"""
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "3"
    got = np.load(tmp_path / "y.npz")
    for k, e in enumerate(expected):
        np.testing.assert_array_equal(got[f"arr_{k}"], e)


def test_load_keeps_dynamic_shapes_and_names(mlp, tmp_path):
    path = tmp_path / "mlp.dgir"
    mlp.save(path)
    cp = dg.load(path, dg.Engine(num_threads=1))
    assert str(cp.get_inputs()[0].shape[0]) == "n" and cp.get_inputs()[0].name == "x"
    (y,) = cp.infer_outputs([lt(0, [7, 8])])
    assert y.shape == (7, 4)
    with pytest.raises(dg.ShapeError, match="outside its range \\[1, 512\\]"):
        cp.infer_outputs([lt(0, [513, 8])])


def saved_bytes(mlp, tmp_path) -> bytes:
    path = tmp_path / "m.dgir"
    mlp.save(path)
    return path.read_bytes()


def body_of(blob: bytes) -> bytes:
    return blob[HEADER_SIZE:]


def resealed(body: bytes) -> bytes:
    """A file whose header matches ``body``: what a mutated IR looks like when
    its checksum was recomputed (so the IR checks are what refuses it)."""
    return HEADER.pack(MAGIC, FORMAT_VERSION, CHECKSUM_CRC32C, len(body), checksum(body), bytes(36)) + body


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda b: b"", "too short"),
        (lambda b: b[:40], "too short"),
        (lambda b: b[: len(b) // 2], "truncated or damaged"),
        (lambda b: b + b"\0", "truncated or damaged"),
        (lambda b: b"XXXX" + b[4:], "not a dyngraph file"),
        (lambda b: b[:12] + b"\x07" + b[13:], "unknown checksum kind"),
        (lambda b: b[:8] + b"\x02" + b[9:], "format version 2"),
        (lambda b: b[:40] + b"\x01" + b[41:], "reserved bytes"),
        (lambda b: b[:100] + bytes([b[100] ^ 1]) + b[101:], "checksum does not match"),
        (lambda b: b[:-1] + bytes([b[-1] ^ 0x80]), "checksum does not match"),
        (lambda b: body_of(b), "without a file header"),
        (lambda b: bytes(np.random.default_rng(1).integers(0, 256, len(b), dtype=np.uint8)), "not a dyngraph file"),
        (lambda b: resealed(body_of(b)[:4] + b"XXXX" + body_of(b)[8:]), "not a dyngraph IR"),
        (lambda b: resealed(body_of(b)[: len(b) // 2]), "malformed|truncated"),
    ],
)
def test_malformed_files_raise_ir_error(mlp, tmp_path, mutate, match):
    path = tmp_path / "bad.dgir"
    path.write_bytes(mutate(saved_bytes(mlp, tmp_path)))
    with pytest.raises(dg.IRError, match=match):
        dg.load(path)


def test_a_missing_file_raises_ir_error(tmp_path):
    with pytest.raises(dg.IRError, match="cannot read"):
        dg.load(tmp_path / "nope.dgir")


def test_a_fifo_is_refused_at_once(tmp_path):
    """Opening a FIFO for reading would wait for a writer forever."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    code = f"""
import dyngraph as dg
try:
    dg.load({str(fifo)!r})
except dg.IRError as e:
    print(e)
"""
    r = run_python(code, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "is a FIFO" in r.stdout


@pytest.mark.parametrize("path, what", [("/dev/zero", "a device"), (".", "a directory")])
def test_non_regular_files_are_refused(path, what):
    with pytest.raises(dg.IRError, match=what):
        dg.load(path)


def test_a_copied_load_does_not_depend_on_the_file(mlp, tmp_path, rng):
    """mmap_weights=False reads the file into memory: truncating or removing
    it afterwards changes nothing (a mapped load needs the file unchanged)."""
    path = tmp_path / "m.dgir"
    mlp.save(path)
    cp = dg.load(path, dg.Engine(num_threads=1), mmap_weights=False)
    with open(path, "r+b") as f:
        f.truncate(100)
    os.remove(path)
    x = rng.standard_normal((5, 8), dtype=np.float32)
    np.testing.assert_array_equal(cp(x)[0], mlp(x)[0])


def test_the_file_is_a_header_then_the_ir(mlp, tmp_path):
    blob = saved_bytes(mlp, tmp_path)
    magic, version, kind, size, crc, reserved = HEADER.unpack(blob[:HEADER_SIZE])
    assert (magic, version, kind, size, reserved) == (MAGIC, 1, CHECKSUM_CRC32C, len(blob) - 64, bytes(36))
    assert crc == checksum(blob[HEADER_SIZE:]) and blob[HEADER_SIZE + 4:HEADER_SIZE + 8] == b"DGIR"


def rewrite(mlp, tmp_path, edit) -> str:
    """Save, read back as a Program, edit it, write it out again (a well-formed but wrong IR)."""
    blob = saved_bytes(mlp, tmp_path)
    prog = read_program(body_of(blob))
    edit(prog)
    from dyngraph.ir_codes import DATA_ALIGN  # noqa: F401
    path = tmp_path / "edited.dgir"
    data = {i: mlp._impl.export_data(i) for i, t in enumerate(prog.tensors) if t.property is dg.CONSTANT}
    write_file(path, write_program(prog, data))
    return str(path)


def test_an_ir_whose_shapes_disagree_with_its_ops_is_refused(mlp, tmp_path):
    def edit(prog):
        y = prog.outputs[0]
        prog.tensors[y].shape = (prog.tensors[y].shape[0], dg.Expr.const(5))

    with pytest.raises(dg.IRError, match="produces f32 \\[n, 4\\] for tensor y, the IR records f32 \\[n, 5\\]"):
        dg.load(rewrite(mlp, tmp_path, edit))


def test_an_ir_with_data_of_the_wrong_size_is_refused(mlp, tmp_path):
    def edit(prog):
        prog.tensors[1].shape = (dg.Expr.const(8), dg.Expr.const(8))

    with pytest.raises(dg.IRError, match="bytes"):
        dg.load(rewrite(mlp, tmp_path, edit))


def test_fuzzed_files_never_crash_the_process(mlp, tmp_path):
    """Flip bytes of a saved IR many times, the checksum recomputed (so the IR
    checks see the damage): every load raises IRError or loads (and then runs)
    cleanly. Run in a child process so a crash fails the test."""
    path = tmp_path / "m.dgir"
    mlp.save(path)
    code = f"""
import numpy as np, dyngraph as dg
from dyngraph.serialization import HEADER, HEADER_SIZE, MAGIC, checksum
body = open({str(path)!r}, 'rb').read()[HEADER_SIZE:]
rng = np.random.default_rng(7)
meta_end = len(body) - 900  # the weights sit at the end; fuzz the metadata part harder
loaded = refused = 0
for trial in range(300):
    b = bytearray(body)
    for _ in range(int(rng.integers(1, 4))):
        pos = int(rng.integers(0, meta_end if trial % 3 else len(b)))
        b[pos] = int(rng.integers(0, 256))
    b = bytes(b)
    open({str(tmp_path / 'f.dgir')!r}, 'wb').write(HEADER.pack(MAGIC, 1, 1, len(b), checksum(b), bytes(36)) + b)
    try:
        cp = dg.load({str(tmp_path / 'f.dgir')!r}, dg.Engine(num_threads=1))
        cp(np.ones((3, 8), np.float32))
        loaded += 1
    except dg.DyngraphError:
        refused += 1
print(loaded, refused)
"""
    r = run_python(code, timeout=300)
    assert r.returncode == 0, f"child died: {r.returncode}\n{r.stderr[-2000:]}"
    loaded, refused = map(int, r.stdout.split())
    assert loaded + refused == 300 and refused > 0


@pytest.mark.parametrize("mmap_weights", [True, False])
def test_loaded_weights_are_used_in_place_from_the_mapped_file(mlp, tmp_path, rng, mmap_weights):
    import gc

    path = tmp_path / "mlp.dgir"
    mlp.save(path)
    cp = dg.load(path, dg.Engine(num_threads=1), mmap_weights=mmap_weights)
    gc.collect()  # nothing but the compiled partition holds the mapping
    info = cp.cache_info()
    if not mmap_weights:
        assert info.borrowed_bytes == 0
    elif info.panel_bytes:
        # f32 MatMul weights are written into panels and their pages of the file released; then
        # constants under 2 MiB (all of this MLP's) are copied too (tests/ops/test_f32_panels.py)
        assert info.borrowed_bytes == 0
    else:
        assert info.borrowed_bytes == info.constant_bytes - info.repacked_bytes > 0
    x = rng.standard_normal((6, 8), dtype=np.float32)
    np.testing.assert_array_equal(cp(x)[0], mlp(x)[0])
