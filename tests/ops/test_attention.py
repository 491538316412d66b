"""ScaledDotProductAttention against a float64 numpy reference.

Every numerics test compiles the op once, with named dynamic dimensions
(b: batch, s: query length, t: key/value length), and runs several shapes
through that one compiled partition.

On the host CPU the backend runs its own kernel (backend/kernels/attention.h,
flash attention with 16 query rows in vector lanes; test_attention_blocks.py
and test_attention_lanes.py test it at the sizes where its blocks change); on other devices (test_device_ops.py) ggml
flash attention (K/V in f32, the mask in f16) for no mask, a causal mask, a
bool mask or an f16 mask, and mul_mat + soft_max_ext for an f32 mask, which
f16 would round. All compute in f32, so the error scales with the size of
the scores (each is rounded to f32 before the softmax): the max abs error
measured over these tests, with 30 random seeds, was at most 0.5 * eps32 *
(1 + max|scores|) * max|v| on ggml's paths (1e-7 .. 2e-6 absolute);
tolerance() is eps32 * (1 + max|scores|) * max|v|.
"""

import numpy as np
import pytest

import dyngraph as dg
from oputil import compile_op, run

SDPA = dg.OpKind.ScaledDotProductAttention
F32_EPS = 2.0**-23
F16_U = 2.0**-11  # unit roundoff of f16
BF16_U = 2.0**-8  # unit roundoff of bf16


