"""The host CPU's attention kernel (backend/kernels/attention.h) at the sizes where its blocks
and tasks change: tasks of 64 query rows (a last block of fewer than 8 joined to the one before),
groups of 16 rows in lanes with a partial last group, several key blocks of 512, the causal cut
across blocks, decoding with the heads of a kv group as one task's rows (a group of 8 or more
split into chunks of at most 7), every thread count from 1 to 4 (tasks spread over threads, groups
split when there are fewer of them than threads), masks broadcast over rows and heads, rows every
key of which is masked, decoding split into key blocks and joined, and inputs read where they lie
(a transposed view from a permute).
Reference: float64 numpy (test_attention); the lanes' own edges: test_attention_lanes."""

import numpy as np
import pytest

import dyngraph as dg
from ops.test_attention import check, qkv, randn, reference, tolerance

SDPA = dg.OpKind.ScaledDotProductAttention


def compile_sdpa(shapes, threads, mask_dtype=None, **attrs):
    b = dg.GraphBuilder()
    dts = [dg.f32] * 3 + ([mask_dtype] if mask_dtype else [])
    ins = [b.input(f"in{i}", dt, s) for i, (s, dt) in enumerate(zip(shapes, dts))]
    b.output(b.op(SDPA, ins, attrs))
    return b.compile(dg.Engine(dg.Engine.CPU, num_threads=threads))


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("is_causal", [False, True])
def test_query_and_key_blocks(rng, threads, is_causal):
    """Sq from 5 to 1100 rows (partial last blocks and groups), Skv up to 1100 keys."""
    b, s, t = dg.Dim("b"), dg.Dim("s"), dg.Dim("t")
    cp = compile_sdpa([[b, 4, s, 32], [b, 2, t, 32], [b, 2, t, 32]], threads, is_causal=is_causal)
    for B, S, T in ((1, 33, 40), (2, 200, 513), (1, 800, 1100), (1, 1100, 1100), (1, 5, 1025)):
        q, k, v = qkv(rng, B, 4, 2, S, T, 32)
        out = cp(q, k, v)[0]
        check(out, q, k, v, is_causal=is_causal)


@pytest.mark.parametrize("threads", [1, 2, 4])
@pytest.mark.parametrize("hq,hkv", [(9, 3), (16, 2), (4, 4), (8, 1)])
def test_decode_groups(rng, threads, hq, hkv):
    """One query row: the group's heads are one task's rows (group 8: two chunks of 4) unless
    there are fewer such tasks than threads."""
    b, t = dg.Dim("b"), dg.Dim("t")
    cp = compile_sdpa([[b, hq, 1, 64], [b, hkv, t, 64], [b, hkv, t, 64], [b, 1, 1, t]], threads, dg.f32)
    for B, T in ((1, 1), (1, 700), (3, 2048)):
        q, k, v = qkv(rng, B, hq, hkv, 1, T, 64)
        m = randn(rng, (B, 1, 1, T))
        out = cp(q, k, v, m)[0]
        check(out, q, k, v, m)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("spec", ["rows", "full", "heads"])
def test_mask_broadcast_across_blocks(rng, threads, spec):
    """An f32 mask with one row for every query ([b,1,1,t]), one per (head, query), or per head,
    over several key and query blocks, with causal on."""
    b, s, t = dg.Dim("b"), dg.Dim("s"), dg.Dim("t")
    mshape = {"rows": [b, 1, 1, t], "full": [b, 6, s, t], "heads": [1, 6, 1, t]}[spec]
    cp = compile_sdpa([[b, 6, s, 16], [b, 3, t, 16], [b, 3, t, 16], mshape], threads, dg.f32, is_causal=True)
    for B, S, T in ((2, 70, 70), (1, 300, 600)):
        q, k, v = qkv(rng, B, 6, 3, S, T, 16)
        m = randn(rng, [B if d is b else S if d is s else T if d is t else d for d in mshape])
        out = cp(q, k, v, m)[0]
        check(out, q, k, v, m, is_causal=True)


def test_rows_masked_in_a_whole_key_block_then_not(rng):
    """A row whose first key block is all -inf and whose later block is not: the running max
    starts at -inf and the first finite block must not be scaled by e^(-inf - max)."""
    cp = compile_sdpa([[1, 2, 40, 16], [1, 2, 1024, 16], [1, 2, 1024, 16], [1, 1, 40, 1024]], 1, dg.boolean)
    q, k, v = qkv(rng, 1, 2, 2, 40, 1024, 16)
    m = np.ones((1, 1, 40, 1024), bool)
    m[:, :, :20, :512] = False  # rows 0-19 see only the second key block
    m[:, :, 30] = False  # row 30 sees nothing: zeros
    out = cp(q, k, v, m)[0]
    check(out, q, k, v, m)
    assert not out[:, :, 30].any()


@pytest.mark.parametrize("threads", [1, 2, 5])
@pytest.mark.parametrize("rows,hq,hkv,is_causal", [(1, 9, 3, False), (1, 4, 4, False), (3, 4, 2, True),
                                                   (7, 2, 1, False)])
