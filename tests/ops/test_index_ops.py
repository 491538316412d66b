"""Arange, GenIndex and Full against numpy, compiled once and run at several
shapes; and causal attention masks built from them, for a dynamic sequence
and for a KV cache of past + seq columns.

Every result is an exact integer or a constant, so comparisons are exact.
"""

import numpy as np
import pytest
from oputil import compile_op, run

import dyngraph as dg

K = dg.OpKind
D = dg.DYNAMIC_DIM


def lt(tid, dtype, shape=None, name=None):
    return dg.LogicalTensor(tid, dtype, shape, name=name)


def compiled(b: dg.GraphBuilder, *outputs, engine=None):
    b.output(*outputs)
    return b.compile(engine or dg.Engine(dg.Engine.CPU, num_threads=1))


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


# -- Arange ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "start,end,step",
    [(0, 5, 1), (2, 11, 3), (10, 0, -3), (-5, 5, 4), (7, 8, 1), (3, -4, -2)],
)
@pytest.mark.parametrize("dtype", [dg.i32, dg.i64, dg.f32])
def test_arange_static_matches_numpy(start, end, step, dtype):
    b = dg.GraphBuilder()
    cp = compiled(b, b.arange(start=start, end=end, step=step, dtype=dtype))
    (got,) = run(cp)
    want = np.arange(start, end, step).astype(dtype.numpy)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def _arange_plus_x(dtype, attrs):
    """out = arange(**attrs) + x, with x of shape [seq]: x binds seq."""
    seq = dg.Dim("seq", min=1, max=1024)
    b = dg.GraphBuilder()
    x = b.input("x", dtype, [seq])
    attrs = {k: (v(seq) if callable(v) else v) for k, v in attrs.items()}
    return compiled(b, b.add(b.arange(**attrs, dtype=dtype), x))


@pytest.mark.parametrize(
    "attrs,ref",
    [
        ({"end": lambda s: s}, lambda n: np.arange(n)),
        ({"start": lambda s: s - 1, "end": -1, "step": -1}, lambda n: np.arange(n - 1, -1, -1)),
        ({"start": 1, "end": lambda s: 2 * s, "step": 2}, lambda n: np.arange(1, 2 * n, 2)),
        ({"start": -3, "end": lambda s: s - 3}, lambda n: np.arange(-3, n - 3)),
    ],
    ids=["0..seq", "reversed", "odd", "shifted"],
)
@pytest.mark.parametrize("dtype", [dg.i32, dg.i64, dg.f32])
def test_arange_dynamic_length_matches_numpy(attrs, ref, dtype, rng):
    cp = _arange_plus_x(dtype, attrs)
    for n in (1, 7, 33):
        x = rng.integers(-50, 50, n).astype(dtype.numpy)
        (got,) = run(cp, x)
        np.testing.assert_array_equal(got, ref(n).astype(dtype.numpy) + x)
    assert cp.cache_info().builds == 3


