"""Hugging Face's rotary embedding (``apply_rotary_pos_emb``: q * cos + rotate_half(q) * sin, cos and sin
from ``inv_freq`` and the positions) becomes one RoPE op per rotated tensor, with the model's inverse
frequencies as freq_factors and its attention scaling as attention_factor
(api/dyngraph/torch/converters/rope.py); with interleaved pairs (Cohere's rotate-every-two, each frequency
twice in a row) a RoPE in "normal" mode. Tiny random-weight decoders of the architectures that write it
these ways, exported with a dynamic sequence length, against eager PyTorch at several lengths; one that
writes it another way (GPT-J: sin and cos gathered from a table) converts op by op, as before."""

import pytest

torch = pytest.importorskip("torch", minversion="2.5")
transformers = pytest.importorskip("transformers")

import dyngraph.torch as dgt  # noqa: E402
from torchutil import offline  # noqa: E402

offline()

LOGITS_ATOL = 1e-4  # f32 against f32; the logits are O(1)
COMMON = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=256)


def decoder(kind: str):
    torch.manual_seed(0)
    T = transformers
    if kind == "llama":
        return T.LlamaForCausalLM(T.LlamaConfig(**COMMON))
    if kind == "llama-bf16":  # inv_freq a bf16 buffer too
        return T.LlamaForCausalLM(T.LlamaConfig(**COMMON)).to(torch.bfloat16)
    if kind == "llama3-scaled":  # inv_freq divided by 1..8 across the band: non-uniform factors
        scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 64}
        return T.LlamaForCausalLM(T.LlamaConfig(**COMMON, rope_scaling=scaling))
    if kind == "yarn":  # attention scaling != 1: cos and sin times 1 + 0.1 ln 4
        scaling = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
        return T.LlamaForCausalLM(T.LlamaConfig(**COMMON, rope_scaling=scaling))
    if kind == "qwen3":  # q and k normalized before the rotation
        return T.Qwen3ForCausalLM(T.Qwen3Config(head_dim=16, **COMMON))
    if kind == "gemma3":  # two tables: local (sliding-window) and global layers
        return T.Gemma3ForCausalLM(T.Gemma3TextConfig(head_dim=16, sliding_window=16, **COMMON))
    if kind == "phi":  # partial rotation: the first half of each head through a slice
        return T.PhiForCausalLM(T.PhiConfig(**COMMON, partial_rotary_factor=0.5))
    if kind == "gpt-neox":  # a quarter of each head, fused QKV
        return T.GPTNeoXForCausalLM(T.GPTNeoXConfig(vocab_size=128, hidden_size=64, intermediate_size=128,
                                                    num_hidden_layers=2, num_attention_heads=4, rotary_pct=0.25,
                                                    max_position_embeddings=256))
    if kind == "cohere":  # interleaved pairs (rotate every two, each frequency twice in a row): "normal" mode
        return T.CohereForCausalLM(T.CohereConfig(**COMMON, bos_token_id=1, eos_token_id=2, pad_token_id=0))
    if kind == "gpt-j":  # interleaved too, but sin and cos gathered from a table by position: not this pattern
        return T.GPTJForCausalLM(T.GPTJConfig(vocab_size=128, n_embd=64, n_layer=2, n_head=4, rotary_dim=8,
                                              n_positions=256, bos_token_id=1, eos_token_id=2))
    raise KeyError(kind)


FUSED = ["llama", "llama-bf16", "llama3-scaled", "yarn", "qwen3", "gemma3", "phi", "gpt-neox", "cohere"]


def kinds(run):
    return [op.kind.name for cp in run.compiled_partitions for op in cp.program.ops]


def compile_decoder(model, batch=1, positions=False):
    seq = torch.export.Dim("seq", min=1, max=128)
    kwargs = {"input_ids": torch.randint(0, 128, (batch, 5)), "use_cache": False}
    dynamic = {"input_ids": {1: seq}, "use_cache": None}
    if positions:
        kwargs["position_ids"], dynamic["position_ids"] = torch.arange(5).repeat(batch, 1), {1: seq}
    return dgt.compile(model, kwargs=kwargs, dynamic_shapes=dynamic, engine=1)


@pytest.mark.parametrize("kind", FUSED + ["gpt-j"])
def test_rotary_embedding_is_one_op_and_matches_eager(kind):
    model = decoder(kind).eval()
    run = compile_decoder(model)
    assert run.fallbacks == [], run.report()
    got_kinds = kinds(run)
    layers = model.config.num_hidden_layers
    if kind in FUSED:
        assert got_kinds.count("RoPE") == 2 * layers, got_kinds
        assert "Neg" not in got_kinds  # rotate_half's negation is gone with it
        modes = {op.attrs["mode"] for cp in run.compiled_partitions for op in cp.program.ops if op.kind.name == "RoPE"}
        assert modes == {"normal" if kind == "cohere" else "neox"}
    else:
        assert "RoPE" not in got_kinds
    for n in (1, 9, 100):
        ids = torch.randint(0, 128, (1, n))
        with torch.no_grad():
            want = model(input_ids=ids, use_cache=False).logits
        # bf16: logits of |x| < 1 round to 2**-8; both sides round differently along the way
        atol = 1.6e-2 if kind == "llama-bf16" else LOGITS_ATOL
        torch.testing.assert_close(run(input_ids=ids, use_cache=False).logits, want, atol=atol, rtol=0)


