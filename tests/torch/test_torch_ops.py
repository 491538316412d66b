"""ATen op converters against eager PyTorch.

Each case is a small module exported with a dynamic dimension ``n``,
compiled once, and run at several values of ``n``; every node must be
converted (nothing runs in PyTorch) and the outputs must equal eager's
within f32 rounding (1e-5: a few ulps of O(1) values)."""

import pytest

torch = pytest.importorskip("torch", minversion="2.5")
F = torch.nn.functional

from torchutil import assert_matches_eager, compile_module, mk  # noqa: E402

SIZES = (1, 5, 17)


def n_dim():
    return torch.export.Dim("n", min=1, max=64)


def randn(*shape):
    return torch.randn(*shape)


class Params(torch.nn.Module):
    """A module with weights, whose forward is ``fn(self, *inputs)`` (two inputs at most)."""

    def __init__(self, fn, d=8):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.w = torch.nn.Parameter(torch.randn(d, generator=g))
        self.b = torch.nn.Parameter(torch.randn(d, generator=g))
        self.m = torch.nn.Parameter(torch.randn(d, 6, generator=g))
        self.lin = torch.nn.Linear(d, 6)
        self.emb = torch.nn.Embedding(10, d)
        self.fn = fn

    def forward(self, x, y=None):
        return self.fn(self, x) if y is None else self.fn(self, x, y)


