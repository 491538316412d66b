"""The Llama-style decoder of dyngraph.models.llama against a numpy reference,
through prefill -> decode -> a new prompt of another length -> decode, with
its KV cache in state."""

import numpy as np
import pytest

from dyngraph.models.llama import LlamaConfig, LlamaRunner, random_weights
from reference.llama_numpy import LlamaNumpy

# f32 against float64 over 2 layers: logits are O(1-10); 2e-4 is ~100 f32 ulps of the largest
ATOL, RTOL = 2e-4, 1e-4


@pytest.fixture(scope="module", params=[True, False], ids=["tied", "untied"])
def models(request):
    cfg = LlamaConfig(vocab=96, hidden=64, layers=2, heads=4, kv_heads=2, ffn=128, max_seq=32,
                      tied_embeddings=request.param)
    w = random_weights(cfg, seed=3)
    import dyngraph as dg

    return LlamaRunner(cfg, w, dg.Engine(num_threads=1)), LlamaNumpy(cfg, w)


def step(runner, ref, tokens):
    pos = np.arange(runner.pos, runner.pos + len(tokens))
    got = runner.forward(tokens)
    want = ref.forward(np.asarray(tokens), pos)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    return got


def test_every_step_matches_the_reference(models):
    runner, ref = models
    runner.reset()
    ref.reset()
    rng = np.random.default_rng(0)
    logits = step(runner, ref, rng.integers(0, 96, 7).tolist())  # prefill 7
    for _ in range(8):  # 8 decode steps, feeding the argmax back
        logits = step(runner, ref, [int(np.argmax(logits[-1]))])
    runner.reset()
    ref.reset()
    logits = step(runner, ref, rng.integers(0, 96, 4).tolist())  # a new prompt of another length
    for _ in range(5):
        logits = step(runner, ref, [int(np.argmax(logits[-1]))])
    # prefill 7, decode, prefill 4: three shapes, three graphs, whatever the order
    assert runner.cp.cache_info().builds == 3


def test_one_generation_builds_exactly_two_graphs():
    import dyngraph as dg

    cfg = LlamaConfig(vocab=64, hidden=32, layers=1, heads=2, kv_heads=1, ffn=64, max_seq=24)
    runner = LlamaRunner(cfg, random_weights(cfg), dg.Engine(num_threads=1))
    out = runner.generate(list(range(1, 8)), max_new_tokens=10)
    assert len(out) == 10
    assert runner.cp.cache_info().builds == 2  # prefill at 7, decode at 1


def test_greedy_generation_matches_the_reference():
    import dyngraph as dg

    cfg = LlamaConfig(vocab=64, hidden=32, layers=2, heads=4, kv_heads=2, ffn=64, max_seq=24)
    w = random_weights(cfg, seed=11)
    runner, ref = LlamaRunner(cfg, w, dg.Engine(num_threads=1)), LlamaNumpy(cfg, w)
    prompt = [5, 9, 2, 33, 17]
    got = runner.generate(prompt, max_new_tokens=12)
    logits = ref.forward(np.array(prompt), np.arange(len(prompt)))
    want = []
    for t in range(12):
        want.append(int(np.argmax(logits[-1])))
        logits = ref.forward(np.array([want[-1]]), np.array([len(prompt) + t]))
    assert got == want


def test_the_kv_cache_is_the_state(models):
    runner, ref = models
    runner.reset()
    ref.reset()
    step(runner, ref, [1, 2, 3])
    k0 = runner.cp.read_state(next(t.id for t in runner.cp.program.tensors if t.name == "l0.k_cache"))
    np.testing.assert_allclose(k0[0], ref.k[0], rtol=1e-4, atol=1e-5)
    assert not k0[0][:, 3:].any()  # nothing written past the 3 prefilled positions


def test_the_cache_length_is_enforced(models):
    runner, _ = models
    runner.reset()
    with pytest.raises(ValueError, match="holds 32 positions"):
        runner.forward(list(range(33)))
