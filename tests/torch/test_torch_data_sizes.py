"""Sizes computed from tensor data (a boolean mask's selection, ``.item()``): the node that
computes them runs in PyTorch, the rest in dyngraph, which reads the sizes from its results."""

import pytest

torch = pytest.importorskip("torch", minversion="2.5")

import dyngraph as dg  # noqa: E402
import dyngraph.torch  # noqa: E402
from torchutil import assert_matches_eager  # noqa: E402


class Positive(torch.nn.Module):
    """The positive elements (a selection of data-dependent length), then ops on them."""

    def forward(self, x):
        y = x[x > 0]
        return (y * 2).exp().sum() + x.sum(), y.shape[0] * 2


class LongestRun(torch.nn.Module):
    """Rows up to the largest count of a label: a length from ``.item()``, asserted by torch."""

    def forward(self, x, labels):
        n = torch.bincount(labels, minlength=4).max().item()
        torch._check(n >= 1)
        torch._check(n <= x.shape[0])
        return x[:n] * 2 + 1, torch.arange(n) * 3


def export(module, args, dims):
    return torch.export.export(module, args, dynamic_shapes=dims, strict=False)


def test_a_mask_selection_runs_in_torch_and_what_follows_in_dyngraph():
    n = torch.export.Dim("n", min=2, max=64)
    run = dg.torch.compile(export(Positive(), (torch.randn(6, 3),), ({0: n},)))
    assert [(f.target, f.reason) for f in run.fallbacks] == [("aten.index.Tensor", "computes sizes from tensor data")]
    assert len(run.compiled_partitions) == 2
    torch.manual_seed(0)
    assert_matches_eager(run, Positive(), [[torch.randn(rows, 3)] for rows in (2, 5, 17, 64)], rtol=1e-5, atol=1e-4)


def test_an_empty_selection_runs_the_call_in_torch():
    # dyngraph sizes are at least 1: a program without state runs that call as exported
    n = torch.export.Dim("n", min=2, max=64)
    run = dg.torch.compile(export(Positive(), (torch.randn(6, 3),), ({0: n},)))
    assert_matches_eager(run, Positive(), [[-torch.rand(4, 3)], [torch.randn(9, 3)]], rtol=1e-5, atol=1e-4)


def test_a_length_from_item_sizes_the_ops_after_it():
    n = torch.export.Dim("n", min=2, max=64)
    run = dg.torch.compile(export(LongestRun(), (torch.randn(6, 3), torch.tensor([0, 1, 1, 2, 3, 3])), ({0: n}, {0: n})))
    assert {f.target for f in run.fallbacks} <= {"aten.bincount.default", "aten.max.default",
                                                 "aten._local_scalar_dense.default", "aten.item.default"}, run.report()
    cases = [[0, 0, 0, 1], [3] * 7, [0, 1, 2, 3, 0, 1], [2] * 40 + [1] * 3]
    assert_matches_eager(run, LongestRun(), [[torch.randn(len(c), 3), torch.tensor(c)] for c in cases])


class Capped(torch.nn.Module):
    def forward(self, x, labels):
        n = torch.bincount(labels, minlength=4).max().item()
        torch._check(n >= 1)
        torch._check(n < x.shape[0])
        return x[:n] * 2


def test_torchs_runtime_assertions_on_such_sizes_are_checked():
    n = torch.export.Dim("n", min=4, max=64)
    run = dg.torch.compile(export(Capped(), (torch.randn(6, 3), torch.tensor([0, 1, 1, 2, 3, 3])), ({0: n}, {0: n})))
    assert_matches_eager(run, Capped(), [[torch.randn(5, 3), torch.tensor([0, 0, 1, 2, 2])]])
    labels = torch.tensor([1, 1, 1, 1, 1])  # a count of 5 for 5 rows: torch's own program refuses it too
    with pytest.raises(Exception, match="Runtime assertion failed"):
        export(Capped(), (torch.randn(6, 3), torch.tensor([0, 1, 1, 2, 3, 3])), ({0: n}, {0: n})).module()(
            torch.randn(5, 3), labels)
    with pytest.raises(dg.ShapeError, match=r"fail torch's runtime assertion .*x.dim0.*\(u1 = 5\)"):
        run(torch.randn(5, 3), labels)
    assert_matches_eager(run, Capped(), [[torch.randn(4, 3), torch.tensor([3, 3, 0, 1])]])  # and runs on after it


class ReadInItsOwnPartition(torch.nn.Module):
    """The length comes from ops dyngraph runs (labels // 2 + 1, its max), and the slice to it has
    only x as input: grouped with those ops, the slice would wait for its own partition's result."""

    def forward(self, x, labels):
        n = (torch.div(labels, 2, rounding_mode="trunc") + 1).max().item()
        torch._check(n >= 1)
        torch._check(n <= x.shape[0])
        return x[:n] * 2 + 1


def test_a_size_read_in_the_partition_that_computes_its_data_splits_the_partition():
    n = torch.export.Dim("n", min=2, max=64)
    run = dg.torch.compile(export(ReadInItsOwnPartition(), (torch.randn(6, 3), torch.tensor([0, 1, 1, 2, 3, 3])),
                                  ({0: n}, {0: n})))
    reasons = {f.target: f.reason for f in run.fallbacks}
    assert "a partition that feeds it" in reasons.get("aten.slice.Tensor", ""), run.report()
    cases = [[0, 1], [5, 4, 1, 0, 2, 3], [9] * 12, [-3, 0, 1, 2]]
    assert_matches_eager(run, ReadInItsOwnPartition(), [[torch.randn(len(c), 3), torch.tensor(c)] for c in cases])


class Regroup(torch.nn.Module):
    """Rows split by a label (two selections), put back at positions: the values' row count is
    u0 + u1, the positions' n; torch asserts they are equal."""

    def forward(self, x, labels, order):
        rows = torch.cat([x[labels > 0], x[labels <= 0]])
        torch._check(rows.shape[0] == x.shape[0])
        return torch.zeros_like(x).index_put((order,), rows * 2)


def test_values_sized_by_data_fill_updates_sized_by_the_input():
    n = torch.export.Dim("n", min=2, max=64)
    args = (torch.randn(6, 3), torch.tensor([1, 0, 1, 1, 0, 0]), torch.randperm(6))
    run = dg.torch.compile(export(Regroup(), args, ({0: n}, {0: n}, {0: n})))
    assert {f.target for f in run.fallbacks} == {"aten.index.Tensor"}, run.report()
    torch.manual_seed(0)
    cases = [(torch.randn(r, 3), torch.randint(0, 2, (r,)), torch.randperm(r)) for r in (2, 7, 30)]
    assert_matches_eager(run, Regroup(), [list(c) for c in cases if 0 < int(c[1].sum()) < len(c[1])])
