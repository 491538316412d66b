"""The host attention kernel's path for 8 query rows or more (backend/kernels/attention_lanes.h):
16 query rows of a head in vector lanes, scores kept transposed, masks transposed per key block.
Tested where its tiles and groups have edges (groups of 16 rows with a partial last one, Q K^T
tiles of 6 keys, P V tiles of 6 value columns (12 and 12 in the AVX-512 variant, then 4, 2, 1), mask
blocks transposed 8 x 8 with keys left over,
key blocks of 512), with every mask kind (none, one f32 row shared, an f32 row per query, a bool
row per query or shared), the causal cut with fewer or more keys than rows, and its claim that a
row's result does not depend on the rows beside it. Reference: float64 numpy (test_attention)."""

import textwrap

import numpy as np
import pytest

import dyngraph as dg
from subproc import IMPORT_TESTS, run_python
from ops.test_attention import check, qkv, randn

SDPA = dg.OpKind.ScaledDotProductAttention


def compile_sdpa(shapes, mask_dtype=None, threads=1, **attrs):
    g = dg.GraphBuilder()
    dts = [dg.f32] * 3 + ([mask_dtype] if mask_dtype else [])
    ins = [g.input(f"in{i}", dt, s) for i, (s, dt) in enumerate(zip(shapes, dts))]
    g.output(g.op(SDPA, ins, attrs))
    return g.compile(dg.Engine(dg.Engine.CPU, num_threads=threads))


def mask_of(rng, kind, hq, s, t):
    """None, or a mask of `kind`: f32 shared by the rows [1,1,1,t] or one per row [1,hq,s,t]; bool the same."""
    if kind is None:
        return None
    if kind.endswith("alike"):  # one row per query, all the same (a padding mask expanded, then copied)
        return np.ascontiguousarray(np.broadcast_to(mask_of(rng, kind.split()[0] + " shared", hq, s, t), (1, hq, s, t)))
    shape = (1, 1, 1, t) if kind.endswith("shared") else (1, hq, s, t)
    if kind.startswith("f32"):
        m = randn(rng, shape) * 2
        m[rng.random(shape) < 0.2] = -np.inf
        return m
    return rng.random(shape) < 0.7


KINDS = [None, "f32 shared", "f32 rows", "f32 alike", "bool shared", "bool rows", "bool alike"]


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: str(k))
@pytest.mark.parametrize("is_causal", [False, True])
def test_group_and_tile_edges(rng, kind, is_causal):
    """Rows 8 .. 33 (one group, a partial one, two and a bit), keys 1 .. 520 (tiles of 6 or 12 and
    the 8 x 8 mask blocks with keys left over, a second key block), head sizes that fill no tile."""
    s, t = dg.Dim("s"), dg.Dim("t")
    for d, dv in ((1, 13), (7, 6), (80, 5)):
        mshape = None if kind is None else [1, 1, 1, t] if kind.endswith("shared") else [1, 2, s, t]
        mdt = None if kind is None else dg.f32 if kind.startswith("f32") else dg.boolean
        shapes = [[1, 2, s, d], [1, 1, t, d], [1, 1, t, dv]] + ([mshape] if mshape else [])
        cp = compile_sdpa(shapes, mdt, is_causal=is_causal)
        for S, T in ((8, 1), (15, 7), (16, 9), (17, 23), (33, 40), (20, 520)):
            q, k, v = qkv(rng, 1, 2, 1, S, T, d, dv)
            m = mask_of(rng, kind, 2, S, T)
            out = cp(*((q, k, v) if m is None else (q, k, v, m)))[0]
            check(out, q, k, v, m, is_causal=is_causal)