def test_arange_rounds_its_length_up_for_every_seq(rng):
    """arange(0, seq, 2) has ceil(seq / 2) values; compared (broadcast) with x [seq, 1]."""
    seq = dg.Dim("seq")
    b = dg.GraphBuilder()
    x = b.input("x", dg.i32, [seq, 1])
    cp = compiled(b, b.less(x, b.arange(end=seq, step=2, dtype=dg.i32)))
    for n in (1, 7, 8, 33):
        xv = rng.integers(0, 40, (n, 1)).astype(np.int32)
        (got,) = run(cp, xv)
        assert got.shape == (n, (n + 1) // 2)
        np.testing.assert_array_equal(got, xv < np.arange(0, n, 2))


def test_arange_step_zero_is_a_graph_error():
    g = dg.Graph()
    g.add_op(dg.Op(0, K.Arange, [], [lt(1, dg.i32)], {"end": 4, "step": 0}))
    with pytest.raises(dg.GraphError, match="step must be nonzero"):
        g.finalize()


def test_arange_empty_is_a_shape_error():
    g = dg.Graph()
    g.add_op(dg.Op(0, K.Arange, [], [lt(1, dg.i32)], {"start": 5, "end": 5}))
    with pytest.raises(dg.ShapeError, match="empty"):
        g.finalize()


def test_arange_needs_an_end():
    g = dg.Graph()
    with pytest.raises(dg.GraphError, match="'end' is required"):
        g.add_op(dg.Op(0, K.Arange, [], [lt(1, dg.i32)], {"start": 5}))


def test_arange_output_dtype_must_be_i32_i64_or_f32():
    g = dg.Graph()
    g.add_op(dg.Op(0, K.Arange, [], [lt(1, dg.f16)], {"end": 4}))
    with pytest.raises(dg.DTypeError, match="f16"):
        g.finalize()


def test_arange_values_beyond_32_bits_are_refused():
    g = dg.Graph()
    g.add_op(dg.Op(0, K.Arange, [], [lt(1, dg.i64)], {"start": 2**31 - 2, "end": 2**31 + 2}))
    with pytest.raises(dg.GraphError, match="32-bit"):
        g.finalize()


def test_arange_of_an_unbound_dimension_fails_at_compile():
    seq = dg.Dim("seq")
    out = lt(1, dg.i32)
    g = dg.Graph()
    g.add_op(dg.Op(0, K.Arange, [], [out], {"end": seq}))
    g.finalize()
    (part,) = g.get_partitions()
    with pytest.raises(dg.CompileError, match="seq"):
        part.compile([], [out], dg.Engine(dg.Engine.CPU))


def test_arange_length_that_becomes_empty_at_execution_is_a_shape_error(rng):
    """arange(0, seq - 3) is fine for seq > 3 and refused (not computed) below."""
    seq = dg.Dim("seq")
    b = dg.GraphBuilder()
    x = b.input("x", dg.i32, [seq, 1])
    cp = compiled(b, b.less(x, b.arange(end=seq - 3, dtype=dg.i32)))
    (got,) = run(cp, np.zeros((5, 1), np.int32))
    np.testing.assert_array_equal(got, np.zeros((5, 1)) < np.arange(2))
    with pytest.raises(dg.ShapeError, match="positive"):
        run(cp, np.zeros((3, 1), np.int32))


# -- GenIndex -------------------------------------------------------------------


@pytest.mark.parametrize(
    "decl,shapes,axis",
    [
        ([D], [(1,), (6,), (33,)], 0),
        ([D, 5], [(1, 5), (7, 5), (33, 5)], 0),
        ([D, 5], [(1, 5), (7, 5), (33, 5)], -1),
        ([2, D, 3, D], [(2, 1, 3, 1), (2, 7, 3, 4), (2, 3, 3, 9)], 1),
        ([2, D, 3, D], [(2, 1, 3, 1), (2, 7, 3, 4), (2, 3, 3, 9)], 2),
        ([2, D, 3, D], [(2, 1, 3, 1), (2, 7, 3, 4), (2, 3, 3, 9)], 3),
        ([D, D, 4], [(1, 1, 4), (5, 2, 4), (3, 6, 4)], 0),
        # rank 5 and 6: the axes around `axis` merged (the outer ones are folded in ggml)
        ([2, D, 3, 2, D], [(2, 1, 3, 2, 1), (2, 4, 3, 2, 5)], 0),
        ([2, D, 3, 2, D], [(2, 1, 3, 2, 1), (2, 4, 3, 2, 5)], 1),
        ([2, D, 3, 2, D], [(2, 1, 3, 2, 1), (2, 4, 3, 2, 5)], -1),
        ([D, 2, 3, 1, 2, 3], [(1, 2, 3, 1, 2, 3), (4, 2, 3, 1, 2, 3)], 0),
        ([D, 2, 3, 1, 2, 3], [(1, 2, 3, 1, 2, 3), (4, 2, 3, 1, 2, 3)], 2),
        ([D, 2, 3, 1, 2, 3], [(1, 2, 3, 1, 2, 3), (4, 2, 3, 1, 2, 3)], 4),
    ],
)
@pytest.mark.parametrize("out_dtype", [dg.i32, dg.i64])
def test_gen_index_matches_numpy(decl, shapes, axis, out_dtype, rng):
    cp = compile_op(K.GenIndex, [decl], attrs={"axis": axis}, out_dtypes=out_dtype)
    for shape in shapes:
        (got,) = run(cp, rng.standard_normal(shape).astype(np.float32))
        want = np.indices(shape)[axis].astype(out_dtype.numpy)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_gen_index_of_an_integer_tensor(rng):
    cp = compile_op(K.GenIndex, [[D, 3]], in_dtypes=dg.i32, attrs={"axis": 1}, out_dtypes=dg.i32)
    for n in (1, 4, 9):
        (got,) = run(cp, rng.integers(0, 9, (n, 3)).astype(np.int32))
        np.testing.assert_array_equal(got, np.indices((n, 3))[1])


def test_gen_index_axis_out_of_range_is_a_shape_error():
    g = dg.Graph()
    g.add_op(dg.Op(0, K.GenIndex, [lt(0, dg.f32, [D, 4])], [lt(1, dg.i32)], {"axis": 2}))
    with pytest.raises(dg.ShapeError, match="axis 2"):
        g.finalize()


def test_gen_index_output_must_be_an_integer_type():
    g = dg.Graph()
    g.add_op(dg.Op(0, K.GenIndex, [lt(0, dg.f32, [D, 4])], [lt(1, dg.f32)], {"axis": 0}))
    with pytest.raises(dg.DTypeError):
        g.finalize()


# -- Full -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "dtype,value,want",
    [
        (dg.f32, 2.5, np.float32(2.5)),
        (dg.f32, -np.inf, np.float32(-np.inf)),
        (dg.f16, -1.5, np.float16(-1.5)),
        (dg.i32, -7.9, np.int32(-7)),  # truncated toward zero, as numpy does
        (dg.i64, 123456.0, np.int64(123456)),
        (dg.boolean, 0.5, np.bool_(True)),
        (dg.boolean, 0.0, np.bool_(False)),
    ],
)
@pytest.mark.parametrize("shape", [[], [3], [2, 3, 4, 5]])
def test_full_static_matches_numpy(dtype, value, want, shape):
    b = dg.GraphBuilder()
    cp = compiled(b, b.full(shape=shape, value=value, dtype=dtype))
    (got,) = run(cp)
    np.testing.assert_array_equal(got, np.full(shape, want))
    assert got.dtype == want.dtype


