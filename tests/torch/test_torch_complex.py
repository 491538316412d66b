"""Complex tensors (complex64) as float32 parts: the rotary embeddings of
Llama 4 and DeepSeek-V2 (``polar``, ``view_as_complex``, complex products,
``view_as_real``) run whole in dyngraph and match eager at every length;
ops on complex values that dyngraph does not convert run in PyTorch, fed
and feeding the parts."""

import pytest

torch = pytest.importorskip("torch", minversion="2.5")

from torchutil import assert_matches_eager, compile_module, mk  # noqa: E402

LENGTHS = (1, 5, 17)


def n_dim():
    return torch.export.Dim("n", min=1, max=64)


class Llama4Rotary(torch.nn.Module):
    """transformers' Llama 4 form: frequencies from a product of positions and
    inverse frequencies, ``polar(ones, freqs) * scaling``, then per tensor
    ``view_as_real(view_as_complex(x pairs) * freqs[:, :, None]).flatten(3)``."""

    def __init__(self, d=16, scaling=1.0):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d)), persistent=False)
        self.scaling = scaling

    def forward(self, q, k):
        pos = torch.arange(q.shape[1]).unsqueeze(0)
        inv = self.inv_freq[None, :, None].float().expand(1, -1, 1)
        freqs = (inv @ pos[:, None, :].float()).transpose(1, 2)
        freqs_cis = torch.polar(torch.ones_like(freqs), freqs) * self.scaling
        q_ = torch.view_as_complex(q.float().reshape(*q.shape[:-1], -1, 2))
        k_ = torch.view_as_complex(k.float().reshape(*k.shape[:-1], -1, 2))
        f = freqs_cis[:, :, None, :]
        return (torch.view_as_real(q_ * f).flatten(3).type_as(q), torch.view_as_real(k_ * f).flatten(3).type_as(k))


class DeepseekV2Rotary(torch.nn.Module):
    """DeepSeek-V2's form: heads first ([B, H, S, D]), the frequencies unsqueezed at 1."""

    def __init__(self, d=8):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d)), persistent=False)

    def forward(self, q, k):
        pos = torch.arange(q.shape[2]).float()
        freqs = pos[:, None] * self.inv_freq[None, :]
        freqs_cis = torch.polar(torch.ones_like(freqs), freqs)[None]
        q_ = torch.view_as_complex(q.float().reshape(*q.shape[:-1], -1, 2))
        k_ = torch.view_as_complex(k.float().reshape(*k.shape[:-1], -1, 2))
        q_out = torch.view_as_real(q_ * freqs_cis.unsqueeze(1)).flatten(3)
        k_out = torch.view_as_real(k_ * freqs_cis.unsqueeze(1)).flatten(3)
        return q_out.type_as(q), k_out.type_as(k)


class TableRotary(torch.nn.Module):
    """Meta's reference Llama: a complex64 buffer of every position's
    rotation, sliced to the length."""

    def __init__(self, d=16, positions=64):
        super().__init__()
        freqs = torch.outer(torch.arange(positions).float(), 1.0 / (500000 ** (torch.arange(0, d, 2).float() / d)))
        self.register_buffer("freqs_cis", torch.polar(torch.ones_like(freqs), freqs))

    def forward(self, x):
        f = self.freqs_cis[: x.shape[1]].view(1, x.shape[1], 1, -1)
        x_ = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))
        return torch.view_as_real(x_ * f).flatten(3)


def _rotary_cases():
    return {
        "llama4": (Llama4Rotary(scaling=0.75), lambda n: [torch.randn(1, n, 4, 16), torch.randn(1, n, 2, 16)],
                   [{1: 0}, {1: 0}]),
        "deepseek_v2": (DeepseekV2Rotary(), lambda n: [torch.randn(2, 4, n, 8), torch.randn(2, 1, n, 8)],
                        [{2: 0}, {2: 0}]),
        "table": (TableRotary(), lambda n: [torch.randn(1, n, 3, 16)], [{1: 0}]),
        "half_inputs": (Llama4Rotary(), lambda n: [torch.randn(1, n, 4, 16).half(), torch.randn(1, n, 2, 16).half()],
                        [{1: 0}, {1: 0}]),
    }


