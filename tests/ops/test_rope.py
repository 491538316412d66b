"""RoPE against a float64 numpy reference written from the definition.

Every numerics test compiles the op once with a dynamic sequence length (and
batch) and runs several shapes through that one compiled partition.

ggml computes the angle p * scale * base^(-2i/n) in f32, so its error grows
with the angle: measured max abs error / (max angle * f32 eps * max|x|) was
0.1-0.3 for positions up to 32768 (about 1e-6 absolute at angle 8, 4e-3 at
angle 32768). The tolerance below is that bound with a factor ~4 of margin.
"""

import numpy as np
import pytest

import dyngraph as dg
from oputil import compile_op, run

ROPE = dg.OpKind.RoPE
F32_EPS = 2.0**-23
F16_U = 2.0**-11  # unit roundoff of f16
BF16_U = 2.0**-8  # unit roundoff of bf16


def reference(x, pos, mode="normal", base=10000.0, scale=1.0, rotary_dims=0, freq_factors=None, attention_factor=1.0):
    """The op's definition: for each i < n/2, theta_i = pos * scale * base^(-2i/n) / freq_factors[i]
    rotates the pair (2i, 2i+1) (normal) or (i, i + n/2) (neox), cos and sin times
    attention_factor; features from n on pass through. x is [..., S, H, D], pos [S] or [B, S]."""
    x = np.asarray(x, np.float64)
    d = x.shape[-1]
    n = rotary_dims or d
    i = np.arange(n // 2)
    ff = np.ones(n // 2) if freq_factors is None else np.asarray(freq_factors, np.float64)
    theta = np.asarray(pos, np.float64)[..., None] * scale * base ** (-2.0 * i / n) / ff  # [.., S, n/2]
    cos = attention_factor * np.cos(theta)[..., None, :]  # broadcast over heads
    sin = attention_factor * np.sin(theta)[..., None, :]
    a_idx, b_idx = (2 * i, 2 * i + 1) if mode == "normal" else (i, i + n // 2)
    a, b = x[..., a_idx], x[..., b_idx]
    out = x.copy()
    out[..., a_idx] = a * cos - b * sin
    out[..., b_idx] = a * sin + b * cos
    return out


def tolerance(x, pos, scale=1.0):
    angle = float(np.abs(np.asarray(pos, np.float64)).max()) * abs(scale)
    return F32_EPS * (8 + angle) * float(np.abs(x).max())


def check(out, x, pos, **attrs):
    want = reference(x, pos, **attrs)
    assert out.shape == x.shape
    np.testing.assert_allclose(out, want, rtol=0, atol=tolerance(x, pos, attrs.get("scale", 1.0)))


def randn(rng, shape):
    return rng.standard_normal(shape, dtype=np.float32)


# -- modes, partial rotation, position dtypes --------------------------------------------------------


@pytest.mark.parametrize("pos_dtype", [dg.i32, dg.i64], ids=["i32", "i64"])
@pytest.mark.parametrize("rotary_dims", [0, 8, 2], ids=["all", "8of32", "2of32"])
@pytest.mark.parametrize("mode", ["normal", "neox"])
def test_rope(rng, mode, rotary_dims, pos_dtype):
    b, s = dg.Dim("b"), dg.Dim("s")
    cp = compile_op(ROPE, [[b, s, 4, 32], [s]], [dg.f32, pos_dtype], attrs={"mode": mode, "rotary_dims": rotary_dims})
    for B, S, first in ((1, 1, 0), (2, 7, 0), (3, 16, 40), (1, 5, 1000)):
        x = randn(rng, (B, S, 4, 32))
        pos = np.arange(first, first + S).astype(pos_dtype.numpy)
        (out,) = run(cp, x, pos)
        check(out, x, pos, mode=mode, rotary_dims=rotary_dims)
        if rotary_dims:
            np.testing.assert_array_equal(out[..., rotary_dims:], x[..., rotary_dims:])


@pytest.mark.parametrize("mode", ["normal", "neox"])
@pytest.mark.parametrize("scale,base", [(0.25, 10000.0), (4.0, 10000.0), (1.0, 500000.0), (0.5, 100.0)])
def test_scale_and_base(rng, mode, scale, base):
    s = dg.Dim("s")
    attrs = {"mode": mode, "scale": scale, "base": base}
    cp = compile_op(ROPE, [[1, s, 2, 16], [s]], [dg.f32, dg.i64], attrs=attrs)
    for S in (1, 6, 30):
        x = randn(rng, (1, S, 2, 16))
        pos = rng.integers(0, 512, S)
        (out,) = run(cp, x, pos)
        check(out, x, pos, **attrs)


def test_rank3_and_arbitrary_positions(rng):
    """Positions need not be 0..S-1 (a decode step, packed or shuffled tokens)."""
    cp = compile_op(ROPE, [[dg.DYNAMIC_DIM, 3, 8], [dg.DYNAMIC_DIM]], [dg.f32, dg.i32], attrs={"mode": "neox"})
    for S in (1, 4, 19):
        x = randn(rng, (S, 3, 8))
        pos = rng.permutation(4 * S)[:S].astype(np.int32)
        (out,) = run(cp, x, pos)
        check(out, x, pos, mode="neox")


def test_per_batch_positions(rng):
    b, s = dg.Dim("b"), dg.Dim("s")
    cp = compile_op(ROPE, [[b, s, 2, 16], [b, s]], [dg.f32, dg.i64], attrs={"mode": "neox", "rotary_dims": 8})
    for B, S in ((1, 1), (2, 5), (4, 3)):
        x = randn(rng, (B, S, 2, 16))
        pos = rng.integers(0, 2048, (B, S))
        (out,) = run(cp, x, pos)
        check(out, x, pos, mode="neox", rotary_dims=8)


def test_large_positions(rng):
    s = dg.Dim("s")
    cp = compile_op(ROPE, [[s, 4, 64], [s]], [dg.f32, dg.i32])
    for S in (3, 64):
        x = randn(rng, (S, 4, 64))
        pos = rng.integers(0, 32768, S).astype(np.int32)
        (out,) = run(cp, x, pos)
        check(out, x, pos)


def test_neox_is_llama_rotate_half(rng):
    """The same result as Hugging Face Llama's q * cos + rotate_half(q) * sin."""
    x = randn(rng, (1, 6, 2, 16))
    pos = np.arange(6)
    inv_freq = 1.0 / (10000.0 ** (np.arange(0, 16, 2) / 16))
    emb = np.concatenate([np.outer(pos, inv_freq)] * 2, axis=-1)[None, :, None, :]  # [1, S, 1, D]
    rotate_half = np.concatenate([-x[..., 8:], x[..., :8]], axis=-1)
    want = x * np.cos(emb) + rotate_half * np.sin(emb)
    cp = compile_op(ROPE, [[1, 6, 2, 16], [6]], [dg.f32, dg.i64], attrs={"mode": "neox"})
    (out,) = run(cp, x, pos)
    np.testing.assert_allclose(out, want, rtol=0, atol=tolerance(x, pos))


def test_normal_is_gptj_rotate_every_two(rng):
    """The same result as GPT-J's x * cos + rotate_every_two(x) * sin with interleaved frequencies."""
    x = randn(rng, (5, 3, 8))
    pos = np.arange(5)
    inv_freq = 1.0 / (10000.0 ** (np.arange(0, 8, 2) / 8))
    ang = np.repeat(np.outer(pos, inv_freq), 2, axis=-1)[:, None, :]  # [S, 1, D]: each frequency twice
    every_two = np.stack([-x[..., 1::2], x[..., ::2]], axis=-1).reshape(x.shape)
    want = x * np.cos(ang) + every_two * np.sin(ang)
    cp = compile_op(ROPE, [[5, 3, 8], [5]], [dg.f32, dg.i32])
    (out,) = run(cp, x, pos.astype(np.int32))
    np.testing.assert_allclose(out, want, rtol=0, atol=tolerance(x, pos))


# -- frequency factors and the attention factor ----------------------------------------------------


@pytest.mark.parametrize("mode,rotary_dims", [("neox", 0), ("normal", 0), ("neox", 8)])
def test_freq_factors_divide_the_frequencies(rng, mode, rotary_dims):
    """Llama 3's scaled RoPE: factors of 1 at high frequencies, up to 8 at low ones."""
    n = rotary_dims or 32
    ff = np.linspace(1.0, 8.0, n // 2).astype(np.float32)
    b, s = dg.Dim("b"), dg.Dim("s")
    attrs = {"mode": mode, "rotary_dims": rotary_dims, "base": 500000.0}
    cp = compile_op(ROPE, [[b, s, 4, 32], [s], [n // 2]], [dg.f32, dg.i64, dg.f32], attrs=attrs, constants={2: ff})
    for B, S, first in ((1, 1, 0), (2, 7, 3), (1, 16, 900)):
        x = randn(rng, (B, S, 4, 32))
        pos = np.arange(first, first + S)
        (out,) = run(cp, x, pos)
        check(out, x, pos, freq_factors=ff, **attrs)
        if rotary_dims:
            np.testing.assert_array_equal(out[..., rotary_dims:], x[..., rotary_dims:])


def test_inverse_frequency_table_and_attention_factor(rng):
    """base 1 with freq_factors = 1 / inv_freq is any table of inverse frequencies (a Hugging Face
    model's inv_freq, YaRN's included), and attention_factor scales cos and sin."""
    inv_freq = (1.0 / (10000.0 ** (np.arange(0, 16, 2) / 16)) / np.linspace(1, 4, 8)).astype(np.float32)
    ff = (1.0 / inv_freq.astype(np.float64)).astype(np.float32)
    attrs = {"mode": "neox", "base": 1.0, "attention_factor": 1.25}
    s = dg.Dim("s")
    # factors as a graph input, varying between calls, not only as a constant
    cp = compile_op(ROPE, [[s, 2, 16], [s], [8]], [dg.f32, dg.i32, dg.f32], attrs=attrs)
    for S, first in ((1, 0), (5, 17), (12, 300)):
        x = randn(rng, (S, 2, 16))
        pos = np.arange(first, first + S, dtype=np.int32)
        (out,) = run(cp, x, pos, ff)
        angle = float(pos.max()) * float(inv_freq.max())
        np.testing.assert_allclose(out, reference(x, pos, freq_factors=ff, **attrs), rtol=0,
                                   atol=1.25 * F32_EPS * (8 + angle) * float(np.abs(x).max()))
        (twice,) = run(cp, x, pos, ff / 2)
        check(twice, x, pos, freq_factors=ff / 2, **attrs)
    # Hugging Face's emb = cat(freqs, freqs), x * cos + rotate_half(x) * sin, both times the factor
    x, pos = randn(rng, (6, 2, 16)), np.arange(6, dtype=np.int32)
    emb = np.concatenate([np.outer(pos, inv_freq.astype(np.float64))] * 2, axis=-1)[:, None, :]
    want = 1.25 * (x * np.cos(emb) + np.concatenate([-x[..., 8:], x[..., :8]], axis=-1) * np.sin(emb))
    (out,) = run(cp, x, pos, ff)
    np.testing.assert_allclose(out, want, rtol=0, atol=1e-5)


def _to_bf16(x):
    """f32 -> bf16 bits (round to nearest even), as the array dg.bf16 uses."""
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16).view(dg.bf16.numpy)


def _from_bf16(x):
    return (np.asarray(x).view(np.uint16).astype(np.uint32) << 16).view(np.float32)


@pytest.mark.parametrize("dtype", [dg.f16, dg.bf16], ids=["f16", "bf16"])
def test_half_precision_input(rng, dtype):
    """Computed in f32; only the result is rounded (u relative)."""
    to, back, u = (
        (lambda a: a.astype(np.float16), lambda a: a.astype(np.float32), F16_U)
        if dtype is dg.f16
        else (_to_bf16, _from_bf16, BF16_U)
    )
    s = dg.Dim("s")
    cp = compile_op(ROPE, [[s, 2, 16], [s]], [dtype, dg.i32], attrs={"mode": "neox"})
    for S in (1, 9, 20):
        x = to(randn(rng, (S, 2, 16)))
        pos = np.arange(S, dtype=np.int32)
        (out,) = run(cp, x, pos)
        assert out.dtype == dtype.numpy
        want = reference(back(x), pos, mode="neox")
        np.testing.assert_allclose(back(out), want, rtol=u, atol=tolerance(back(x), pos))


def test_save_and_load(rng, tmp_path):
    s = dg.Dim("s")
    attrs = {"mode": "neox", "base": 500.0, "scale": 0.5, "rotary_dims": 8}
    cp = compile_op(ROPE, [[s, 2, 16], [s]], [dg.f32, dg.i64], attrs=attrs)
    cp.save(tmp_path / "rope.dg")
    loaded = dg.load(tmp_path / "rope.dg", dg.Engine(dg.Engine.CPU, num_threads=1))
    for S in (1, 7):
        x, pos = randn(rng, (S, 2, 16)), np.arange(S) + 11
        (out,) = run(loaded, x, pos)
        check(out, x, pos, **attrs)


def test_save_and_load_with_freq_factors(rng, tmp_path):
    """The optional input (a constant) and attention_factor survive a saved file."""
    s = dg.Dim("s")
    ff = np.linspace(1.0, 3.0, 4).astype(np.float32)
    attrs = {"mode": "normal", "base": 100.0, "rotary_dims": 8, "attention_factor": 0.7}
    cp = compile_op(ROPE, [[s, 2, 16], [s], [4]], [dg.f32, dg.i64, dg.f32], attrs=attrs, constants={2: ff})
    cp.save(tmp_path / "rope_ff.dg")
    loaded = dg.load(tmp_path / "rope_ff.dg", dg.Engine(dg.Engine.CPU, num_threads=1))
    assert len(loaded.get_inputs()) == 2  # the factors are the file's constant
    for S in (1, 6):
        x, pos = randn(rng, (S, 2, 16)), np.arange(S) + 5
        (out,) = run(loaded, x, pos)
        check(out, x, pos, freq_factors=ff, **attrs)
        np.testing.assert_array_equal(out, run(cp, x, pos)[0])


# -- errors -----------------------------------------------------------------------------------------


def finalize(shapes, dtypes=(dg.f32, dg.i32), **attrs):
    ins = [dg.LogicalTensor(i, dt, sh) for i, (sh, dt) in enumerate(zip(shapes, dtypes))]
    out = dg.LogicalTensor(100, dtypes[0], None)
    g = dg.Graph(dg.Engine.CPU)
    g.add_op(dg.Op(0, ROPE, ins, [out], attrs))
    g.finalize()
    return g


def test_supported_by_the_backend():
    (part,) = finalize([[1, 3, 2, 8], [3]]).get_partitions()
    assert part.is_supported()


@pytest.mark.parametrize(
    "shapes,attrs,match",
    [
        ([[1, 3, 2, 8], [3]], {"rotary_dims": 3}, "even"),
        ([[1, 3, 2, 8], [3]], {"rotary_dims": 10}, "larger than the head size"),
        ([[1, 3, 2, 7], [3]], {}, "must be even"),
        ([[1, 3, 2, 7], [3]], {"rotary_dims": 6}, "must be even"),  # ggml moves the rest in pairs
        ([[1, 3, 2, 9], [3]], {"rotary_dims": 2}, "must be even"),
        ([[1, 3, 2, 8], [4]], {}, "positions"),
        ([[2, 3, 2, 8], [3, 3]], {}, "batch"),
        ([[3, 2, 8], [1, 3]], {}, "positions must have shape"),
        ([[1, 3, 2, 8], [1, 1, 3]], {}, "positions must have shape"),
        ([[3, 8], [3]], {}, "rank 3 or 4"),
    ],
)
def test_shape_errors_at_finalize(shapes, attrs, match):
    with pytest.raises(dg.ShapeError, match=match):
        finalize(shapes, **attrs)


@pytest.mark.parametrize(
    "shapes,attrs,match",
    [
        ([[1, 3, 2, 8], [3], [3]], {}, "freq_factors"),
        ([[1, 3, 2, 8], [3], [8]], {}, "freq_factors"),
        ([[1, 3, 2, 8], [3], [2]], {"rotary_dims": 8}, "freq_factors"),
        ([[1, 3, 2, 8], [3], [2, 2]], {}, "freq_factors must have shape"),
    ],
)
def test_freq_factor_shape_errors_at_finalize(shapes, attrs, match):
    with pytest.raises(dg.ShapeError, match=match):
        finalize(shapes, (dg.f32, dg.i32, dg.f32), **attrs)


def test_freq_factors_must_be_float():
    with pytest.raises(dg.DTypeError, match="freq_factors"):
        finalize([[1, 3, 2, 8], [3], [4]], (dg.f32, dg.i32, dg.i32))


def test_an_infinite_attention_factor_is_an_attribute_error():
    with pytest.raises(dg.GraphError, match="attention_factor"):
        finalize([[1, 3, 2, 8], [3]], attention_factor=float("inf"))


def test_negative_rotary_dims_is_an_attribute_error():
    with pytest.raises(dg.GraphError, match="'rotary_dims' must be >= 0"):
        finalize([[1, 3, 2, 8], [3]], rotary_dims=-2)


@pytest.mark.parametrize(
    "dtypes,match", [((dg.f32, dg.f32), "positions"), ((dg.f32, dg.boolean), "positions"), ((dg.i32, dg.i32), "x")]
)
def test_dtype_errors_at_finalize(dtypes, match):
    with pytest.raises(dg.DTypeError, match=match):
        finalize([[1, 3, 2, 8], [3]], dtypes)


@pytest.mark.parametrize(
    "attrs,match",
    [({"mode": "gptj"}, "mode"), ({"base": 0.0}, "base"), ({"base": float("nan")}, "base"), ({"scale": float("inf")}, "scale")],
)
def test_bad_attributes(attrs, match):
    with pytest.raises(dg.GraphError, match=match):
        finalize([[1, 3, 2, 8], [3]], **attrs)


def test_dynamic_head_size_checked_at_execution(rng):
    """With D only known at execution, rotary_dims <= D and an even D are checked when shapes are bound."""
    d = dg.Dim("d")
    cp = compile_op(ROPE, [[3, 2, d], [3]], [dg.f32, dg.i32], attrs={"rotary_dims": 4})
    pos = np.arange(3, dtype=np.int32)
    x = randn(rng, (3, 2, 6))
    (out,) = run(cp, x, pos)
    check(out, x, pos, rotary_dims=4)
    with pytest.raises(dg.ShapeError, match="rotary_dims"):
        run(cp, randn(rng, (3, 2, 2)), pos)
    cp = compile_op(ROPE, [[3, 2, d], [3]], [dg.f32, dg.i32])
    with pytest.raises(dg.ShapeError, match="even"):
        run(cp, randn(rng, (3, 2, 5)), pos)


def test_positions_length_checked_at_execution(rng):
    cp = compile_op(ROPE, [[dg.DYNAMIC_DIM, 2, 8], [dg.DYNAMIC_DIM]], [dg.f32, dg.i32])
    with pytest.raises(dg.ShapeError, match="positions"):
        run(cp, randn(rng, (4, 2, 8)), np.arange(5, dtype=np.int32))


def test_json_cases_fill_freq_factors_with_positive_values():
    """dyngraph's JSON driver fills a RoPE's freq_factors input as it fills Log's: positive (a factor
    of 0 would make every angle infinite), and its positions in [0, 4096)."""
    from dyngraph.onednn.fill import consumers, fill_tensor

    g = finalize([[1, 3, 2, 8], [3], [4]], (dg.f32, dg.i32, dg.f32))
    uses = consumers(g)
    for seed in range(20):
        ff = fill_tensor(g, 2, (4,), uses.get(2, []), seed=seed)
        pos = fill_tensor(g, 1, (3,), uses.get(1, []), seed=seed)
        assert ff.min() >= 0.125 and ff.max() <= 4 and 0 <= pos.min() and pos.max() < 4096