def test_decoding_split_into_key_blocks(rng, threads, rows, hq, hkv, is_causal):
    """Decoding (1-7 rows) over more than 512 keys: each task's rows over each key block of 512, then the
    blocks joined. Rows that see no key of a whole block (the first, a middle one, the last in part) or
    none at all (0), bool masks as -inf in f32, a static cache's tail never seen, and the same bits on
    any thread count."""
    b, t = dg.Dim("b"), dg.Dim("t")
    cp = compile_sdpa([[b, hq, rows, 32], [b, hkv, t, 32], [b, hkv, t, 32], [b, hq, rows, t]], threads, dg.f32,
                      is_causal=is_causal)
    one = compile_sdpa([[b, hq, rows, 32], [b, hkv, t, 32], [b, hkv, t, 32], [b, hq, rows, t]], 1, dg.f32,
                       is_causal=is_causal)
    for B, T in ((1, 513), (2, 1500), (1, 2100)):
        q, k, v = qkv(rng, B, hq, hkv, rows, T, 32)
        m = randn(rng, (B, hq, rows, T))
        m[:, 0, :, :512] = -np.inf  # head 0 sees nothing of the first block
        m[:, -1, :, 512:1024] = -np.inf  # the last head nothing of the second
        m[..., T - 40:] = -np.inf  # a static cache's empty tail (NaN there is never read)
        k[..., T - 40:, :], v[..., T - 40:, :] = np.nan, np.nan
        m[-1, hq // 2, 0, :] = -np.inf  # one row sees nothing: 0
        out = cp(q, k, v, m)[0]
        assert not np.isnan(out).any()
        np.testing.assert_array_equal(out[-1, hq // 2, 0], 0.0)
        want = reference(q, np.nan_to_num(k), np.nan_to_num(v), m, is_causal=is_causal)
        np.testing.assert_allclose(out, want, rtol=0, atol=tolerance(q, np.nan_to_num(k), np.nan_to_num(v), m,
                                                                     is_causal=is_causal))
        np.testing.assert_array_equal(out, one(q, k, v, m)[0])
        assert [op for op, _ in _nodes(cp, (q, k, v, m))].count("CUSTOM") == 2  # the blocks, then their join


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("filled", [1, 100, 577, 1024, 2099])
def test_decoding_a_static_cache_reads_only_its_filled_keys(rng, threads, filled):
    """A bool mask over a static cache of 2100 slots, the first `filled` seen: the empty slots (NaN
    here) are skipped a run of 64 at a time and never read, in every key part; a masked slot before
    the last seen one is read, as PyTorch reads it (NaN there makes the row NaN)."""
    cp = compile_sdpa([[1, 9, 1, 32], [1, 3, 2100, 32], [1, 3, 2100, 32], [1, 1, 1, 2100]], threads, dg.boolean)
    q, k, v = qkv(rng, 1, 9, 3, 1, 2100, 32)
    m = np.zeros((1, 1, 1, 2100), bool)
    m[..., :filled] = True
    k[:, :, filled:], v[:, :, filled:] = np.nan, np.nan
    out = cp(q, k, v, m)[0]
    check(out, q, np.nan_to_num(k), np.nan_to_num(v), m)
    if filled > 2:
        m[..., filled - 2] = False  # masked, but before the last seen key
        v[:, 1, filled - 2] = np.nan
        out = cp(q, k, v, m)[0]
        assert np.isnan(out[:, 3:6]).all() and not np.isnan(out[:, :3]).any() and not np.isnan(out[:, 6:]).any()


@pytest.mark.parametrize("threads", [1, 2])
def test_decoding_over_more_than_32_key_blocks_takes_longer_parts(rng, threads):
    """Over 33 blocks of 512 keys the parts are 2 blocks long (at most 32 parts), the last one short."""
    cp = compile_sdpa([[1, 4, 1, 16], [1, 2, 16996, 16], [1, 2, 16996, 16]], threads)
    q, k, v = qkv(rng, 1, 4, 2, 1, 16996, 16)
    out = cp(q, k, v)[0]
    check(out, q, k, v)
    nodes = _nodes(cp, (q, k, v))
    assert ("CUSTOM", (18, 1, 4, 17)) in nodes  # [dv + 2, rows, heads, batch x parts]: 17 parts
    assert ("CUSTOM", (16, 1, 4, 1)) in nodes


@pytest.mark.parametrize("threads", [1, 2])
def test_strided_inputs_from_a_permute(rng, threads):
    """q, k, v as [b, s, h, d] in memory, permuted to [b, h, s, d]: the kernel reads the views."""
    b, s = dg.Dim("b"), dg.Dim("s")
    g = dg.GraphBuilder()
    xs = [g.input(n, dg.f32, [b, s, h, 16]) for n, h in (("q", 4), ("k", 2), ("v", 2))]
    ps = [g.op(dg.OpKind.StaticTranspose, [x], {"order": [0, 2, 1, 3]}) for x in xs]
    g.output(g.op(SDPA, ps, {"is_causal": True}))
    cp = g.compile(dg.Engine(dg.Engine.CPU, num_threads=threads))
    for B, S in ((1, 1), (2, 45), (1, 300)):
        q, k, v = randn(rng, (B, S, 4, 16)), randn(rng, (B, S, 2, 16)), randn(rng, (B, S, 2, 16))
        out = cp(q, k, v)[0]
        qt, kt, vt = (np.swapaxes(x, 1, 2) for x in (q, k, v))
        np.testing.assert_allclose(out, reference(qt, kt, vt, is_causal=True), rtol=0,
                                   atol=tolerance(qt, kt, vt, is_causal=True))


def _merge_heads_graph(threads, both=False, order=(0, 2, 1, 3)):
    """SDPA -> transpose(1, 2) -> ReLU: a model merging its heads ([b, h, s, d] -> [b, s, h, d]; with
    order (2, 0, 1, 3) a sequence-first one's, [s, b, h, d]). With `both`, the attention's output is
    also a partition output."""
    b, s, t = dg.Dim("b"), dg.Dim("s"), dg.Dim("t")
    g = dg.GraphBuilder()
    q, k, v = g.input("q", dg.f32, [b, 9, s, 16]), g.input("k", dg.f32, [b, 3, t, 16]), g.input("v", dg.f32, [b, 3, t, 8])
    o = g.op(SDPA, [q, k, v], {})
    merged = g.op(dg.OpKind.ReLU, [g.op(dg.OpKind.StaticTranspose, [o], {"order": list(order)})], {})
    g.output(*([merged, o] if both else [merged]))
    return g.compile(dg.Engine(dg.Engine.CPU, num_threads=threads))


def _nodes(cp, arrays):
    eng = cp.engine
    ins = [dg.Tensor(lt, eng, a) for lt, a in zip(cp.get_inputs(), arrays)]
    outs = [dg.Tensor(lt, eng, np.empty(lt.shape, lt.dtype.numpy)) for lt in cp.infer_outputs(ins)]
    return [(op, ne) for op, _, _, ne, _, _ in cp._impl.time_nodes(ins, outs, 1)]


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_output_written_with_heads_inner_for_a_merge_of_heads(rng, threads):
    """The kernel writes [b, s, h, dv] itself when a transpose of heads and rows is all that reads its
    output (no copy after it): decoding (a kv group's heads as one task's rows), one query block and
    several, each against the float64 reference."""
    cp = _merge_heads_graph(threads)
    for B, S, T in ((1, 1, 1), (2, 1, 37), (1, 5, 5), (2, 140, 140), (1, 300, 600)):
        q, k, v = qkv(rng, B, 9, 3, S, T, 16, 8)
        (out,) = cp(q, k, v)
        want = np.maximum(np.swapaxes(reference(q, k, v), 1, 2), 0.0)
        np.testing.assert_allclose(out, want, rtol=0, atol=tolerance(q, k, v))
        nodes = _nodes(cp, (q, k, v))
        assert ("CUSTOM", (8, 9, S, B)) in nodes  # the attention's own result: [dv, h, s, b] in ggml's order
        assert not [n for n in nodes if n[0] in ("CONT", "CPY", "DUP")], nodes


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_output_written_rows_first_for_a_sequence_first_merge_of_heads(rng, threads):
    """The same for a transpose to [s, b, h, dv] (nn.MultiheadAttention's order): the kernel writes
    the rows outermost and the transpose copies nothing."""
    cp = _merge_heads_graph(threads, order=(2, 0, 1, 3))
    for B, S, T in ((1, 1, 1), (3, 1, 37), (2, 5, 5), (3, 140, 140)):
        q, k, v = qkv(rng, B, 9, 3, S, T, 16, 8)
        (out,) = cp(q, k, v)
        want = np.maximum(np.transpose(reference(q, k, v), (2, 0, 1, 3)), 0.0)
        np.testing.assert_allclose(out, want, rtol=0, atol=tolerance(q, k, v))
        nodes = _nodes(cp, (q, k, v))
        assert ("CUSTOM", (8, 9, B, S)) in nodes  # [dv, h, b, s] in ggml's order
        assert not [n for n in nodes if n[0] in ("CONT", "CPY", "DUP")], nodes


def test_output_read_by_others_keeps_its_layout(rng):
    """Where another op (here: the partition's output) reads the attention's result too, it is
    written as [b, h, s, dv] and the transpose copies."""
    cp = _merge_heads_graph(2, both=True)
    for B, S, T in ((1, 1, 9), (2, 40, 40)):
        q, k, v = qkv(rng, B, 9, 3, S, T, 16, 8)
        merged, o = cp(q, k, v)
        want = reference(q, k, v)
        np.testing.assert_allclose(o, want, rtol=0, atol=tolerance(q, k, v))
        np.testing.assert_allclose(merged, np.maximum(np.swapaxes(want, 1, 2), 0.0), rtol=0, atol=tolerance(q, k, v))
        assert ("CUSTOM", (8, S, 9, B)) in _nodes(cp, (q, k, v))