@pytest.mark.parametrize("name", list(_rotary_cases()))
def test_complex_rotary_runs_whole_and_matches_eager(name):
    torch.manual_seed(0)
    module, make, dims = _rotary_cases()[name]
    n = n_dim()
    run = compile_module(module, make(6), tuple({d: n for d in spec} for spec in dims))
    assert run.fallbacks == [], run.report()
    tol = 2e-3 if name == "half_inputs" else 1e-5
    assert_matches_eager(run, module, [make(s) for s in LENGTHS], atol=tol, rtol=tol)


def _z(x):
    return torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))


ARITHMETIC = {
    # products with complex, real-tensor and number factors; sums with the real part only
    "products": mk(lambda x, y: torch.view_as_real(_z(x) * _z(y) * y[:, :1] * 2.5 - _z(y) + _z(x) * 1.0)),
    "sums": mk(lambda x, y: torch.view_as_real((_z(x) + _z(y)[:1]) - 3 + y[:, :4] - (-_z(x)))),
    "parts": mk(lambda x, y: (torch.complex(x, y).abs(), torch.real(_z(x) * _z(y)), torch.imag(_z(x).conj() * _z(y)),
                              torch.view_as_real(torch.polar(y.abs(), x)),
                              torch.view_as_real(torch.polar(torch.ones_like(y), x[:1])))),  # ones broadcasting
    "views": mk(lambda x, y: torch.view_as_real(torch.cat([_z(x).t()[1:], _z(y).t().contiguous()[:3]], 0)
                                                .select(0, -1).unsqueeze(0).expand(3, -1).permute(1, 0))),
}


@pytest.mark.parametrize("name", list(ARITHMETIC))
def test_complex_arithmetic_and_views_match_eager(name):
    module = ARITHMETIC[name]
    make = lambda n: [torch.randn(n, 8), torch.randn(n, 8)]  # noqa: E731
    n = n_dim()
    run = compile_module(module, make(6), ({0: n}, {0: n}))
    assert run.fallbacks == [], run.report()
    assert_matches_eager(run, module, [make(s) for s in LENGTHS], atol=1e-5, rtol=1e-5)


def test_complex_ops_without_a_converter_run_in_pytorch_on_the_parts():
    """exp of a complex tensor has no dyngraph form, nor a product with a
    complex number: they run in PyTorch, reading the product dyngraph
    computed and feeding the next product; a complex program output comes
    back complex."""
    module = mk(lambda x, y: (torch.view_as_real(torch.exp(_z(x) * _z(y)) * _z(y)), _z(x) * 2,
                              torch.view_as_real(_z(y) * 1j + _z(x))))
    make = lambda n: [torch.randn(n, 8) * 0.5, torch.randn(n, 8) * 0.5]  # noqa: E731
    n = n_dim()
    run = compile_module(module, make(6), ({0: n}, {0: n}))
    assert {"aten.exp.default", "aten.mul.Tensor"} <= {str(t) for _, t, _ in run.fallbacks}, run.report()
    for s in LENGTHS:
        args = make(s)
        got, want = run(*args), module(*args)
        assert got[1].dtype is torch.complex64
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-5)


def test_a_program_with_a_complex_table_saves_and_loads(tmp_path):
    """The complex64 buffer is saved as its float32 parts; the loaded program
    (numpy in, numpy out, no torch in its path) rotates as eager does."""
    import dyngraph as dg

    module = TableRotary()
    run = compile_module(module, [torch.randn(1, 6, 3, 16)], ({1: n_dim()},))
    assert run.fallbacks == [], run.report()
    run.save(tmp_path / "rotary.dg")
    cp = dg.load(tmp_path / "rotary.dg", engine=dg.Engine(num_threads=1))
    for s in LENGTHS:
        x = torch.randn(1, s, 3, 16)
        (got,) = cp(x.numpy())
        torch.testing.assert_close(torch.from_numpy(got), module(x), atol=1e-5, rtol=1e-5)