def test_a_row_does_not_depend_on_its_neighbours(rng):
    """The same query rows among 40 rows, among 9, among 70 and 130 (tasks of 64 rows, a last block
    of 6 joined to the one before), with 2 threads, and with a NaN row beside them: bitwise the same
    results (every operation is per lane); the NaN row is NaN and no other."""
    s = dg.Dim("s")
    cp = compile_sdpa([[1, 1, s, 32], [1, 1, 300, 32], [1, 1, 300, 32], [1, 1, 1, 300]], dg.f32)
    cp2 = compile_sdpa([[1, 1, s, 32], [1, 1, 300, 32], [1, 1, 300, 32], [1, 1, 1, 300]], dg.f32, threads=2)
    q, k, v = qkv(rng, 1, 1, 1, 130, 300, 32)
    m = randn(rng, (1, 1, 1, 300))
    all40 = cp(np.ascontiguousarray(q[:, :, :40]), k, v, m)[0]
    for rows, run in ((slice(20, 29), cp), (slice(0, 70), cp), (slice(0, 130), cp), (slice(0, 130), cp2)):
        got = run(np.ascontiguousarray(q[:, :, rows]), k, v, m)[0]
        start = rows.start
        np.testing.assert_array_equal(got[:, :, 20 - start:29 - start], all40[:, :, 20:29])
    q = np.ascontiguousarray(q[:, :, :40])
    qn = q.copy()
    qn[0, 0, 21, 3] = np.nan
    with_nan = cp(qn, k, v, m)[0]
    assert np.isnan(with_nan[0, 0, 21]).all()
    rest = np.r_[0:21, 22:40]
    np.testing.assert_array_equal(with_nan[:, :, rest], all40[:, :, rest])
    check(all40, q, k, v, m)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_causal_with_more_keys_than_rows(rng, threads):
    """Causal with the keys longer than the rows (key j is cut from row i when j > i, counted from 0)
    and shorter, rows of one group seeing different numbers of keys, across key blocks."""
    s, t = dg.Dim("s"), dg.Dim("t")
    cp = compile_sdpa([[1, 3, s, 16], [1, 3, t, 16], [1, 3, t, 16]], threads=threads, is_causal=True)
    for S, T in ((24, 700), (40, 10), (530, 530), (17, 1030)):
        q, k, v = qkv(rng, 1, 3, 3, S, T, 16)
        check(cp(q, k, v)[0], q, k, v, is_causal=True)


def test_rows_whose_keys_are_all_masked_in_a_group(rng):
    """Within one group of 16: rows every key of which is masked (zeros), rows masked in the first
    key block only, and rows that see everything, with a bool and an f32 mask."""
    for mdt in (dg.boolean, dg.f32):
        cp = compile_sdpa([[1, 1, 16, 8], [1, 1, 600, 8], [1, 1, 600, 8], [1, 1, 16, 600]], mdt)
        q, k, v = qkv(rng, 1, 1, 1, 16, 600, 8)
        keep = np.ones((1, 1, 16, 600), bool)
        keep[:, :, 3] = False
        keep[:, :, 5:9, :512] = False
        m = keep if mdt is dg.boolean else np.where(keep, 0.0, -np.inf).astype(np.float32)
        out = cp(q, k, v, m)[0]
        check(out, q, k, v, m)
        assert not out[0, 0, 3].any()


@pytest.mark.parametrize("mdt", [dg.boolean, dg.f32], ids=["bool", "f32"])
def test_rows_alike_in_one_key_block_and_not_in_the_next(rng, mdt):
    """A mask row per query whose rows are the same over the first key block (read as one shared row)
    and differ in one row's key of the second (transposed): each block decides for itself."""
    cp = compile_sdpa([[1, 1, 20, 16], [1, 1, 700, 16], [1, 1, 700, 16], [1, 1, 20, 700]], mdt)
    q, k, v = qkv(rng, 1, 1, 1, 20, 700, 16)
    keep = np.broadcast_to(rng.random((1, 1, 1, 700)) < 0.8, (1, 1, 20, 700)).copy()
    keep[0, 0, 17, 600] = not keep[0, 0, 17, 600]
    m = keep if mdt is dg.boolean else np.where(keep, 0.0, -np.inf).astype(np.float32)
    check(cp(q, k, v, m)[0], q, k, v, m)


# -- keys masked out for every row of a task are not read (attention.cpp's keys_seen) --------------
# A static KV cache of T slots with only the first `filled` written, its empty slots masked out (-inf
# or False): the kernel reads the keys up to the last one some row of the task sees, as ggml's flash
# attention skips masked keys. The empty slots hold NaN here: read, they would make every row NaN.


def cache_mask(kind, hq, s, t, filled, rng):
    """Rows i of the query (positions filled - s + i) see the keys up to their own position (a causal
    mask over the cache), some of those masked at random; the slots from `filled` on are empty."""
    pos = filled - s + np.arange(s)[:, None]
    see = (np.arange(t)[None, :] <= pos) & (rng.random((hq, s, t)) < 0.8)
    see[..., 0] = True  # every row sees a key (the all-masked case is its own test)
    see = see[None]
    return np.where(see, randn(rng, see.shape), -np.inf).astype(np.float32) if kind == "f32" else see


