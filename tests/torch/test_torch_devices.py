"""PyTorch programs on devices: the front end's partitions compiled for an
RPC device (a `dyngraph rpc-server` on 127.0.0.1, served by a CPU: this runs
in CI) and for each GPU this build has, against the same program on the host
CPU. Ops a device cannot run (dyngraph's CPU kernels: Quantize, a grouped
convolution, integer sorts, ...) run on the host CPU by themselves; state (a KV
cache) lives on the device through prefill, decode and prefill again."""

import pytest

torch = pytest.importorskip("torch", minversion="2.5")
transformers = pytest.importorskip("transformers")

import dyngraph as dg  # noqa: E402
import dyngraph.torch as dgt  # noqa: E402
from dyngraph.torch.hf import StaticCacheLM, export_static_cache_lm, greedy  # noqa: E402
from deviceutil import DEVICES, device_engine  # noqa: E402
from rpcutil import one_server  # noqa: E402
from torchutil import offline  # noqa: E402

offline()

# f32 against f32 in another order (ggml's own kernels there, dyngraph's on the host); on a
# GPU, ggml-cuda's f32 products are TF32 (factors rounded to 11 significant bits, f32 sums):
# logits of O(1) through two layers, 3e-2
ATOL = {"rpc": 1e-4, "gpu": 3e-2}


@pytest.fixture(scope="module")
def server():
    yield from one_server()


@pytest.fixture(params=DEVICES)
def device(request, server):
    """(an engine of the device, the tolerance of its f32 results against the host CPU's)"""
    return device_engine(request.param, server.endpoint, timeout=60), ATOL["rpc" if request.param == "rpc" else "gpu"]


def both(module, device, args=(), kwargs=None, dynamic_shapes=None):
    """The program, exported once (most of a compile's time is torch's), compiled for the host
    CPU and for the device."""
    eng, atol = device
    ep = dgt.export(module, args, kwargs, dynamic_shapes)
    return dgt.compile(ep, engine=1), dgt.compile(ep, engine=eng), atol


def tiny_llama(**extra):
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256, **extra)
    return transformers.LlamaForCausalLM(cfg).eval()


def test_a_decoder_matches_the_host_cpu_at_every_length(device):
    model = tiny_llama()
    seq = torch.export.Dim("seq", min=1, max=128)
    cpu, dev, atol = both(model, device, kwargs={"input_ids": torch.randint(0, 128, (1, 5)), "use_cache": False},
                          dynamic_shapes={"input_ids": {1: seq}, "use_cache": None})
    assert dev.fallbacks == [], dev.report()
    for n in (1, 7, 33, 128):
        ids = torch.randint(0, 128, (1, n))
        torch.testing.assert_close(dev(input_ids=ids, use_cache=False).logits, cpu(input_ids=ids, use_cache=False).logits,
                                   atol=atol, rtol=0)
    (cp,) = dev.compiled_partitions
    placed = dict((name, ops) for name, ops, _ in cp.placement())
    assert sum(placed.values()) == len(cp.program.ops) and placed["CPU (host)"] == cp.cache_info().host_fallback_ops


@pytest.mark.parametrize("weight_type", ["f32", "f16", "q8_0", "q4_0"])
def test_static_cache_decoding_gives_the_host_cpus_tokens(device, weight_type):
    """Prefill, decode, reset, prefill again: the KV cache lives on the device, the tokens are the CPU's
    with the same weight type."""
    lm = StaticCacheLM(tiny_llama(), max_cache_len=64).eval()
    ep = export_static_cache_lm(lm)
    eng, _ = device
    cpu = dgt.compile(ep, engine=1, weight_type=weight_type)
    dev = dgt.compile(ep, engine=eng, weight_type=weight_type)
    assert dev.fallbacks == [], dev.report()
    prompt = torch.randint(0, 128, (9,)).tolist()
    want = greedy(cpu, prompt, 12)
    assert greedy(dev, prompt, 12) == want
    # every op on the device: a host op splits the graph and copies each token (its LogicalAnd did)
    (cp,) = dev.compiled_partitions
    if eng.kind == dg.Engine.RPC:
        host = [(i, k) for i, k, d in cp.op_placement() if d == "CPU (host)"]
        assert host == [] and cp.cache_info().graph_splits == 1, host
    dev.reset()
    assert not dev.buffer("k_cache_0").any()
    assert greedy(dev, prompt[:4], 6) == greedy(cpu.reset() or cpu, prompt[:4], 6)


def test_an_encoder_with_dynamic_batch_matches_the_host_cpu(device):
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                  num_attention_heads=4, max_position_embeddings=256)
    model = transformers.BertModel(cfg).eval()
    batch, seq = torch.export.Dim("batch", min=1, max=8), torch.export.Dim("seq", min=2, max=128)
    ids = torch.randint(0, 128, (2, 9))
    cpu, dev, atol = both(model, device, args=(ids, torch.ones_like(ids)),
                          dynamic_shapes=({0: batch, 1: seq}, {0: batch, 1: seq}))
    assert dev.fallbacks == [], dev.report()
    for b, n in ((1, 3), (3, 17), (2, 128)):
        ids = torch.randint(0, 128, (b, n))
        mask = torch.ones_like(ids)
        mask[0, n // 2:] = 0
        torch.testing.assert_close(dev(ids, mask).last_hidden_state, cpu(ids, mask).last_hidden_state, atol=atol, rtol=0)


def test_a_conv_net_matches_the_host_cpu(device):
    torch.manual_seed(0)
    cfg = transformers.ResNetConfig(num_channels=3, embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1],
                                    layer_type="basic", num_labels=10)
    model = transformers.ResNetForImageClassification(cfg).eval()
    batch = torch.export.Dim("batch", min=1, max=8)
    cpu, dev, atol = both(model, device, kwargs={"pixel_values": torch.randn(2, 3, 32, 32)},
                          dynamic_shapes={"pixel_values": {0: batch}})
    assert dev.fallbacks == [], dev.report()
    for b in (1, 3):
        x = torch.randn(b, 3, 32, 32)
        torch.testing.assert_close(dev(pixel_values=x).logits, cpu(pixel_values=x).logits, atol=10 * atol, rtol=0)


def test_a_moe_decoder_matches_the_host_cpu(device):
    torch.manual_seed(0)
    cfg = transformers.Qwen3MoeConfig(vocab_size=96, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                                      num_key_value_heads=2, max_position_embeddings=128, intermediate_size=64,
                                      moe_intermediate_size=16, head_dim=8, num_experts=8, num_experts_per_tok=2,
                                      decoder_sparse_step=1, norm_topk_prob=True)
    model = transformers.Qwen3MoeForCausalLM(cfg).eval()
    seq = torch.export.Dim("seq", min=1, max=64)
    cpu, dev, atol = both(model, device, kwargs={"input_ids": torch.randint(0, 96, (1, 5)), "use_cache": False},
                          dynamic_shapes={"input_ids": {1: seq}, "use_cache": None})
    assert dev.fallbacks == [], dev.report()
    for n in (1, 9, 40):
        ids = torch.randint(0, 96, (1, n))
        torch.testing.assert_close(dev(input_ids=ids, use_cache=False).logits, cpu(input_ids=ids, use_cache=False).logits,
                                   atol=atol, rtol=0)
