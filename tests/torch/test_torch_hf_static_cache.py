"""``dyngraph.torch.hf.StaticCacheLM`` compiled (prefill, then one token per
call) against transformers' own ``model.generate`` and eager forward, for the
common decoder families: sdpa and eager attention (Llama), sliding windows and
logit softcapping (Gemma2, eager by default), multi-query, grouped
(``new_decoder_architecture``) and ALiBi Falcon, ALiBi Bloom.

Each model is a tiny random-weight config; its seed and initializer range are
chosen so that no greedy choice of the 16 is a near-tie: the test checks that
the top-2 logit gap of every step is above 100x the logits tolerance, so
the comparison of tokens cannot flake on summation order."""

import pytest

torch = pytest.importorskip("torch", minversion="2.5")
transformers = pytest.importorskip("transformers")

import dyngraph.torch as dgt  # noqa: E402
from dyngraph.errors import CompileError, ShapeError  # noqa: E402
from dyngraph.torch.hf import StaticCacheLM, export_static_cache_lm  # noqa: E402
from torchutil import offline  # noqa: E402

offline()

LOGITS_ATOL = 1e-4  # f32 against f32, other summation orders; the logits are O(1)
NEW_TOKENS = 16
PROMPT = 9

SMALL = dict(vocab_size=128, hidden_size=64, num_hidden_layers=2, num_attention_heads=4)


def _llama(attn):
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(
        **SMALL, intermediate_size=128, num_key_value_heads=2, max_position_embeddings=256, initializer_range=0.5,
        attn_implementation=attn))


def _falcon(**variant):
    return transformers.FalconForCausalLM(transformers.FalconConfig(**SMALL, initializer_range=0.5, **variant))


# family -> (model factory, seed of weights and prompt)
FAMILIES = {
    "llama-sdpa": (lambda: _llama("sdpa"), 1),
    "llama-eager": (lambda: _llama("eager"), 1),  # additive float mask
    # eager by default; layer 0 slides over 8 positions (the 25 tokens do not fit), softcapped scores and logits;
    # untied embeddings (tied ones, scaled by sqrt(hidden), make a random model repeat its input token)
    "gemma2": (lambda: transformers.Gemma2ForCausalLM(transformers.Gemma2Config(
        **SMALL, intermediate_size=128, num_key_value_heads=2, head_dim=16, max_position_embeddings=256,
        sliding_window=8, initializer_range=0.2, tie_word_embeddings=False)), 1),
    "bloom": (lambda: transformers.BloomForCausalLM(transformers.BloomConfig(
        vocab_size=128, hidden_size=64, n_layer=2, n_head=4, initializer_range=0.5)), 0),
    "falcon-multi-query": (lambda: _falcon(multi_query=True), 0),  # one kv head
    "falcon-new-architecture": (lambda: _falcon(new_decoder_architecture=True, num_kv_heads=2), 0),  # 2 kv groups
    "falcon-alibi": (lambda: _falcon(alibi=True, multi_query=False), 0),
}
# every family converts whole (Bloom's and Falcon's rank-5 views of a fused QKV, the ALiBi slopes' pow of two tensors)
WHOLE = set(FAMILIES)


def build(family: str, batch: int = 1):
    factory, seed = FAMILIES[family]
    torch.manual_seed(seed)
    model = factory().eval()
    model.generation_config.eos_token_id = None  # always 16 new tokens
    prompt = torch.randint(0, 128, (batch, PROMPT), generator=torch.Generator().manual_seed(seed))
    return model, prompt


def generate(model, prompt):
    with torch.no_grad():
        out = model.generate(prompt, max_new_tokens=NEW_TOKENS, do_sample=False, output_logits=True,
                             return_dict_in_generate=True)
    step_logits = [x for x in out.logits]  # [B, vocab] per generated token: the logits its choice was made from
    top2 = torch.stack([x.topk(2, dim=-1).values for x in step_logits])
    assert (top2[..., 0] - top2[..., 1]).min() > 100 * LOGITS_ATOL, "a greedy choice is a near-tie: pick another seed"
    return out.sequences[:, prompt.shape[1]:], step_logits, out.past_key_values