@pytest.mark.parametrize("kind", ["f32", "bool"])
@pytest.mark.parametrize("rows", [1, 3, 7, 8, 16, 33])  # the few-row path (decoding) and the lanes
def test_empty_cache_slots_are_not_read(rng, kind, rows):
    s, t = dg.Dim("s"), dg.Dim("t")
    cp = compile_sdpa([[1, 6, s, 64], [1, 2, t, 64], [1, 2, t, 64], [1, 6, s, t]],
                      dg.f32 if kind == "f32" else dg.boolean, threads=2)
    T = 256
    for filled in (rows, rows + 5, 100):
        q, k, v = qkv(rng, 1, 6, 2, rows, T, 64)
        k[:, :, filled:], v[:, :, filled:] = np.nan, np.nan
        m = cache_mask(kind, 6, rows, T, filled, rng)
        out = cp(q, k, v, m)[0]
        assert not np.isnan(out).any(), (rows, filled)
        sl = slice(0, filled)
        check(out, q, k[:, :, sl], v[:, :, sl], m[..., sl])


@pytest.mark.parametrize("kind", ["f32", "bool"])
@pytest.mark.parametrize("rows", [1, 5, 8, 20])
def test_rows_with_every_key_masked_are_zero_without_reading_a_key(rng, kind, rows):
    s, t = dg.Dim("s"), dg.Dim("t")
    cp = compile_sdpa([[1, 3, s, 16], [1, 3, t, 16], [1, 3, t, 16], [1, 1, s, t]],
                      dg.f32 if kind == "f32" else dg.boolean)
    q, k, v = qkv(rng, 1, 3, 3, rows, 40, 16)
    k[:], v[:] = np.nan, np.nan
    m = np.full((1, 1, rows, 40), -np.inf, np.float32) if kind == "f32" else np.zeros((1, 1, rows, 40), bool)
    np.testing.assert_array_equal(cp(q, k, v, m)[0], np.zeros((1, 3, rows, 16), np.float32))


@pytest.mark.parametrize("rows", [2, 12])
def test_a_masked_key_before_the_last_seen_one_is_still_read(rng, rows):
    """Only the tail is skipped: a NaN key masked out in the middle of the seen keys makes the rows NaN
    (the f32 mask adds -inf to a NaN score), as before and as PyTorch computes it."""
    s, t = dg.Dim("s"), dg.Dim("t")
    cp = compile_sdpa([[1, 1, s, 8], [1, 1, t, 8], [1, 1, t, 8], [1, 1, 1, t]], dg.f32)
    q, k, v = qkv(rng, 1, 1, 1, rows, 30, 8)
    m = np.zeros((1, 1, 1, 30), np.float32)
    m[..., 10], m[..., 20:] = -np.inf, -np.inf
    k[:, :, 10] = np.nan
    k[:, :, 20:], v[:, :, 20:] = np.nan, np.nan
    assert np.isnan(cp(q, k, v, m)[0]).all()


WIDTHS = IMPORT_TESTS + textwrap.dedent("""
    import numpy as np
    import dyngraph as dg
    from ops.test_attention_lanes import width_cases
    np.save(OUT, np.concatenate([o.ravel() for o in width_cases()]))
""")


def width_cases():
    """Masked (f32 rows, bool shared) and causal GQA attention at 37, 128 and 700 rows, head sizes 32
    and 64 with 13 value columns: every tile of both widths and their remainders."""
    rng = np.random.default_rng(7)
    s, t = dg.Dim("s"), dg.Dim("t")
    outs = []
    for kind, causal, d, dv in (("f32 rows", False, 32, 32), ("bool shared", False, 64, 13), (None, True, 64, 64)):
        mshape = None if kind is None else [1, 1, 1, t] if kind.endswith("shared") else [1, 4, s, t]
        mdt = None if kind is None else dg.f32 if kind.startswith("f32") else dg.boolean
        cp = compile_sdpa([[1, 4, s, d], [1, 2, t, d], [1, 2, t, dv]] + ([mshape] if mshape else []), mdt,
                          is_causal=causal)
        for n in (37, 128, 700):
            q, k, v = qkv(rng, 1, 4, 2, n, n, d, dv)
            m = mask_of(rng, kind, 4, n, n)
            outs.append(cp(*((q, k, v) if m is None else (q, k, v, m)))[0])
    return outs


@pytest.mark.skipif(dg._backend.kernel_isa() not in ("avx512", "avx512vnni"),
                    reason="the AVX-512 variant (one 512-bit register of 16 lanes) needs an AVX-512 CPU")
def test_the_avx512_and_avx2_variants_give_the_same_bits(tmp_path):
    # attention_lanes.cpp: 16 lanes in one register, tiles of 12, against two registers of 8, tiles of 6:
    # every lane takes the same steps in the same order (both contract to FMAs), so the same bits
    here = np.concatenate([o.ravel() for o in width_cases()])
    out = tmp_path / "avx2.npy"
    r = run_python(f"OUT = {str(out)!r}\n" + WIDTHS, env_vars={"DYNGRAPH_KERNEL_ISA": "avx2"}, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    np.testing.assert_array_equal(np.load(out), here)