# name -> (module, inputs for a size n, which input dimensions are n[, the least n])
CASES = {
    "add_sub_alpha_scalars": (
        mk(lambda x, y: (torch.sub(x, y, alpha=3) + 2) * 0.5 / (y.abs() + 1) - torch.rsub(x, 1.0)),
        lambda n: [randn(n, 8), randn(n, 8)], [{0: 0}, {0: 0}]),
    "aliases": (  # the export keeps the name the code called: torch.multiply is mul...
        mk(lambda x, y: (torch.multiply(x, y) - torch.subtract(x, y, alpha=2) + torch.true_divide(x, y.abs() + 1)
                         + torch.divide(x, 3, rounding_mode="floor") + torch.clip(x, -1, 1) + torch.negative(y)
                         + torch.absolute(x) + torch.special.expit(y) + torch.special.erf(x)
                         + torch.greater(x, y) + torch.less_equal(x, 0.5) + torch.not_equal(x, y),
                         torch.concatenate([x, y], 1), torch.absolute(x.int()), torch.negative(x.int()))),
        lambda n: [randn(n, 8), randn(n, 8)], [{0: 0}, {0: 0}]),
    "roll": (  # known sizes: slices and a concatenation; the dynamic axis: a gather (shift 1 of 1 row too)
        mk(lambda x: (torch.roll(x, (-3, 2), (1, 2)), torch.roll(x, 5) * 2, torch.roll(x, 1, 0))),
        lambda n: [randn(n, 7, 6)], [{0: 0}]),
    "integer_fmod": (  # the sign of x (torch.roll's decomposed indices use it)
        mk(lambda i: (torch.fmod(i, 3), torch.fmod(i, -4), torch.fmod(i, i.abs() + 1), torch.fmod(-i, 7))),
        lambda n: [torch.randint(-20, 21, (n, 5))], [{0: 0}]),
    "type_promotion": (
        mk(lambda i, x: (i * 1.5 + (i > 2)) + x.to(torch.float16).float() + i.float() / 3 + (i + 1)),
        lambda n: [torch.randint(-4, 5, (n, 4)), randn(n, 4)], [{0: 0}, {0: 0}]),
    "unary": (
        mk(lambda x: torch.tanh(x) + torch.sigmoid(x) + F.silu(x) + F.relu(x) + torch.exp(-x.abs())
           + torch.sqrt(x.abs()) + torch.rsqrt(x.abs() + 1) + F.gelu(x) + F.gelu(x, approximate="tanh")
           + torch.sin(x) + torch.cos(x) + torch.log(x.abs() + 1) + x.neg() + x.reciprocal().clamp(-3, 3)),
        lambda n: [randn(n, 8)], [{0: 0}]),
    "integer_unary": (
        mk(lambda i: (i.abs(), -i, i.square(), i.abs().float().sqrt())),
        lambda n: [torch.randint(-9, 9, (n, 4))], [{0: 0}]),
    "powers": (
        mk(lambda x: x ** 2 + x ** 3 + (x.abs() + 1) ** -0.5 + (x.abs() + 1) ** 0.5 + 2 ** x + x.square()),
        lambda n: [randn(n, 8)], [{0: 0}]),
    "clamps_activations": (
        mk(lambda x: x.clamp(-0.5, 0.7) + x.clamp(min=0.1) + F.hardtanh(x) + F.leaky_relu(x, 0.1)
           + F.hardswish(x) + F.softplus(x) + torch.maximum(x, -x) + torch.minimum(x, x * 0.5)),
        lambda n: [randn(n, 8) * 4], [{0: 0}]),
    "compare_where_masked_fill": (
        mk(lambda x, y: torch.where(x > y, x, y * 2) + (x == y).float() + (x <= 0.5).to(torch.float32)
           + x.masked_fill(x < 0, -1.0) + torch.where(y != 0, 1.0, x)),
        lambda n: [randn(n, 8), randn(n, 8)], [{0: 0}, {0: 0}]),
    "logical": (
        mk(lambda x, y: ((x > 0) & (y > 0)) | ~(x < -1) ^ (y > 1)),
        lambda n: [randn(n, 8), randn(n, 8)], [{0: 0}, {0: 0}]),
    "norms_softmax": (
        Params(lambda s, x: F.softmax(x, -1) + F.layer_norm(x, (8,), s.w, s.b) + F.layer_norm(x, (8,))
               + F.rms_norm(x, (8,), s.w, 1e-6) + F.log_softmax(x, 0) + F.normalize(x, dim=-1)),
        lambda n: [randn(2, n, 8)], [{1: 0}]),
    "rms_norm_pattern": (
        Params(lambda s, x: s.w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))),
        lambda n: [randn(n, 8)], [{0: 0}]),
    "reductions": (
        mk(lambda x: (x.sum(-1), x.mean((0, 2), keepdim=True), x.amax(-1), x.max(1).values, x.sum(),
                      x.amin(1), (x > 0).sum(-1), torch.linalg.vector_norm(x, dim=-1))),
        lambda n: [randn(3, n, 8)], [{1: 0}]),
    "cumsum": (
        mk(lambda i, x: (torch.cumsum(i, -1), torch.cumsum(x, 0), (i != 1).cumsum(-1))),
        lambda n: [torch.randint(-3, 4, (2, n)), randn(n, 3)], [{1: 0}, {0: 0}]),
    "views_permutes": (
        mk(lambda x: (x.view(x.shape[0], 2, 4).permute(2, 0, 1).transpose(0, 1).reshape(-1) * 2,
                      x.unsqueeze(1).squeeze(1).t(), x.reshape(-1, 2).contiguous(), x.flatten())),
        lambda n: [randn(n, 8)], [{0: 0}]),
    "slices_selects": (
        mk(lambda x: (x[1:, 2:6:2] * 1, x[:, -1] + 0, x[-3:] - 0, x.narrow(1, 2, 3), x[0], x[:, 1:-1],
                      x[x.shape[0] - 2:], x.select(0, -2), x.narrow(0, -2, 2), x.narrow(1, -3, 2))),
        lambda n: [randn(n, 8)], [{0: 0}], 4),
    "cat_split": (
        mk(lambda x, y: (torch.cat([x, y], 0), torch.cat([x, y[:, :3]], 1), *torch.split(x, 3, dim=1),
                         *x.chunk(2, dim=1), *x[:, :3].unbind(1))),
        lambda n: [randn(n, 8), randn(n, 8)], [{0: 0}, {0: 0}]),
    "indexing": (
        Params(lambda s, x, i: (x[i], x[:, i[:2] - 4], torch.gather(x, 1, i.view(-1, 1).expand(-1, 3)),
                                x.index_select(1, i[:3]), s.emb(i), x[i.view(-1, 1), i[:2].view(1, -1)], x[:, i])),
        lambda n: [randn(n, 8), torch.randint(0, min(n, 8), (n,))], [{0: 0}, {0: 0}], 3),
    "arange_full": (
        mk(lambda x: (torch.arange(x.shape[0])[:, None] + x, torch.arange(1, 2 * x.shape[0] + 1, 2).float()[:, None] * x,
                      torch.full((x.shape[0], 4), 2.5) - x, torch.zeros_like(x) + x, torch.cat([torch.ones(1, 4), x]),
                      x.new_zeros(2, x.shape[0]) + x[:, 0], torch.full_like(x, 7.0) + x)),
        lambda n: [randn(n, 4)], [{0: 0}]),
    "expand": (
        mk(lambda x, y: (x[:, :1].expand(x.shape[0], 8) + y, (x[:1] > 0).expand(x.shape[0], 8), x.unsqueeze(0).expand(3, -1, -1))),
        lambda n: [randn(n, 8), randn(n, 8)], [{0: 0}, {0: 0}]),
    "matmuls": (
        Params(lambda s, x, y: (x @ s.m, s.lin(x), F.linear(x, s.m.T), torch.bmm(x[None], y[None].transpose(1, 2)),
                                torch.matmul(x, s.w), x @ y.T, torch.matmul(x.view(1, -1, 8), s.m))),
        lambda n: [randn(n, 8), randn(n, 8)], [{0: 0}, {0: 0}]),
    "matmuls_of_rank_5": (  # a weight under a rank-5 batch, broadcast batches, an einsum through rank-6 views
        Params(lambda s, x, y: (x @ s.m, torch.matmul(x, y),
                                torch.einsum("abcij,abcjk->abcik", x, y.expand(2, -1, 3, -1, -1)))),
        lambda n: [randn(2, n, 3, 4, 8), randn(1, n, 1, 8, 5)], [{1: 0}, {1: 0}]),
    "norms_of_rank_5": (
        Params(lambda s, x: (F.layer_norm(x, (8,), s.w, s.b), F.layer_norm(x, (4, 8)), F.rms_norm(x, (8,), s.w, eps=1e-6),
                             F.rms_norm(x, (3, 4, 8)))),
        lambda n: [randn(2, n, 3, 4, 8)], [{1: 0}]),
    "attention": (
        mk(lambda q, k, v, m: (F.scaled_dot_product_attention(q, k, v), F.scaled_dot_product_attention(q, k, v, is_causal=True),
                               F.scaled_dot_product_attention(q, k, v, attn_mask=m), F.scaled_dot_product_attention(
                                   q, k, v, attn_mask=torch.where(m, 0.0, -1e9), scale=0.3))),
        lambda n: [randn(1, 4, n, 16), randn(1, 4, n, 16), randn(1, 4, n, 16), torch.rand(n, n) > 0.3],
        [{2: 0}, {2: 0}, {2: 0}, {0: 0, 1: 0}]),
    "grouped_query_attention": (
        mk(lambda q, k, v: F.scaled_dot_product_attention(
            q, k[:, :, None].expand(1, 2, 2, k.shape[2], 16).reshape(1, 4, k.shape[2], 16),
            v[:, :, None].expand(1, 2, 2, v.shape[2], 16).reshape(1, 4, v.shape[2], 16), is_causal=True)),
        lambda n: [randn(1, 4, n, 16), randn(1, 2, n, 16), randn(1, 2, n, 16)], [{2: 0}, {2: 0}, {2: 0}]),
    "repeat_along_a_new_axis": (
        mk(lambda x: (x[:, :, None].expand(1, 2, 3, x.shape[2], 4).reshape(1, 6, x.shape[2], 4),
                      x[:, None].expand(1, 3, 2, x.shape[2], 4).reshape(1, 6, x.shape[2], 4))),
        lambda n: [randn(1, 2, n, 4)], [{2: 0}]),
    "activations_of_onednn": (
        mk(lambda x: (F.elu(x, 0.7), F.hardsigmoid(x), F.mish(x), F.softplus(x, beta=2.0), F.softplus(x, 0.5, 1.0),
                      F.leaky_relu(x, -0.2), torch.erf(x), F.hardswish(x), x.clamp(max=0.3), F.relu6(x))),
        lambda n: [randn(n, 8) * 4], [{0: 0}]),
    "rounding_and_floor_division": (
        mk(lambda x, y, i, j: (torch.round(x), torch.ceil(x), torch.floor(x), x // y, torch.div(x, y, rounding_mode="floor"),
                               torch.div(x, y, rounding_mode="trunc"), i // j, i // 3, torch.floor_divide(i, -2),
                               torch.ceil(i), x.round(decimals=0), torch.div(i, j, rounding_mode="trunc"),
                               torch.div(i, -3, rounding_mode="trunc"), torch.div(i, 4, rounding_mode="trunc"))),
        lambda n: [randn(n, 8) * 5, randn(n, 8) + 3, torch.randint(-20, 20, (n, 8)),
                   torch.randint(1, 5, (n, 8)) * (2 * torch.randint(0, 2, (n, 8)) - 1)],
        [{0: 0}, {0: 0}, {0: 0}, {0: 0}]),
    "pow_of_tensors": (
        mk(lambda x, y: (torch.pow(x.abs() + 0.5, y), (x.abs() + 0.1) ** 1.7, 2.0 ** y, torch.pow(3, y), x.pow(y.round()))),
        lambda n: [randn(n, 8), randn(n, 8)], [{0: 0}, {0: 0}]),
    "argmax_prod": (
        mk(lambda x, i: (x.argmax(-1), x.argmax(0, keepdim=True), x.argmax(), x.max(1), i.argmax(1), x.prod(1),
                         i.clamp(-2, 2).prod(-1), x.prod())),
        lambda n: [randn(n, 6), torch.randint(-5, 5, (n, 6))], [{0: 0}, {0: 0}]),
    "repeat_dynamic": (
        mk(lambda x, y: (x.repeat(2, 3) + 0, x[:, :2].repeat(1, x.shape[0]), x.repeat(x.shape[0], 1) * y[:, :1],
                         y.repeat(x.shape[0], 1), y.repeat(2, x.shape[0], 2))),  # (rank 5 between expand and reshape)
        lambda n: [randn(n, 4), randn(1, 3)], [{0: 0}, {}]),
    "half_precision": (
        mk(lambda x: (x.half() * 2 + 1).softmax(-1)),
        lambda n: [randn(n, 8)], [{0: 0}]),
    "scatter": (  # DeepSeek-V3's group mask, src (larger than index), the reductions, a bool mask, dim 0
        mk(lambda x, i: (torch.zeros_like(x).scatter(1, i, 1.0), x.scatter(1, i, x[:, 1:] * 2),
                         x.scatter_add(1, i, x[:, :3]), x.scatter_reduce(1, i, -x[:, :3], "amax", include_self=False),
                         x.scatter_reduce(1, i, x[:, :3], "prod"), x.scatter_reduce(1, i, x[:, 2:5], "sum", include_self=False),
                         (x > 0).scatter(1, i, True), x.half().scatter(1, i, 7.0),
                         x.scatter(0, x[:, :3].argsort(0), x * 2 + 9))),  # (a permutation per column)
        lambda n: [randn(n, 8), torch.stack([torch.randperm(8)[:3] for _ in range(n)])], [{0: 0}, {0: 0}]),
    "scatter_repeated_indices": (  # add, prod and amin sum up every update of a position
        mk(lambda x, i: (x.scatter_add(1, i, x), x.scatter_reduce(1, i, x, "amin"), i.scatter_add(1, i, i * 3))),
        lambda n: [randn(n, 6), torch.randint(0, 6, (n, 6))], [{0: 0}, {0: 0}]),
    "integer_remainder": (
        mk(lambda i, j: (i % 3, i.remainder(-4), torch.remainder(i, j), i % j.int(), -7 % j, i % i.shape[0])),
        lambda n: [torch.randint(-50, 50, (n, 6)), torch.randint(1, 9, (n, 6)) * (torch.randint(0, 2, (n, 6)) * 2 - 1)],
        [{0: 0}, {0: 0}]),
    "eye": (  # torch's decomposition counts positions in uint8 below 256 (Qwen3-Next's chunked delta rule)
        mk(lambda x: (x @ torch.eye(8) + 1, torch.eye(3, 8, dtype=torch.bool) & (x[:1] > 0),
                      x[:, :1] * torch.eye(300, dtype=torch.int64)[:1, :8])),
        lambda n: [randn(n, 8)], [{0: 0}]),
    "inverse_trig": (  # NaN past +-1 for acos and asin, as eager's; an integer input computed in float
        mk(lambda x, i: (torch.acos(x), torch.asin(x), torch.atan(x * 10), torch.arccos(x.clamp(-1, 1)), torch.atan(i))),
        lambda n: [torch.rand(n, 8) * 2.4 - 1.2, torch.randint(-5, 6, (n, 4))], [{0: 0}, {0: 0}]),
    "expm1_log1p": (
        mk(lambda x: (torch.expm1(x), torch.log1p(x.abs()), torch.log1p(x * 1e-3))),
        lambda n: [randn(n, 8)], [{0: 0}]),
    "size_outputs": (
        mk(lambda x: (x * 2, x.shape[0] * 2 + 1, x.shape[0] // 2)),
        lambda n: [randn(n, 3)], [{0: 0}]),
}

TOLERANCE = {"half_precision": 2e-3, "expm1_log1p": 1e-6, "attention": 2e-5, "grouped_query_attention": 2e-5}


@pytest.mark.parametrize("name", list(CASES))
def test_op_matches_eager_at_every_size(name):
    torch.manual_seed(0)
    module, make, dims, *least = CASES[name]
    least = least[0] if least else 1
    n = torch.export.Dim("n", min=least, max=64)
    dynamic = tuple({d: n for d in spec} for spec in dims)
    run = compile_module(module, make(least + 5), dynamic)
    assert run.fallbacks == [], run.report()
    tol = TOLERANCE.get(name, 1e-5)
    assert_matches_eager(run, module, [make(s) for s in (least, 5, 17)], atol=tol, rtol=tol)


def test_decomposed_rms_norm_becomes_one_op():
    module, make, _ = CASES["rms_norm_pattern"]
    run = compile_module(module, make(4), ({0: n_dim()},))
    kinds = [op.kind.name for cp in run.compiled_partitions for op in cp.program.ops]
    assert kinds.count("RMSNorm") == 1 and "Sqrt" not in kinds and "ReduceMean" not in kinds


def test_linear_weight_is_read_untransposed():
    module = torch.nn.Linear(8, 6)
    run = compile_module(module, [randn(4, 8)], ({0: n_dim()},))
    (op,) = [op for op in run.compiled_partitions[0].program.ops if op.kind.name == "MatMul"]
    assert op.attrs["transpose_b"] is True
    assert_matches_eager(run, module, [[randn(s, 8)] for s in SIZES])


def test_expm1_and_log1p_keep_their_precision_near_zero():
    """Composed of exp, tanh and log, they must not cancel near 0 (exp(x) - 1
    loses every digit at 1e-8): within 8 f32 ulps of float64 at every scale,
    torch's own values at the edges (-1, inf, NaN), half types rounded from f32."""
    import numpy as np

    module = mk(lambda x: (torch.expm1(x), torch.log1p(x), torch.expm1(x.half()), torch.log1p(x.bfloat16())))
    run = compile_module(module, [randn(5)], ({0: torch.export.Dim("n", min=1, max=1 << 16)},))
    assert run.fallbacks == [], run.report()
    g = torch.Generator().manual_seed(0)
    edges = torch.tensor([0.0, -0.0, 1e-30, -1e-30, 1e-8, -1e-8, 0.4999, 0.5, -0.5, -0.9999, -1.0, -2.0, 20.0, 88.0,
                          89.0, -100.0, float("inf"), float("-inf"), float("nan")])
    x = torch.cat([edges, torch.randn(4000, generator=g) * 3, torch.randn(4000, generator=g) * 1e-3,
                   torch.randn(4000, generator=g) * 1e-6, -torch.rand(1000, generator=g)])
    e, l, eh, lb = run(x)
    for got, f in ((e, np.expm1), (l, np.log1p)):
        with np.errstate(all="ignore"):
            ref = torch.from_numpy(f(x.double().numpy()))
        fin = torch.isfinite(ref.float())
        ulps = (got.double() - ref).abs()[fin] / (ref.abs()[fin].clamp_min(1e-38) * 2.0 ** -24)
        assert ulps.max() <= 8, (f.__name__, ulps.max())
        torch.testing.assert_close(got[~fin], ref.float()[~fin], equal_nan=True)
    # the half types: f32 rounded once (a tie within 8 f32 ulps may round either way: one half ulp)
    torch.testing.assert_close(eh, torch.expm1(x.half()), atol=0, rtol=2.0 ** -10, equal_nan=True)
    torch.testing.assert_close(lb, torch.log1p(x.bfloat16()), atol=0, rtol=2.0 ** -7, equal_nan=True)


def test_a_scatter_index_out_of_range_is_an_error_not_a_write():
    import dyngraph as dg

    module = mk(lambda x, i: x.scatter(1, i, 1.0))
    run = compile_module(module, [randn(4, 8), torch.zeros(4, 2, dtype=torch.long)], ({0: n_dim()}, {0: n_dim()}))
    assert run.fallbacks == [], run.report()
    x = randn(3, 8)
    for bad in (8, -9, 1 << 40):
        i = torch.zeros(3, 2, dtype=torch.long)
        i[1, 1] = bad
        with pytest.raises(dg.ExecutionError, match="outside|does not fit"):
            run(x, i)
    i = torch.tensor([[0, 7]] * 3)
    torch.testing.assert_close(run(x, i), module(x, i))  # the engine is fine after the refusals