def compile_lm(model, batch: int = 1, max_cache_len: int = 32):
    lm = StaticCacheLM(model, max_cache_len=max_cache_len, batch_size=batch).eval()
    return lm, dgt.compile(export_static_cache_lm(lm, batch_size=batch), engine=1)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_compiled_static_cache_generates_what_model_generate_does(family):
    model, prompt = build(family)
    want_tokens, want_logits, hf_cache = generate(model, prompt)
    with torch.no_grad():
        want_prefill = model(prompt).logits
    lm, run = compile_lm(model)
    if family in WHOLE:
        assert run.fallbacks == [], run.report()
    # each layer's cache is sized like the one transformers' generate filled: kv heads and head sizes as the model
    # writes them (one head for multi-query Falcon, the broadcast groups of the new architecture, 2 for the grouped)
    for i, layer in enumerate(hf_cache.layers):
        for ours, theirs in ((f"k_cache_{i}", layer.keys), (f"v_cache_{i}", layer.values)):
            b, h, _, d = theirs.shape
            assert tuple(getattr(lm, ours).shape) == (b, h, 32, d), (ours, tuple(theirs.shape))

    logits = run(prompt, torch.arange(PROMPT))
    torch.testing.assert_close(logits, want_prefill, atol=LOGITS_ATOL, rtol=0)
    got = []
    for step in range(NEW_TOKENS):
        torch.testing.assert_close(logits[:, -1], want_logits[step], atol=LOGITS_ATOL, rtol=0)
        got.append(int(logits[0, -1].argmax()))
        if step + 1 < NEW_TOKENS:
            logits = run(torch.tensor([[got[-1]]]), torch.tensor([PROMPT + step]))
    assert got == want_tokens[0].tolist()


@pytest.mark.parametrize("family", ["llama-sdpa", "gemma2", "bloom"])
def test_a_prompt_in_two_chunks_matches_the_whole_prompt(family):
    """The second chunk's queries start at position 9 of the cache: a mask with a query offset and more than one
    query (Gemma2: its sliding window of 8 crosses the chunk boundary; Bloom: ALiBi over cached keys)."""
    model, _ = build(family)
    ids = torch.randint(0, 128, (1, 16), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        want = model(ids).logits
    _, run = compile_lm(model)
    first = run(ids[:, :9], torch.arange(9))
    second = run(ids[:, 9:], torch.arange(9, 16))
    torch.testing.assert_close(torch.cat([first, second], 1), want, atol=LOGITS_ATOL, rtol=0)


def test_a_batch_of_prompts_generates_what_model_generate_does():
    model, prompt = build("llama-eager", batch=2)
    want_tokens, want_logits, _ = generate(model, prompt)
    _, run = compile_lm(model, batch=2)
    logits = run(prompt, torch.arange(PROMPT))
    got = []
    for step in range(NEW_TOKENS):
        torch.testing.assert_close(logits[:, -1], want_logits[step], atol=LOGITS_ATOL, rtol=0)
        got.append(logits[:, -1].argmax(-1))
        if step + 1 < NEW_TOKENS:
            logits = run(got[-1][:, None], torch.tensor([PROMPT + step]))
    assert torch.equal(torch.stack(got, 1), want_tokens)


def test_bad_sizes_and_a_model_that_skips_a_cache_layer_are_typed_errors():
    model, _ = build("llama-sdpa")
    for bad in (dict(max_cache_len=0), dict(max_cache_len=8, batch_size=0)):
        with pytest.raises(ShapeError, match="max_cache_len"):
            StaticCacheLM(model, **bad)

    class OneCachedLayerOfTwo(torch.nn.Module):  # e.g. layers that reuse another layer's keys and values
        def __init__(self):
            super().__init__()
            self.config = transformers.LlamaConfig(num_hidden_layers=2)
            self.weight = torch.nn.Parameter(torch.zeros(1))

        def forward(self, input_ids, position_ids, past_key_values, use_cache):
            kv = torch.zeros(1, 2, input_ids.shape[1], 8)
            past_key_values.update(kv, kv, 0)

    with pytest.raises(CompileError, match="wrote 1 of its 2 layers"):
        StaticCacheLM(OneCachedLayerOfTwo(), max_cache_len=8)


def test_the_export_records_stack_traces_only_when_asked(monkeypatch):
    """export_static_cache_lm leaves out each node's stack trace (a sixth of a real model's export time) unless
    asked; torch's setting is as it was afterwards, after a failed export too; both programs compute the same."""
    from torch.fx import config as fx_config

    model, prompt = build("llama-sdpa")
    lm = StaticCacheLM(model, max_cache_len=32).eval()
    before = fx_config.do_not_emit_stack_traces
    quick = export_static_cache_lm(lm)
    assert fx_config.do_not_emit_stack_traces == before
    traced = export_static_cache_lm(lm, stack_traces=True)

    def traces(ep):
        return [n.meta.get("stack_trace") for n in ep.graph.nodes if n.op == "call_function"]

    # (the few runtime asserts export inserts afterwards name the pass that made them, either way)
    model_traces = [sum(bool(t) and "modeling_llama" in t for t in traces(ep)) for ep in (quick, traced)]
    assert model_traces[0] == 0 and model_traces[1] > len(traces(traced)) // 4, model_traces
    runs = [dgt.compile(ep, engine=1) for ep in (quick, traced)]
    got = [run(prompt, torch.arange(PROMPT)) for run in runs]
    torch.testing.assert_close(got[0], got[1], atol=0, rtol=0)

    def fail(*args, **kwargs):
        assert fx_config.do_not_emit_stack_traces
        raise RuntimeError("export failed")

    monkeypatch.setattr(torch.export, "export", fail)
    with pytest.raises(RuntimeError, match="export failed"):
        export_static_cache_lm(lm)
    assert fx_config.do_not_emit_stack_traces == before
