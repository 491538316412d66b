"""Mixture-of-experts routing from PyTorch: the converters of topk, sort,
argsort, histc, integer floor division, index_put (ScatterND) and the
grouped expert product (MatMulId), against eager at several sizes; and tiny
random transformers MoE decoders (Qwen3-MoE, Mixtral, OLMoE) that convert
whole (one partition, no fallback) and match eager logits at every length."""

import pytest

torch = pytest.importorskip("torch", minversion="2.5")
transformers = pytest.importorskip("transformers")

from torchutil import assert_matches_eager, compile_module, mk, offline  # noqa: E402

offline()


def grouped_mm_fallback():
    """transformers' grouped product (the one its MoE experts use on CPU), or skip."""
    moe = pytest.importorskip("transformers.integrations.moe")
    if not hasattr(moe, "_grouped_mm_fallback"):
        pytest.skip("this transformers has no grouped_mm_fallback")
    return torch.ops.transformers.grouped_mm_fallback


def routed_experts(x, w, top_k=2):
    """The grouped-experts routing of transformers (integrations/moe.py), in small."""
    e = w.shape[0]
    probs = torch.softmax(x @ w.sum(1).T, dim=-1)  # a router of [E, K]
    vals, idx = torch.topk(probs, top_k, dim=-1)
    ids = idx.reshape(-1)
    ids_g, perm = torch.sort(ids)
    rows = x[perm // top_k]
    counts = torch.histc(ids_g.float(), bins=e, min=0, max=e - 1)
    offs = torch.cumsum(counts, dim=0, dtype=torch.int32)
    out = grouped_mm_fallback()(rows, w.transpose(-2, -1), offs=offs) * vals.reshape(-1)[perm].unsqueeze(-1)
    inv = torch.empty_like(perm)
    inv[perm] = torch.arange(perm.size(0))
    return out[inv].view(x.shape[0], top_k, -1).sum(dim=1)


def at_bin_edges(n):
    """[n, 6]: values on and next to the bin edges of both histc calls below, and random ones."""
    edges = torch.cat([torch.linspace(-1.5, 2.0, 8), torch.linspace(0.1, 0.7, 4)])
    near = torch.cat([edges, torch.nextafter(edges, edges + 1), torch.nextafter(edges, edges - 1)])
    x = torch.rand(n * 6) * 4 - 2
    k = min(n * 6, near.numel())
    x[:k] = near[torch.randperm(near.numel())[:k]]
    return x.reshape(n, 6)


CASES = {
    "topk": (mk(lambda x: torch.topk(x, 3, dim=-1) + torch.topk(x, 2, dim=0, largest=False)),
             lambda n: [torch.randn(n + 1, 8)], [{0: 0}]),
    "sort_argsort": (mk(lambda x, i: (torch.sort(x, dim=0), torch.sort(i, descending=True, stable=True),
                                      torch.argsort(x, dim=-1, stable=True))),
                     lambda n: [torch.randn(n, 6), torch.randint(0, 4, (2, n))], [{0: 0}, {1: 0}]),
    "histc": (mk(lambda x, i: (torch.histc(x, bins=7, min=-1.5, max=2.0), torch.histc(x, bins=3, min=0.1, max=0.7),
                               torch.histc(i.float(), bins=4, min=0, max=3))),
              lambda n: [at_bin_edges(n), torch.randint(-1, 5, (n,))], [{0: 0}, {0: 0}]),
    "floor_divide": (mk(lambda i: (i // 3, torch.div(i, -4, rounding_mode="floor"), i // 1)),
                     lambda n: [torch.randint(-40, 40, (n, 7))], [{0: 0}]),
    "index_put": (mk(lambda x, i, j, v: (x.index_put((i,), v), x.index_put((i,), v, accumulate=True),
                                         x.index_put((i, j), v[:, 0], accumulate=True),
                                         (x * 8).long().index_put((j,), (v * 8).long()))),
                  lambda n: [torch.randn(9, 9), torch.randint(-9, 9, (n,)), torch.randint(-9, 9, (n,)),
                             torch.randn(n, 9)],
                  [None, {0: 0}, {0: 0}, {0: 0}]),
    "inverse_permutation": (mk(lambda p: torch.empty_like(p).index_put((p,), torch.arange(p.shape[0]))),
                            lambda n: [torch.randperm(n)], [{0: 0}]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_routing_ops_match_eager_at_every_size(name):
    torch.manual_seed(0)
    module, make, dims = CASES[name]
    n = torch.export.Dim("n", min=1, max=64)
    run = compile_module(module, make(6), tuple(None if d is None else {k: n for k in d} for d in dims))
    assert run.fallbacks == [], run.report()
    assert_matches_eager(run, module, [make(s) for s in (1, 5, 17)], atol=1e-6, rtol=1e-6)


class Experts(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4, 6, 8) * 0.3)  # [E, N, K] as transformers holds them

    def forward(self, x):
        return routed_experts(x, self.w)


def test_grouped_experts_become_matmul_id_on_untransposed_weights():
    grouped_mm_fallback()
    torch.manual_seed(0)
    module = Experts()
    n = torch.export.Dim("n", min=1, max=64)
    run = compile_module(module, [torch.randn(5, 8)], ({0: n},))
    assert run.fallbacks == [], run.report()
    kinds = [op.kind.name for cp in run.compiled_partitions for op in cp.program.ops]
    mm = [op for cp in run.compiled_partitions for op in cp.program.ops if op.kind.name == "MatMulId"]
    assert len(mm) == 1 and mm[0].attrs["transpose_b"] is True and "TopK" in kinds and "ScatterND" in kinds
    assert_matches_eager(run, module, [[torch.randn(s, 8)] for s in (1, 5, 40)], atol=1e-5, rtol=1e-5)


def tiny_moe(kind: str):
    torch.manual_seed(0)
    common = dict(vocab_size=96, hidden_size=32, num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
                  max_position_embeddings=128)
    if kind == "qwen3-moe":
        cfg = transformers.Qwen3MoeConfig(intermediate_size=64, moe_intermediate_size=16, head_dim=8, num_experts=8,
                                          num_experts_per_tok=2, decoder_sparse_step=1, norm_topk_prob=True, **common)
        return transformers.Qwen3MoeForCausalLM(cfg).eval()
    if kind == "mixtral":
        cfg = transformers.MixtralConfig(intermediate_size=16, num_local_experts=4, num_experts_per_tok=2, **common)
        return transformers.MixtralForCausalLM(cfg).eval()
    cfg = transformers.OlmoeConfig(intermediate_size=16, num_experts=8, num_experts_per_tok=2, **common)
    return transformers.OlmoeForCausalLM(cfg).eval()


@pytest.mark.parametrize("kind", ["qwen3-moe", "mixtral", "olmoe"])
def test_tiny_moe_decoder_runs_whole_and_matches_eager(kind):
    import dyngraph.torch as dgt

    model = tiny_moe(kind)
    seq = torch.export.Dim("seq", min=1, max=128)
    ids = torch.randint(0, 96, (1, 5))
    run = dgt.compile(model, kwargs={"input_ids": ids, "use_cache": False},
                      dynamic_shapes={"input_ids": {1: seq}, "use_cache": None}, engine=1)
    assert run.fallbacks == [], run.report()
    assert len(run.compiled_partitions) == 1
    kinds = [op.kind.name for op in run.compiled_partitions[0].program.ops]
    assert kinds.count("MatMulId") == 2 and kinds.count("TopK") >= 2  # gate-up and down; the router and the sort
    routed = set()
    for n in (1, 7, 40):
        ids = torch.randint(0, 96, (1, n))
        with torch.no_grad():
            want = model(input_ids=ids, use_cache=False).logits
            probs = model.model.layers[0].mlp.gate(model.model.embed_tokens(ids).reshape(n, -1))
        routed |= set(torch.as_tensor(probs[-1] if isinstance(probs, tuple) else probs).reshape(-1).tolist())
        got = run(input_ids=ids, use_cache=False).logits
        torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    assert len(routed) > 2  # the routers send tokens to several experts (not a degenerate all-equal routing)
