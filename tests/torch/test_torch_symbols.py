"""torch.export's symbolic sizes as dyngraph dimensions: each symbol a Dim
with the export's range (from 1 at least), each size expression the equal
Expr, and derived dimensions of the inputs (``2 * n``, ``n + 1``) computed at
the size of every call."""

import pytest

torch = pytest.importorskip("torch", minversion="2.5")
sympy = pytest.importorskip("sympy")

from torch.utils._sympy import functions as F  # noqa: E402
from torch.utils._sympy.numbers import int_oo  # noqa: E402
from torch.utils._sympy.value_ranges import ValueRanges  # noqa: E402

from dyngraph.symbolic import INT64_MAX, Expr  # noqa: E402
from dyngraph.torch.converters import Unsupported  # noqa: E402
from dyngraph.torch.size_probes import differ_at  # noqa: E402
from dyngraph.torch.symbols import SymbolTable  # noqa: E402
from torchutil import assert_matches_eager, compile_module, mk  # noqa: E402

s0, s1 = sympy.symbols("s0 s1", integer=True, positive=True)


def table():
    return SymbolTable({s0: ValueRanges(0, 100), s1: ValueRanges(2, int_oo)}, {s0: "seq"})


def test_sizes_in_different_forms_agree_and_different_sizes_are_told_apart():
    t = table()
    seq, other = t.dim(s0), t.dim(s1)
    assert differ_at((2 * seq) // 2, seq) is None  # one size in two forms
    assert differ_at((seq + other) - other, seq) is None
    assert differ_at(seq * 4 // 4 + 0 * other, seq) is None
    assert differ_at(seq + 1, seq) is not None
    at = differ_at(seq * other, seq * 2)  # equal where other == 2 only (its least value)
    assert at is not None and at[other.sym] != 2
    at = differ_at(seq // 2 * 2, seq)  # equal at even sizes only
    assert at is not None and at[seq.sym] % 2 == 1
    at = differ_at(Expr.const(7) + 0 * seq, seq)  # a constant against a size that is 7 at one point
    assert at is not None and at[seq.sym] != 7
    assert differ_at(Expr.const(3), Expr.const(3)) is None and differ_at(Expr.const(3), Expr.const(4)) == {}
    # given points (where the export is valid): only those count, and only where every symbol has a size
    assert differ_at(seq // 2 * 2, seq, [{seq.sym: 4}, {seq.sym: 10}]) is None
    assert differ_at(seq // 2 * 2, seq, [{seq.sym: 4}, {seq.sym: 7}]) == {seq.sym: 7}
    assert differ_at(seq + 1, seq, [{other.sym: 3}]) is None


def test_symbols_become_dims_with_the_export_range_from_one():
    t = table()
    seq, other = t.dim(s0), t.dim(s1)
    assert (seq.name, seq.min, seq.max) == ("seq", 1, 100)  # the range started at 0
    assert (other.name, other.min, other.max) == ("s1", 2, INT64_MAX)  # unbounded above
    assert t.dim(s0) is seq


@pytest.mark.parametrize(
    "expr, value",
    [
        (s0 + 1, 8),
        (2 * s0, 14),
        (s0 * s1 - 3, 18),
        (F.FloorDiv(s0, 2), 3),
        (F.CeilDiv(s0, 2), 4),
        (F.PythonMod(s0, 4), 3),
        (F.ModularIndexing(s0, 2, 2), 1),
        (F.Max(s0, s1), 7),
        (F.Min(s0, s1), 3),
        (F.PowByNatural(s0, 2), 49),
        (sympy.Integer(5), 5),
    ],
)
def test_size_expressions_evaluate_like_torch(expr, value):
    t = table()
    e = t.expr(expr)
    assert isinstance(e, Expr)
    assert e.evaluate({t.dim(s0).sym: 7, t.dim(s1).sym: 3}) == value


def test_equal_expressions_are_equal_exprs():
    t = table()
    assert t.expr(s0 + 1) == t.dim(s0) + 1
    assert t.expr(2 * (s0 + 1)) == t.expr(2 * s0 + 2)


def test_non_integer_sizes_are_refused():
    with pytest.raises(Unsupported):
        table().expr(s0 / 3)


def test_derived_input_dimensions_are_computed_per_call():
    # y has 2 * n rows, z has n + 1: one symbol, three input sizes
    n = torch.export.Dim("n", min=1, max=32)
    module = mk(lambda x, y, z: (y.view(x.shape[0], 2, 3).sum(1) + x, torch.cat([x, z[1:]], 0), z[: x.shape[0]] * 2))
    run = compile_module(module, [torch.randn(4, 3), torch.randn(8, 3), torch.randn(5, 3)],
                         ({0: n}, {0: 2 * n}, {0: n + 1}))
    assert run.fallbacks == [] and list(run.dims) == ["n"]
    assert_matches_eager(run, module, [[torch.randn(k, 3), torch.randn(2 * k, 3), torch.randn(k + 1, 3)] for k in (1, 5, 32)])


def test_dims_are_named_after_the_torch_dims_or_their_input():
    n = torch.export.Dim("tokens", min=1, max=16)
    module = mk(lambda x, y: (x * 2, y + 1))
    run = compile_module(module, [torch.randn(3, 4), torch.randn(2, 5)], ({0: n}, {0: torch.export.Dim.DYNAMIC}))
    assert sorted(run.dims) == ["b.dim0", "tokens"]


def test_a_partition_no_input_of_which_has_a_size_gets_it_from_the_program():
    """arange(n) in a partition no input of which has n (x goes first through a node in PyTorch, the
    arange before it): n comes from the program's input."""
    n = torch.export.Dim("n", min=1, max=64)
    module = mk(lambda x: (torch.special.i0(x) * 2, torch.arange(x.shape[0]).float() * 3,
                           torch.full((2, x.shape[0]), 1.5)))
    run = compile_module(module, [torch.randn(5, 2)], ({0: n},))
    assert [f.target for f in run.fallbacks] == ["aten.i0.default"], run.report()
    assert any(cp.symbol_inputs for cp in run.compiled_partitions)
    assert_matches_eager(run, module, [[torch.randn(k, 2)] for k in (1, 7, 64)])


def test_sizes_after_a_node_that_runs_in_pytorch_convert():
    """Only the node without a converter runs in PyTorch: the arange, expand and gather of the program's
    length after it (DeBERTa's relative positions) convert, their sizes taken from the program's input."""
    n = torch.export.Dim("n", min=2, max=64)

    def fn(x):
        y = torch.special.i0(x)  # no converter
        pos = torch.arange(x.shape[0])
        rel = (pos[:, None] - pos[None, :]).clamp(0, 3)  # [n, n]
        idx = rel.unsqueeze(0).expand(2, x.shape[0], x.shape[0])
        src = y[:, :4].unsqueeze(0).expand(2, x.shape[0], 4)
        return torch.gather(src, 2, idx) + y[:, :1].T

    module = mk(fn)
    run = compile_module(module, [torch.randn(5, 6)], ({0: n},))
    assert [f.target for f in run.fallbacks] == ["aten.i0.default"], run.report()
    assert "not known to its dyngraph partition" not in run.report()
    assert any(cp.symbol_inputs for cp in run.compiled_partitions)  # (the arange's partition has no input of n)
    assert_matches_eager(run, module, [[torch.randn(k, 6)] for k in (2, 9, 33)])


def test_repeat_by_a_count_only_the_program_knows():
    n = torch.export.Dim("n", min=1, max=64)
    module = mk(lambda x, y: (y.repeat(x.shape[0], 1), x * 2))  # y's own partition does not see n
    run = compile_module(module, [torch.randn(5, 4), torch.randn(1, 3)], ({0: n}, {}))
    assert run.fallbacks == [], run.report()
    assert_matches_eager(run, module, [[torch.randn(k, 4), torch.randn(1, 3)] for k in (1, 6, 20)])
