"""torch.export's guards (conditions on sizes the ranges do not imply) as shape checks of
the compiled partitions: a saved program refuses the sizes ``ep.module()`` refuses."""

import itertools
import operator

import numpy as np
import pytest

torch = pytest.importorskip("torch", minversion="2.5")

import dyngraph as dg  # noqa: E402
import dyngraph.torch  # noqa: E402
from dyngraph.symbolic import Dim, as_expr, sym_max  # noqa: E402
from dyngraph.torch.size_probes import Guard  # noqa: E402
from torchutil import BranchOnChunks  # noqa: E402

OPS = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


@pytest.mark.parametrize("op", sorted(OPS))
def test_each_relation_becomes_two_sizes_equal_exactly_where_it_holds(op):
    a, b = Dim("a", min=1, max=40), Dim("b", min=1, max=40)
    for lhs, rhs in ((a, b), (a % 8, 3), (a // 4, b - 2), (sym_max(a, 9), 2 * b)):
        guard = Guard(as_expr(lhs), as_expr(rhs), op, OPS[op])
        left, right, message = guard.as_check()
        assert f"traced the program under: {guard};" in message
        for x, y in itertools.product(range(1, 41, 3), range(1, 41, 4)):
            env = {a.sym: x, b.sym: y}
            assert guard.holds(env) == (left.evaluate(env) == right.evaluate(env)), (str(guard), x, y)


def test_a_saved_program_refuses_the_sizes_the_export_does_not_hold_for(tmp_path):
    module = BranchOnChunks()
    ep = torch.export.export(module, (torch.randn(5, 3),), dynamic_shapes=({0: torch.export.Dim.AUTO},), strict=False)
    run = dg.torch.compile(ep)
    assert run.fallbacks == [] and run._guards, run.report()
    run.save(tmp_path / "chunks.dg")
    loaded = dg.load(tmp_path / "chunks.dg")
    for n in (9, 30):
        with pytest.raises(Exception, match="Guard failed"):  # torch's own program
            ep.module()(torch.randn(n, 3))
        for cp in (loaded, run.compiled_partitions[0]):  # the file, and the partition the runner calls
            with pytest.raises(dg.ShapeError, match=rf"fail a condition torch.export traced the program under: .*"
                                                    rf"\(x.dim0={n}\)"):
                cp(np.zeros((n, 3), np.float32))
    for n in (2, 5, 8):  # sizes inside them (from 2: Dim.AUTO's range) run, also after a refusal
        x = torch.randn(n, 3)
        (y,) = loaded(x.numpy())
        np.testing.assert_allclose(y, module(x).numpy(), rtol=1e-6, atol=1e-6)
