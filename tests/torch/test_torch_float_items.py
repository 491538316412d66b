"""Floats read from tensor data (``x * s.max().item()``): torch.export keeps them as SymFloats;
dyngraph holds each as a 0-d float32 tensor that ops read as an operand, and a node that runs
in PyTorch gets the float."""

import pytest

torch = pytest.importorskip("torch", minversion="2.5")

import dyngraph.torch  # noqa: E402
from dyngraph.torch import DataAssertionError  # noqa: E402
from torchutil import assert_matches_eager  # noqa: E402

F = torch.nn.functional
ROWS = (6, 1, 3, 17)


class Scaled(torch.nn.Module):
    """A float from .item() in Python arithmetic, then scaling a tensor."""

    def forward(self, x, s):
        t = s.max().item()
        return x * (t * 2.0 - 1) / (t + 4) ** 0.5 - t ** 2


class Uses(torch.nn.Module):
    """The float in an op's number argument."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x, s):
        return self.fn(x, s.mean().item())


class FloatOut(torch.nn.Module):
    def forward(self, x, s):
        return x + 1, s.sum().item()


def compile_dynamic(module, s):
    n = torch.export.Dim("n", max=64)
    ep = torch.export.export(module, (torch.randn(6, 5), s), dynamic_shapes=({0: n}, None), strict=False)
    return dyngraph.torch.compile(ep)


def cases(s_of=lambda: torch.rand(4)):
    torch.manual_seed(0)
    return [[torch.randn(rows, 5), s_of()] for rows in ROWS]


def test_arithmetic_on_an_item_runs_in_dyngraph():
    run = compile_dynamic(Scaled(), torch.rand(3))
    assert run.fallbacks == [], run.report()
    assert len(run.compiled_partitions) == 1
    assert_matches_eager(run, Scaled(), cases(lambda: torch.rand(3) * 3), rtol=1e-5, atol=1e-5)


# each: the op, and whether it converts with the float (else it runs in PyTorch, given the float)
USES = {
    "mul": (lambda x, t: x * t, True),
    "rsub": (lambda x, t: t - x, True),
    "div": (lambda x, t: x / (t + 3), True),
    "add_alpha": (lambda x, t: torch.add(x, x, alpha=t), True),
    "pow_exponent": (lambda x, t: x.abs() ** (t + 1), True),
    "pow_base": (lambda x, t: (t + 2) ** x, True),
    "clamp": (lambda x, t: torch.clamp(x, max=t), True),
    "where": (lambda x, t: torch.where(x > 0, x, t), True),
    "masked_fill": (lambda x, t: x.masked_fill(x > 0, t), True),
    "compare": (lambda x, t: (x > t).float(), True),
    "full_like": (lambda x, t: torch.full_like(x, t), True),
    "new_full": (lambda x, t: x.new_full((x.shape[0], 2), t), True),
    "fill": (lambda x, t: x.clone().fill_(t), True),
    "integer_times_float": (lambda x, t: torch.arange(x.shape[0]) * t, True),
    "leaky_relu": (lambda x, t: F.leaky_relu(x, t), False),
    "elu": (lambda x, t: F.elu(x, alpha=t), False),
    "fmod": (lambda x, t: torch.fmod(x, t + 3), False),
}


@pytest.mark.parametrize("name", sorted(USES))
def test_an_item_as_an_ops_number(name):
    fn, converts = USES[name]
    run = compile_dynamic(Uses(fn), torch.rand(4))
    assert (run.fallbacks == []) == converts, run.report()
    assert_matches_eager(run, Uses(fn), cases(), rtol=1e-5, atol=1e-5)


def test_a_float_output_is_a_python_float():
    run = compile_dynamic(FloatOut(), torch.rand(4))
    assert run.fallbacks == []
    for x, s in cases():
        got, want = run(x, s), FloatOut()(x, s)
        assert isinstance(got[1], float)
        assert got[1] == pytest.approx(want[1], rel=1e-6)
        torch.testing.assert_close(got[0], want[0])


def test_a_float_made_in_pytorch_reaches_dyngraph():
    # float64 has no dyngraph form: the sum and .item() run in PyTorch, the product in dyngraph
    run = compile_dynamic(Uses(lambda x, t: x * t + 1), torch.rand(4, dtype=torch.float64))
    assert {f.target for f in run.fallbacks} & {"aten.item.default", "aten._local_scalar_dense.default"}
    assert "aten.mul.Tensor" not in {f.target for f in run.fallbacks}
    assert_matches_eager(run, Uses(lambda x, t: x * t + 1), cases(lambda: torch.rand(4, dtype=torch.float64)))


def test_half_tensors_read_their_item():
    class Half(torch.nn.Module):
        def forward(self, x, s):
            return x * s[0].item()

    x, s = torch.randn(6, 5).half(), torch.randn(3).half()
    run = dyngraph.torch.compile(torch.export.export(Half(), (x, s), strict=False))
    assert run.fallbacks == []
    assert_matches_eager(run, Half(), [[x, s], [x, -s * 3]], rtol=1e-3, atol=1e-3)


def test_torchs_assertion_on_the_float_is_checked():
    # (t + 4) ** 0.5 makes torch assert 0 <= t + 4; ep.module() raises where it breaks, and so does dyngraph
    class Root(torch.nn.Module):
        def forward(self, x, s):
            return x * (s.max().item() + 4) ** 0.5

    ep = torch.export.export(Root(), (torch.randn(6, 5), torch.rand(3)), strict=False)
    run = dyngraph.torch.compile(ep)
    bad = torch.full((3,), -5.0)
    with pytest.raises(RuntimeError, match="Runtime assertion failed"):
        ep.module()(torch.randn(6, 5), bad)
    with pytest.raises(DataAssertionError, match="Runtime assertion failed .* float read from tensor data"):
        run(torch.randn(6, 5), bad)
    assert_matches_eager(run, Root(), [[torch.randn(6, 5), torch.rand(3) - 3.9]])


def test_a_program_returning_a_float_is_not_savable(tmp_path):
    run = compile_dynamic(FloatOut(), torch.rand(4))
    with pytest.raises(dyngraph.torch.NotSavableError, match="output 1 is not a computed tensor"):
        run.save(tmp_path / "f.dg")


def test_floats_computed_from_sizes():
    # n / k, sym_sqrt(n), k ** 0.5: SymFloats of sizes, computed in the graph from the call's sizes
    class Ratio(torch.nn.Module):
        def forward(self, x):
            n = x.shape[0]
            return x * (n / x.shape[1]) + torch.sym_sqrt(n) + x.shape[1] ** 0.5

    dims = ({0: torch.export.Dim("n"), 1: torch.export.Dim("k")},)
    run = dyngraph.torch.compile(torch.export.export(Ratio(), (torch.randn(5, 8),), dynamic_shapes=dims, strict=False))
    assert run.fallbacks == []
    assert_matches_eager(run, Ratio(), [[torch.randn(*s)] for s in ((5, 8), (2, 3), (17, 4), (1, 1))])