def test_full_bf16():
    b = dg.GraphBuilder()
    cp = compiled(b, b.full(shape=[2, 3], value=-0.75, dtype=dg.bf16))
    (got,) = run(cp)
    np.testing.assert_array_equal(bf16_to_f32(np.asarray(got).view(np.uint16)), np.full((2, 3), -0.75, np.float32))


def test_full_of_a_dynamic_shape_has_the_executed_size(rng):
    """Full([seq, 3], 2.5) + x for x of shape [seq, 3]: filled at each seq."""
    seq = dg.Dim("seq")
    b = dg.GraphBuilder()
    x = b.input("x", dg.f32, [seq, 3])
    cp = compiled(b, b.add(x, b.full(shape=[seq, 3], value=2.5, dtype=dg.f32)))
    for n in (1, 7, 33):
        xv = rng.standard_normal((n, 3)).astype(np.float32)
        (got,) = run(cp, xv)
        np.testing.assert_array_equal(got, xv + np.float32(2.5))


def test_full_integer_value_that_does_not_fit_is_a_dtype_error():
    g = dg.Graph()
    g.add_op(dg.Op(0, K.Full, [], [lt(1, dg.i32)], {"shape": [2], "value": float("inf")}))
    with pytest.raises(dg.DTypeError, match="inf"):
        g.finalize()


def test_full_zero_dimension_is_a_shape_error():
    g = dg.Graph()
    g.add_op(dg.Op(0, K.Full, [], [lt(1, dg.f32)], {"shape": [2, 0], "value": 1.0}))
    with pytest.raises(dg.ShapeError, match="positive"):
        g.finalize()


# -- causal masks from primitives ---------------------------------------------------


def np_causal_mask(seq: int, past: int = 0) -> np.ndarray:
    """mask[i, j] = 0 where key j is at or before query i (at position past + i), else -inf."""
    q = past + np.arange(seq)[:, None]
    k = np.arange(past + seq)[None, :]
    return np.where(k <= q, np.float32(0), np.float32(-np.inf)).astype(np.float32)


