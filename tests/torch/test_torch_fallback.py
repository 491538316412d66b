"""Nodes dyngraph cannot run go to PyTorch, between dyngraph partitions: the
results still equal eager's at every size, and the compile says what fell
back and why."""

import pytest

torch = pytest.importorskip("torch", minversion="2.5")
F = torch.nn.functional

import dyngraph as dg  # noqa: E402
from torchutil import assert_matches_eager, compile_module, mk  # noqa: E402

SIZES = (1, 6, 23)


def n_dim():
    return torch.export.Dim("n", min=1, max=64)


def test_an_op_without_converter_runs_in_torch_between_partitions():
    # flip has no converter: relu -> flip (torch) -> view with a symbolic size -> matmul
    w = torch.randn(8, 4)
    module = mk(lambda x: (torch.relu(x).flip(0).view(x.shape[0], 2, 4) * 2).reshape(x.shape[0], 8) @ w)
    run = compile_module(module, [torch.randn(5, 8)], ({0: n_dim()},))
    assert [(f.target, f.reason) for f in run.fallbacks] == [("aten.flip.default", "no converter")]
    assert len(run.compiled_partitions) == 2
    assert_matches_eager(run, module, [[torch.randn(n, 8)] for n in SIZES])


def test_the_report_names_each_fallback_and_its_reason():
    module = mk(lambda x: torch.relu(x).round(decimals=2) + 1)
    run = compile_module(module, [torch.randn(5, 8)], ({0: n_dim()},))
    (f,) = run.fallbacks
    assert f.target == "aten.round.decimals" and "decimals=2" in f.reason
    text = run.report()
    assert "1 node(s) run in PyTorch" in text and f.node in text and "decimals=2" in text
    assert str(f) in text
    assert_matches_eager(run, module, [[torch.randn(n, 8)] for n in SIZES])


def test_a_fallback_taking_symbolic_sizes_gets_them_for_the_current_inputs():
    # constant_pad_nd has no converter; its padding is the input's (dynamic) length
    module = mk(lambda x: F.pad(torch.tanh(x), (0, x.shape[0])) + 1)
    run = compile_module(module, [torch.randn(5, 3)], ({0: n_dim()},))
    assert [f.target for f in run.fallbacks] == ["aten.constant_pad_nd.default"]
    assert_matches_eager(run, module, [[torch.randn(n, 3)] for n in SIZES])


def test_a_fallback_gets_sizes_known_only_through_derived_input_dimensions():
    # the only input is 2 * n long; the padding (run in torch) is n
    n = n_dim()
    module = mk(lambda x: F.pad(x, (0, x.shape[0] // 2)) * 3)
    run = compile_module(module, [torch.randn(6, 3)], ({0: 2 * n},))
    assert [f.target for f in run.fallbacks] == ["aten.constant_pad_nd.default"]
    assert_matches_eager(run, module, [[torch.randn(2 * k, 3)] for k in (2, 4, 9)])


def test_rank_five_intermediates_convert_and_rank_seven_ones_run_in_torch():
    module = mk(lambda x: x.reshape(x.shape[0], 1, 2, 1, 4).sum(1).reshape(x.shape[0], 8).exp())
    run = compile_module(module, [torch.randn(5, 8)], ({0: n_dim()},))
    assert run.fallbacks == [], run.report()
    assert_matches_eager(run, module, [[torch.randn(n, 8)] for n in SIZES])
    module = mk(lambda x: x.reshape(x.shape[0], 1, 2, 1, 2, 1, 2).sum(1).reshape(x.shape[0], 8).exp())
    run = compile_module(module, [torch.randn(5, 8)], ({0: n_dim()},))
    assert "rank 7" in " ".join(f.reason for f in run.fallbacks)
    assert_matches_eager(run, module, [[torch.randn(n, 8)] for n in SIZES])


def test_float64_runs_in_torch():
    module = mk(lambda x: (x.double() * 3).sum(-1).float() + 1)
    run = compile_module(module, [torch.randn(5, 8)], ({0: n_dim()},))
    assert run.fallbacks and all("float64" in f.reason for f in run.fallbacks)
    assert_matches_eager(run, module, [[torch.randn(n, 8)] for n in SIZES])


def test_sizes_only_generators_take_their_size_from_the_program():
    # arange(n) alone: no input of its partition has length n; the program's input gives it
    module = mk(lambda x: (torch.arange(x.shape[0]) * 2, torch.full((2, x.shape[0]), 1.5)))
    run = compile_module(module, [torch.randn(5, 3)], ({0: n_dim()},))
    assert run.fallbacks == [], run.report()
    assert_matches_eager(run, module, [[torch.randn(n, 3)] for n in SIZES])


def test_multi_output_op_whose_second_output_is_used_falls_back_whole():
    # min(dim) is converted for its values (max(dim)'s indices are an ArgMax); using the indices sends the node
    # to torch
    module = mk(lambda x: x.min(-1).values + x.min(-1).indices.float())
    run = compile_module(module, [torch.randn(5, 8)], ({0: n_dim()},))
    assert any(f.target == "aten.min.dim" for f in run.fallbacks)
    assert_matches_eager(run, module, [[torch.randn(n, 8)] for n in SIZES])


def test_empty_tensors_run_in_torch():
    class WithEmpty(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("none", torch.zeros(0, 8))

        def forward(self, x):
            return torch.cat([self.none, x]).relu() + x.new_zeros(0, 8).sum()

    module = WithEmpty()
    run = compile_module(module, [torch.randn(5, 8)], ({0: n_dim()},))
    assert_matches_eager(run, module, [[torch.randn(n, 8)] for n in SIZES])


def test_every_node_can_fall_back():
    module = mk(lambda x: torch.cummax(x, -1).values.flip(0).cumprod(-1))
    run = compile_module(module, [torch.randn(5, 8)], ({0: n_dim()},))
    assert run.compiled_partitions == []
    assert "0 ops in 0 dyngraph partition(s)" in run.report()
    assert_matches_eager(run, module, [[torch.randn(n, 8)] for n in SIZES])


def test_inputs_out_of_the_exported_range_raise_shape_errors_naming_the_dimension():
    module = mk(lambda x: x * 2)
    run = compile_module(module, [torch.randn(5, 8)], ({0: torch.export.Dim("rows", min=1, max=16)},))
    with pytest.raises(dg.ShapeError, match="rows"):
        run(torch.randn(17, 8))
    with pytest.raises(dg.ShapeError):
        run(torch.randn(4, 9))  # a static dimension


def test_a_wrong_input_dtype_raises_a_dtype_error():
    module = mk(lambda x: x * 2)
    run = compile_module(module, [torch.randn(5, 8)], ({0: n_dim()},))
    with pytest.raises(dg.DTypeError):
        run(torch.ones(5, 8, dtype=torch.int32))