def scores(q, k, mask=None, scale=None, is_causal=False):
    """q @ k^T * scale + mask, in float64, with -inf where a key is masked out."""
    q, k = np.asarray(q, np.float64), np.asarray(k, np.float64)
    k = np.repeat(k, q.shape[-3] // k.shape[-3], axis=-3)  # query head h reads kv head h // (Hq/Hkv)
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ np.swapaxes(k, -1, -2) * scale
    if mask is not None:
        s = s + (np.where(mask, 0.0, -np.inf) if mask.dtype == np.bool_ else mask.astype(np.float64))
    if is_causal:
        sq, skv = s.shape[-2:]
        s = np.where(np.tril(np.ones((sq, skv), bool)), s, -np.inf)
    return s


def reference(q, k, v, mask=None, scale=None, is_causal=False):
    """torch.nn.functional.scaled_dot_product_attention(..., enable_gqa=True), in float64.
    A query row whose keys are all masked gives 0 (what torch does)."""
    s = scores(q, k, mask, scale, is_causal)
    v = np.asarray(v, np.float64)
    v = np.repeat(v, s.shape[-3] // v.shape[-3], axis=-3)
    top = s.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(s - top)
    den = e.sum(axis=-1, keepdims=True)
    p = np.divide(e, den, out=np.zeros_like(e), where=den > 0)
    return p @ v


def compile_sdpa(q, k, v, mask=None, dtype=dg.f32, mask_dtype=None, **attrs):
    shapes = [q, k, v] + ([mask] if mask is not None else [])
    dtypes = [dtype] * 3 + ([mask_dtype or dtype] if mask is not None else [])
    return compile_op(SDPA, shapes, dtypes, attrs=attrs)


def randn(rng, shape):
    return rng.standard_normal(shape, dtype=np.float32)


def qkv(rng, b, hq, hkv, s, t, d, dv=None):
    lead = (b,) if b is not None else ()
    return randn(rng, lead + (hq, s, d)), randn(rng, lead + (hkv, t, d)), randn(rng, lead + (hkv, t, dv or d))


def tolerance(q, k, v, mask=None, scale=None, is_causal=False):
    """The error bound of an f32 computation (see the module docstring)."""
    s = scores(q, k, mask, scale, is_causal)
    top = np.abs(s[np.isfinite(s)]).max(initial=0.0)
    return F32_EPS * (1 + top) * float(np.abs(np.asarray(v, np.float64)).max())


def check(out, q, k, v, mask=None, scale=None, is_causal=False):
    want = reference(q, k, v, mask, scale, is_causal)
    assert out.shape == want.shape
    np.testing.assert_allclose(out, want, rtol=0, atol=tolerance(q, k, v, mask, scale, is_causal))


# -- no mask, causal, GQA ---------------------------------------------------------------------------

# (hq, hkv, d, dv) and the (b, s, t) of the runs
HEADS = [(4, 4, 16, 16), (6, 2, 32, 32), (8, 1, 8, 8), (3, 3, 16, 24)]
RUNS = [(1, 1, 1), (2, 7, 7), (1, 5, 12), (3, 16, 16), (2, 12, 5)]


@pytest.mark.parametrize("hq,hkv,d,dv", HEADS)
def test_no_mask(rng, hq, hkv, d, dv):
    b, s, t = dg.Dim("b"), dg.Dim("s"), dg.Dim("t")
    cp = compile_sdpa([b, hq, s, d], [b, hkv, t, d], [b, hkv, t, dv])
    for B, S, T in RUNS:
        q, k, v = qkv(rng, B, hq, hkv, S, T, d, dv)
        (out,) = run(cp, q, k, v)
        check(out, q, k, v)


@pytest.mark.parametrize("hq,hkv,d,dv", HEADS)
def test_causal(rng, hq, hkv, d, dv):
    """Top-left aligned, also with Sq != Skv: query i sees keys 0..i."""
    b, s, t = dg.Dim("b"), dg.Dim("s"), dg.Dim("t")
    cp = compile_sdpa([b, hq, s, d], [b, hkv, t, d], [b, hkv, t, dv], is_causal=True)
    for B, S, T in RUNS:
        q, k, v = qkv(rng, B, hq, hkv, S, T, d, dv)
        (out,) = run(cp, q, k, v)
        check(out, q, k, v, is_causal=True)


def test_causal_one_query_sees_only_the_first_key(rng):
    q, k, v = qkv(rng, 1, 2, 2, 1, 6, 8)
    cp = compile_sdpa([1, 2, 1, 8], [1, 2, dg.DYNAMIC_DIM, 8], [1, 2, dg.DYNAMIC_DIM, 8], is_causal=True)
    (out,) = run(cp, q, k, v)
    np.testing.assert_allclose(out, v[:, :, :1], rtol=0, atol=0)


def test_gqa_query_head_uses_kv_head_h_div_group(rng):
    """6 query heads over 2 kv heads: heads 0-2 read kv head 0, heads 3-5 kv head 1."""
    s = dg.Dim("s")
    cp = compile_sdpa([1, 6, s, 8], [1, 2, s, 8], [1, 2, s, 8])
    for S in (1, 4, 9):
        q, k, v = qkv(rng, 1, 6, 2, S, S, 8)
        (out,) = run(cp, q, k, v)
        for h in range(6):
            check(out[:, h : h + 1], q[:, h : h + 1], k[:, h // 3 : h // 3 + 1], v[:, h // 3 : h // 3 + 1])


def test_decode_kv_grows(rng):
    """Sq = 1 against a key/value length that changes every step (a KV cache)."""
    t = dg.Dim("t")
    cp = compile_sdpa([2, 9, 1, 64], [2, 3, t, 64], [2, 3, t, 64])
    for T in (1, 2, 17, 200):
        q, k, v = qkv(rng, 2, 9, 3, 1, T, 64)
        (out,) = run(cp, q, k, v)
        check(out, q, k, v)
    assert cp.cache_info().misses == 4


def test_rank3_without_batch(rng):
    s, t = dg.Dim("s"), dg.Dim("t")
    cp = compile_sdpa([6, s, 16], [2, t, 16], [2, t, 16], [s, t], mask_dtype=dg.f32, is_causal=True)
    for S, T in ((1, 1), (4, 9), (11, 6)):
        q, k, v = qkv(rng, None, 6, 2, S, T, 16)
        m = randn(rng, (S, T))
        (out,) = run(cp, q, k, v, m)
        assert out.shape == (6, S, 16)
        check(out, q, k, v, m, is_causal=True)


def test_anonymous_dynamic_dims(rng):
    D = dg.DYNAMIC_DIM
    cp = compile_sdpa([D, 4, D, 16], [D, 2, D, 16], [D, 2, D, 16])
    for B, S, T in ((1, 3, 3), (2, 1, 8), (3, 6, 2)):
        q, k, v = qkv(rng, B, 4, 2, S, T, 16)
        (out,) = run(cp, q, k, v)
        check(out, q, k, v)


@pytest.mark.parametrize("scale", [0.3, 2.0, -0.5])
@pytest.mark.parametrize("mask_dtype", [None, dg.f32, dg.f16])
def test_explicit_scale(rng, scale, mask_dtype):
    b, s, t = dg.Dim("b"), dg.Dim("s"), dg.Dim("t")
    mask = [b, 1, s, t] if mask_dtype else None
    cp = compile_sdpa([b, 4, s, 16], [b, 2, t, 16], [b, 2, t, 16], mask, mask_dtype=mask_dtype, scale=scale, is_causal=True)
    for B, S, T in ((1, 1, 1), (2, 6, 6), (1, 3, 10)):
        q, k, v = qkv(rng, B, 4, 2, S, T, 16)
        args = [q, k, v]
        m = None
        if mask_dtype:
            m = randn(rng, (B, 1, S, T)).astype(mask_dtype.numpy)
            args.append(m)
        (out,) = run(cp, *args)
        check(out, q, k, v, m, scale=scale, is_causal=True)


# -- masks ------------------------------------------------------------------------------------------

# mask shapes broadcasting to [b, 6, s, t] (letters: the named dims)
MASKS = [
    ["s", "t"],
    [1, "t"],
    ["s", 1],
    [6, "s", "t"],
    [1, "s", "t"],
    ["b", 1, 1, "t"],
    ["b", 1, "s", "t"],
    [1, 6, "s", "t"],
    ["b", 6, "s", "t"],
]


def _dims(spec, env):
    return [env[x] if isinstance(x, str) else x for x in spec]


def _mask_values(rng, shape, dtype):
    if dtype is dg.boolean:
        m = rng.random(shape) < 0.7
        return m
    return randn(rng, shape).astype(dtype.numpy)


@pytest.mark.parametrize("mask_dtype", [dg.f32, dg.f16, dg.boolean], ids=["f32", "f16", "bool"])
@pytest.mark.parametrize("spec", MASKS, ids=lambda s: "x".join(map(str, s)))
def test_mask_broadcast(rng, spec, mask_dtype):
    syms = {"b": dg.Dim("b"), "s": dg.Dim("s"), "t": dg.Dim("t")}
    cp = compile_sdpa(
        [syms["b"], 6, syms["s"], 16], [syms["b"], 2, syms["t"], 16], [syms["b"], 2, syms["t"], 16],
        _dims(spec, syms), mask_dtype=mask_dtype,
    )
    for B, S, T in ((1, 1, 1), (2, 5, 5), (1, 4, 9), (3, 7, 2)):
        q, k, v = qkv(rng, B, 6, 2, S, T, 16)
        m = _mask_values(rng, _dims(spec, {"b": B, "s": S, "t": T}), mask_dtype)
        (out,) = run(cp, q, k, v, m)
        check(out, q, k, v, m)


@pytest.mark.parametrize("mask_dtype", [dg.f32, dg.f16, dg.boolean], ids=["f32", "f16", "bool"])
def test_mask_and_causal_combine(rng, mask_dtype):
    b, s, t = dg.Dim("b"), dg.Dim("s"), dg.Dim("t")
    cp = compile_sdpa([b, 6, s, 16], [b, 2, t, 16], [b, 2, t, 16], [b, 1, 1, t], mask_dtype=mask_dtype, is_causal=True)
    for B, S, T in ((1, 1, 1), (2, 8, 8), (2, 3, 11)):
        q, k, v = qkv(rng, B, 6, 2, S, T, 16)
        m = _mask_values(rng, (B, 1, 1, T), mask_dtype)
        (out,) = run(cp, q, k, v, m)
        check(out, q, k, v, m, is_causal=True)


@pytest.mark.parametrize("mask_dtype", [dg.f32, dg.f16, dg.boolean], ids=["f32", "f16", "bool"])
def test_fully_masked_query_gives_zeros(rng, mask_dtype):
    """Like torch: no NaN, on both backend paths."""
    s = dg.Dim("s")
    cp = compile_sdpa([1, 2, s, 8], [1, 2, s, 8], [1, 2, s, 8], [s, s], mask_dtype=mask_dtype)
    for S in (2, 5):
        q, k, v = qkv(rng, 1, 2, 2, S, S, 8)
        if mask_dtype is dg.boolean:
            m = np.ones((S, S), bool)
            m[1] = False
        else:
            m = np.zeros((S, S), mask_dtype.numpy)
            m[1] = -np.inf
        (out,) = run(cp, q, k, v, m)
        np.testing.assert_array_equal(out[:, :, 1], 0.0)
        check(out, q, k, v, m)


def test_f32_mask_is_not_rounded_to_f16(rng):
    """Between 8 and 16, f16 holds only multiples of 1/128: rounding this mask would change
    the result far beyond the tolerance. The f32 mask path must apply it exactly."""
    s = dg.Dim("s")
    cp = compile_sdpa([1, 1, s, 8], [1, 1, s, 8], [1, 1, s, 8], [s, s], mask_dtype=dg.f32)
    for S in (2, 6, 13):
        q, k, v = qkv(rng, 1, 1, 1, S, S, 8)
        m = (12 + 0.3 * randn(rng, (S, S))).astype(np.float32)
        rounded = np.abs(reference(q, k, v, m) - reference(q, k, v, m.astype(np.float16))).max()
        assert rounded > 20 * tolerance(q, k, v, m)
        (out,) = run(cp, q, k, v, m)
        check(out, q, k, v, m)


# -- low-precision inputs ---------------------------------------------------------------------------


def _to_bf16(x):
    """f32 -> bf16 bits (round to nearest even), as the uint16 / ml_dtypes array dg.bf16 uses."""
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return rounded.view(dg.bf16.numpy)


def _from_bf16(x):
    return (np.asarray(x).view(np.uint16).astype(np.uint32) << 16).view(np.float32)


@pytest.mark.parametrize("dtype", [dg.f16, dg.bf16], ids=["f16", "bf16"])
@pytest.mark.parametrize("masked", [False, True])
def test_half_precision_inputs(rng, dtype, masked):
    """Computed in f32 from the half-precision inputs; only the output is rounded."""
    b, s, t = dg.Dim("b"), dg.Dim("s"), dg.Dim("t")
    mask = [b, 1, s, t] if masked else None
    cp = compile_sdpa([b, 6, s, 16], [b, 2, t, 16], [b, 2, t, 16], mask, dtype=dtype, is_causal=True)
    to, back, u = (
        (lambda a: a.astype(np.float16), lambda a: a.astype(np.float32), F16_U)
        if dtype is dg.f16
        else (_to_bf16, _from_bf16, BF16_U)
    )
    for B, S, T in ((1, 1, 1), (2, 5, 5), (1, 3, 8)):
        args = [to(a) for a in qkv(rng, B, 6, 2, S, T, 16)]
        if masked:
            args.append(to(randn(rng, (B, 1, S, T))))
        (out,) = run(cp, *args)
        exact = [back(a) for a in args[:3]] + [back(args[3]) if masked else None]
        # one rounding of the output (u relative) plus the f32 computation
        atol = tolerance(*exact, is_causal=True)
        np.testing.assert_allclose(back(out), reference(*exact, is_causal=True), rtol=u, atol=atol)


# -- errors -----------------------------------------------------------------------------------------


def finalize(shapes, dtypes=dg.f32, **attrs):
    if isinstance(dtypes, dg.DataType):
        dtypes = [dtypes] * len(shapes)
    ins = [dg.LogicalTensor(i, dt, sh) for i, (sh, dt) in enumerate(zip(shapes, dtypes))]
    out = dg.LogicalTensor(100, dtypes[0], None)
    g = dg.Graph(dg.Engine.CPU)
    g.add_op(dg.Op(0, SDPA, ins, [out], attrs))
    g.finalize()
    return g


def test_supported_by_the_backend():
    g = finalize([[1, 2, 3, 8], [1, 2, 3, 8], [1, 2, 3, 8]])
    (part,) = g.get_partitions()
    assert part.is_supported()


@pytest.mark.parametrize(
    "shapes,match",
    [
        ([[1, 2, 3, 8], [1, 2, 3, 16], [1, 2, 3, 8]], "head size"),
        ([[1, 6, 3, 8], [1, 4, 3, 8], [1, 4, 3, 8]], "multiple"),
        ([[1, 4, 3, 8], [1, 2, 5, 8], [1, 2, 6, 8]], "sequence length"),
        ([[1, 4, 3, 8], [1, 2, 5, 8], [1, 1, 5, 8]], "head count"),
        ([[2, 4, 3, 8], [1, 2, 5, 8], [1, 2, 5, 8]], "batch"),
        ([[4, 3, 8], [1, 2, 5, 8], [1, 2, 5, 8]], "rank"),
        ([[3, 8], [5, 8], [5, 8]], "rank 3 or 4"),
        ([[1, 4, 3, 8], [1, 2, 5, 8], [1, 2, 5, 8], [3, 4]], "broadcast"),
        ([[1, 4, 3, 8], [1, 2, 5, 8], [1, 2, 5, 8], [2, 3, 5]], "broadcast"),
        ([[1, 4, 3, 8], [1, 2, 5, 8], [1, 2, 5, 8], [5]], "rank 2 to 4"),
        ([[4, 3, 8], [2, 5, 8], [2, 5, 8], [1, 4, 3, 5]], "rank 2 to 3"),
    ],
)
def test_shape_errors_at_finalize(shapes, match):
    with pytest.raises(dg.ShapeError, match=match):
        finalize(shapes)


@pytest.mark.parametrize(
    "dtypes,match",
    [
        ([dg.f32, dg.f16, dg.f32], "dtype"),
        ([dg.f32, dg.f32, dg.bf16], "dtype"),
        ([dg.i32, dg.i32, dg.i32], "floating-point"),
        ([dg.f32, dg.f32, dg.f32, dg.i32], "mask"),
        ([dg.f32, dg.f32, dg.f32, dg.i64], "mask"),
    ],
)
def test_dtype_errors_at_finalize(dtypes, match):
    shapes = [[1, 2, 3, 8], [1, 2, 5, 8], [1, 2, 5, 8], [3, 5]][: len(dtypes)]
    with pytest.raises(dg.DTypeError, match=match):
        finalize(shapes, dtypes)


def test_bad_attribute_values():
    with pytest.raises(dg.GraphError, match="scale"):
        finalize([[1, 2, 3, 8]] * 3, scale=float("inf"))
    with pytest.raises(dg.GraphError, match="is_causal"):
        finalize([[1, 2, 3, 8]] * 3, is_causal="yes")


def test_dynamic_heads_not_a_multiple_fail_at_execution(rng):
    """Hq, Hkv only known at execution: checked when the shapes are bound, before ggml sees them."""
    hq, hkv = dg.Dim("hq"), dg.Dim("hkv")
    cp = compile_sdpa([1, hq, 3, 8], [1, hkv, 3, 8], [1, hkv, 3, 8])
    q, k, v = qkv(rng, 1, 6, 2, 3, 3, 8)
    (out,) = run(cp, q, k, v)
    check(out, q, k, v)
    q, k, v = qkv(rng, 1, 6, 4, 3, 3, 8)
    with pytest.raises(dg.ShapeError, match="multiple"):
        run(cp, q, k, v)


def test_dynamic_mask_dim_mismatch_fails_at_execution(rng):
    s, t, u = dg.Dim("s"), dg.Dim("t"), dg.Dim("u")
    cp = compile_sdpa([1, 2, s, 8], [1, 2, t, 8], [1, 2, t, 8], [s, u], mask_dtype=dg.f32)
    q, k, v = qkv(rng, 1, 2, 2, 3, 5, 8)
    with pytest.raises(dg.ShapeError, match="mask"):
        run(cp, q, k, v, randn(rng, (3, 4)))


# -- with its neighbours ----------------------------------------------------------------------------


def test_llama_attention_core(rng):
    """q, k [B, S, H, D] -> RoPE (neox) -> transpose to [B, H, S, D] -> causal GQA attention, one
    partition compiled once: SDPA reads the transposes' strided views."""
    from .test_rope import reference as rope_reference

    b, s = dg.Dim("b"), dg.Dim("s")
    U = dg.UNKNOWN_DIM
    lts = {
        "q": dg.LogicalTensor(0, dg.f32, [b, s, 6, 16]),
        "k": dg.LogicalTensor(1, dg.f32, [b, s, 2, 16]),
        "v": dg.LogicalTensor(2, dg.f32, [b, s, 2, 16]),
        "pos": dg.LogicalTensor(3, dg.i64, [s]),
        "out": dg.LogicalTensor(20, dg.f32, [U, U, U, U]),
    }
    mid = [dg.LogicalTensor(10 + i, dg.f32, [U, U, U, U]) for i in range(5)]
    g = dg.Graph(dg.Engine.CPU)
    g.add_op(dg.Op(0, dg.OpKind.RoPE, [lts["q"], lts["pos"]], [mid[0]], {"mode": "neox"}))
    g.add_op(dg.Op(1, dg.OpKind.RoPE, [lts["k"], lts["pos"]], [mid[1]], {"mode": "neox"}))
    for i, (src, dst) in enumerate(((mid[0], mid[2]), (mid[1], mid[3]), (lts["v"], mid[4]))):
        g.add_op(dg.Op(2 + i, dg.OpKind.StaticTranspose, [src], [dst], {"order": [0, 2, 1, 3]}))
    g.add_op(dg.Op(5, SDPA, [mid[2], mid[3], mid[4]], [lts["out"]], {"is_causal": True}))
    g.finalize()
    (part,) = g.get_partitions()
    assert part.is_supported()
    ins = [lts[n] for n in ("q", "k", "v", "pos")]
    cp = part.compile(ins, [lts["out"]], dg.Engine(dg.Engine.CPU, num_threads=1))
    for B, S in ((1, 1), (2, 7), (1, 20)):
        q, k, v = randn(rng, (B, S, 6, 16)), randn(rng, (B, S, 2, 16)), randn(rng, (B, S, 2, 16))
        pos = np.arange(S) + 3
        (out,) = run(cp, q, k, v, pos)
        qr, kr = (rope_reference(x, pos, mode="neox").transpose(0, 2, 1, 3) for x in (q, k))
        check(out, qr, kr, v.transpose(0, 2, 1, 3), is_causal=True)


def test_save_and_load(rng, tmp_path):
    """The attributes survive serialization: the loaded partition computes the same."""
    s = dg.Dim("s")
    cp = compile_sdpa([1, 4, s, 8], [1, 2, s, 8], [1, 2, s, 8], [s, s], mask_dtype=dg.boolean, scale=0.7, is_causal=True)
    cp.save(tmp_path / "sdpa.dg")
    loaded = dg.load(tmp_path / "sdpa.dg", dg.Engine(dg.Engine.CPU, num_threads=1))
    for S in (1, 5):
        q, k, v = qkv(rng, 1, 4, 2, S, S, 8)
        m = rng.random((S, S)) < 0.8
        (out,) = run(loaded, q, k, v, m)
        check(out, q, k, v, m, scale=0.7, is_causal=True)
        np.testing.assert_array_equal(out, run(cp, q, k, v, m)[0])