def test_causal_mask_from_gen_index_dynamic_seq(rng):
    """scores + mask, mask = Select(row >= col, 0, -inf) with row/col from GenIndex."""
    seq = dg.Dim("seq", min=1, max=4096)
    b = dg.GraphBuilder()
    scores = b.input("scores", dg.f32, [seq, seq])
    keep = b.greater_equal(b.gen_index(scores, axis=0, dtype=dg.i32), b.gen_index(scores, axis=1, dtype=dg.i32))
    mask = b.select(keep, b.full(shape=[], value=0.0, dtype=dg.f32), b.full(shape=[], value=float("-inf"), dtype=dg.f32))
    cp = compiled(b, b.add(scores, mask, name="out"))
    for n in (1, 7, 33):
        s = rng.standard_normal((n, n)).astype(np.float32)
        (got,) = run(cp, s)
        np.testing.assert_array_equal(got, s + np_causal_mask(n))
    info = cp.cache_info()
    assert (info.builds, info.entries) == (3, 3)


def _kv_mask_partition(engine=None):
    """Mask for queries at positions past .. past+seq-1 over past+seq keys,
    from Arange (positions), StaticReshape, GreaterEqual, Full and Select,
    added to scores of shape [seq, past + seq]."""
    seq = dg.Dim("seq", min=1, max=4096)
    past = dg.Dim("past", min=1, max=4096)  # symbols are >= 1 (no zero-size dimensions)
    b = dg.GraphBuilder()
    scores = b.input("scores", dg.f32, [seq, past + seq])
    qcol = b.static_reshape(b.arange(start=past, end=past + seq, dtype=dg.i32), shape=[seq, 1])
    keep = b.greater_equal(qcol, b.arange(end=past + seq, dtype=dg.i32))
    mask = b.select(keep, b.full(shape=[], value=0.0, dtype=dg.f32), b.full(shape=[], value=float("-inf"), dtype=dg.f32))
    return compiled(b, b.add(scores, mask, name="out"), engine=engine)


KV_CASES = [(1, 1), (1, 7), (5, 1), (16, 7), (3, 33), (40, 1)]


def test_causal_mask_for_a_kv_cache_of_past_plus_seq(rng):
    cp = _kv_mask_partition()
    for past, n in KV_CASES:
        s = rng.standard_normal((n, past + n)).astype(np.float32)
        (got,) = run(cp, s)
        assert got.shape == (n, past + n)
        np.testing.assert_array_equal(got, s + np_causal_mask(n, past))
    assert cp.cache_info().builds == len(KV_CASES)


def test_kv_mask_partition_saves_and_loads(tmp_path, rng):
    """Arange's expression start (past) survives the IR file."""
    cp = _kv_mask_partition()
    path = tmp_path / "mask.dgir"
    cp.save(path)
    loaded = dg.load(path, dg.Engine(dg.Engine.CPU, num_threads=1))
    for past, n in ((1, 3), (9, 4)):
        s = rng.standard_normal((n, past + n)).astype(np.float32)
        (got,) = run(loaded, s)
        np.testing.assert_array_equal(got, s + np_causal_mask(n, past))


def test_index_ops_with_several_threads(rng):
    """The kernels split rows and elements across threads: same results."""
    eng = dg.Engine(dg.Engine.CPU, num_threads=2)
    cp = compile_op(K.GenIndex, [[D, D]], attrs={"axis": 0}, out_dtypes=dg.i32, engine=eng)
    for shape in ((1, 1), (37, 5), (3, 64)):
        (got,) = run(cp, np.zeros(shape, np.float32))
        np.testing.assert_array_equal(got, np.indices(shape)[0])
    b = dg.GraphBuilder()
    cp = compiled(b, b.arange(start=-20, end=1000, step=7, dtype=dg.f32), engine=eng)
    np.testing.assert_array_equal(run(cp)[0], np.arange(-20, 1000, 7).astype(np.float32))
    b = dg.GraphBuilder()
    cp = compiled(b, b.full(shape=[3, 5, 7], value=4.0, dtype=dg.i32), engine=eng)
    np.testing.assert_array_equal(run(cp)[0], np.full((3, 5, 7), 4, np.int32))
    cp = _kv_mask_partition(eng)  # GreaterEqual, Select, Full, Arange
    for past, n in ((1, 1), (6, 29)):
        s = rng.standard_normal((n, past + n)).astype(np.float32)
        np.testing.assert_array_equal(run(cp, s)[0], s + np_causal_mask(n, past))