@pytest.mark.parametrize("per_row", [False, True], ids=["shared-positions", "positions-per-row"])
def test_batches_with_shared_and_per_row_positions(per_row):
    """Positions [1, S] (one row for the batch: RoPE takes them as [S]) and [B, S] (a row each, such as
    left-padded prompts: RoPE's per-batch positions)."""
    model = decoder("llama3-scaled").eval()
    run = compile_decoder(model, batch=3, positions=per_row)
    assert kinds(run).count("RoPE") == 4
    for n in (1, 7):
        ids = torch.randint(0, 128, (3, n))
        kw = {"input_ids": ids, "use_cache": False}
        if per_row:
            kw["position_ids"] = torch.stack([torch.arange(n) + k * 10 for k in range(3)])
        with torch.no_grad():
            want = model(**kw).logits
        torch.testing.assert_close(run(**kw).logits, want, atol=LOGITS_ATOL, rtol=0)


def test_fused_and_op_by_op_agree(monkeypatch):
    """The same program converted with and without the pattern: the same logits within f32 rounding
    (the angle is p / (1 / inv_freq) in f32 against p * inv_freq: a few ulps apart)."""
    import dyngraph.torch.converters.elementwise as elementwise

    model = decoder("yarn").eval()
    fused = compile_decoder(model)
    monkeypatch.setattr(elementwise, "rotary_pattern", lambda *a: None)
    plain = compile_decoder(model)
    assert kinds(plain).count("RoPE") == 0 and kinds(plain).count("Neg") == 4
    ids = torch.randint(0, 128, (1, 120))
    a, b = fused(input_ids=ids, use_cache=False).logits, plain(input_ids=ids, use_cache=False).logits
    torch.testing.assert_close(a, b, atol=2e-5, rtol=0)


class Rotary(torch.nn.Module):
    """The pattern written out, with the variations the matcher takes: x [B, H, S, D] with cos
    unsqueezed at 1, or x [B, S, H, D] at 2; the operands of each product and of the sum swapped;
    an attention factor; positions [1, S] or [B, S]; halves or interleaved pairs (stack + flatten,
    repeat_interleave: the forms before torch's decomposition; Cohere's test has those after it)."""

    def __init__(self, layout_bshd=False, swapped=False, factor=1.0, per_row=False, interleaved=False):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (500.0 ** (torch.arange(0, 16, 2).float() / 16)), persistent=False)
        self.bshd, self.swapped, self.factor, self.per_row = layout_bshd, swapped, factor, per_row
        self.interleaved = interleaved

    def forward(self, x):
        b, s = x.shape[0], (x.shape[1] if self.bshd else x.shape[2])
        pos = torch.arange(s).unsqueeze(0) * 3 + 5
        if self.per_row:
            pos = pos + torch.arange(b).unsqueeze(1) * 7
        freqs = pos[..., None].float() * self.inv_freq
        emb = torch.repeat_interleave(freqs, 2, dim=-1) if self.interleaved else torch.cat((freqs, freqs), dim=-1)
        cos, sin = (emb.cos() * self.factor).unsqueeze(2 if self.bshd else 1), (emb.sin() * self.factor).unsqueeze(
            2 if self.bshd else 1)
        if self.interleaved:
            rot = torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)
        else:
            rot = torch.cat((-x[..., 8:], x[..., :8]), dim=-1)
        if self.swapped:
            return sin * rot + cos * x
        return x * cos + rot * sin


@pytest.mark.parametrize("layout_bshd,swapped,factor,per_row,interleaved", [
    (False, False, 1.0, False, False), (True, False, 1.0, False, False), (False, True, 0.8, False, False),
    (True, True, 1.3, True, False), (False, False, 1.0, True, False), (False, False, 1.0, False, True),
    (True, True, 0.9, True, True)])
def test_pattern_variations_match_eager(layout_bshd, swapped, factor, per_row, interleaved):
    module = Rotary(layout_bshd, swapped, factor, per_row, interleaved)
    seq = torch.export.Dim("seq", min=1, max=64)
    shape = (2, 5, 3, 16) if layout_bshd else (2, 3, 5, 16)
    run = dgt.compile(module, (torch.randn(shape),), dynamic_shapes=({1 if layout_bshd else 2: seq},), engine=1)
    assert kinds(run).count("RoPE") == 1 and "Neg" not in kinds(run), kinds(run)
    (rope,) = [op for cp in run.compiled_partitions for op in cp.program.ops if op.kind.name == "RoPE"]
    assert rope.attrs["mode"] == ("normal" if interleaved else "neox")
    for n in (1, 7, 40):
        x = torch.randn((2, n, 3, 16) if layout_bshd else (2, 3, n, 16))
        torch.testing.assert_close(run(x), module(x), atol=2e-5, rtol=1e-5)
