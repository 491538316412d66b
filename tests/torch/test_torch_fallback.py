"""Nodes dyngraph cannot run go to PyTorch, between dyngraph partitions: the
results still equal eager's at every size, and the compile says what fell
back and why."""

import pytest

torch = pytest.importorskip("torch", minversion="2.5")
F = torch.nn.functional

import dyngraph as dg  # noqa: E402
import dyngraph.torch  # noqa: E402
from torchutil import BranchOnChunks, assert_matches_eager, compile_module, mk  # noqa: E402

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


def without_converter(monkeypatch, op):
    from dyngraph.torch.converters.registry import CONVERTERS

    monkeypatch.delitem(CONVERTERS, op)


def test_a_fallback_taking_symbolic_sizes_gets_them_for_the_current_inputs(monkeypatch):
    # constant_pad_nd made to run in torch; its padding is the input's (dynamic) length
    without_converter(monkeypatch, torch.ops.aten.constant_pad_nd.default)
    module = mk(lambda x: F.pad(torch.tanh(x), (0, x.shape[0])) + 1)
    run = compile_module(module, [torch.randn(5, 3)], ({0: n_dim()},))
    assert [f.target for f in run.fallbacks] == ["aten.constant_pad_nd.default"]
    assert_matches_eager(run, module, [[torch.randn(n, 3)] for n in SIZES])


def test_a_fallback_gets_sizes_known_only_through_derived_input_dimensions(monkeypatch):
    # the only input is 2 * n long; the padding (run in torch) is n
    without_converter(monkeypatch, torch.ops.aten.constant_pad_nd.default)
    n = n_dim()
    module = mk(lambda x: F.pad(x, (0, x.shape[0] // 2)) * 3)
    run = compile_module(module, [torch.randn(6, 3)], ({0: 2 * n},))
    assert [f.target for f in run.fallbacks] == ["aten.constant_pad_nd.default"]
    assert_matches_eager(run, module, [[torch.randn(2 * k, 3)] for k in (2, 4, 9)])


@pytest.mark.parametrize("axis", [0, 1])
def test_a_converter_giving_a_wrong_dynamic_size_is_not_trusted(monkeypatch, axis):
    # a broken converter of cat that keeps only its first input: along the dynamic axis the
    # size is n where torch has 2 * n (static sizes agree, so only the dynamic size tells)
    from dyngraph.torch.converters.registry import CONVERTERS

    monkeypatch.setitem(CONVERTERS, torch.ops.aten.cat.default, lambda cx, node, a: cx.tensor(a.tensors[0]))
    module = mk(lambda x: torch.cat([x, x + 1], dim=axis).exp())
    shape, dims = ([5, 3], ({0: n_dim()},)) if axis == 0 else ([3, 5], ({1: n_dim()},))
    run = compile_module(module, [torch.randn(*shape)], dims)
    assert [f.target for f in run.fallbacks] == ["aten.cat.default"], run.report()
    assert "a size differs at" in run.fallbacks[0].reason
    sized = (lambda n: (n, 3)) if axis == 0 else (lambda n: (3, n))
    assert_matches_eager(run, module, [[torch.randn(*sized(n))] for n in SIZES])


class OneChunk(torch.nn.Module):
    """A chunked scan's sizes: padded to 8, in chunks of 8. torch.export (Dim.AUTO) keeps the
    program to one chunk by a guard on the padded length, not by the length's range, and writes
    the result's length as n where the converters compute min(n, 8 // chunks)."""

    def forward(self, x):
        n = x.shape[0]
        y = F.pad(x, (0, 0, 0, (8 - n % 8) % 8))
        chunks = y.shape[0] // 8
        y = y.reshape(chunks, 8, x.shape[1]).sum(0)
        return y[: y.shape[0] // chunks][:n] * 2


def test_sizes_are_compared_with_torchs_where_the_exports_guards_hold(monkeypatch):
    module = OneChunk()
    ep = torch.export.export(module, (torch.randn(5, 3),), dynamic_shapes=({0: torch.export.Dim.AUTO},), strict=False)
    run = dg.torch.compile(ep)
    assert run.fallbacks == [], run.report()  # equal sizes at every length the guards allow (up to 8)
    assert_matches_eager(run, module, [[torch.randn(n, 3)] for n in (2, 5, 8)])
    # without the guards (a torch whose shape environment is not found) lengths past one chunk are probed
    monkeypatch.setattr(dg.torch.size_probes, "_shape_env", lambda ep: None)
    run = dg.torch.compile(ep)
    assert [f.target for f in run.fallbacks] == ["aten.slice.Tensor"], run.report()
    assert_matches_eager(run, module, [[torch.randn(n, 3)] for n in (2, 5, 8)])


@pytest.mark.parametrize("module", [BranchOnChunks(), OneChunk()], ids=["branch", "one-chunk"])
def test_sizes_outside_the_exports_guards_are_refused_as_ep_module_refuses_them(module):
    ep = torch.export.export(module, (torch.randn(5, 3),), dynamic_shapes=({0: torch.export.Dim.AUTO},), strict=False)
    run = dg.torch.compile(ep)
    assert_matches_eager(run, module, [[torch.randn(n, 3)] for n in (2, 5, 8)])
    for n in (9, 30, 9):  # (the second 9: refused again, not remembered as checked)
        # (the partition checks them: "...traced the program under: <condition>; ... (x.dim0=9)")
        with pytest.raises(dg.ShapeError, match=rf"fail a condition torch.export traced .*x\.dim0 ?= ?{n}\)"):
            run(torch.randn(n, 3))
        with pytest.raises(Exception, match="Guard failed"):  # (torch's own program, for comparison)
            ep.module()(torch.randn(n, 3))
    assert_matches_eager(run, module, [[torch.randn(n, 3)] for n in (7, 3)])  # and sizes inside them still run


def test_a_program_exported_with_named_dims_has_no_guards_to_check_and_keeps_the_fast_path():
    module = mk(lambda x: torch.tanh(F.pad(x, (0, 0, 0, x.shape[0] % 3))) * 2)
    run = compile_module(module, [torch.randn(5, 3)], ({0: n_dim()},))
    assert run._guards == [] and run._fast is not None
    assert_matches_eager(run, module, [[torch.randn(n, 3)] for n in SIZES])


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


class DeepSeekV3Gate(torch.nn.Module):
    """DeepSeek-V3's router: sigmoid scores plus a bias choose the top groups
    of experts (each group ranked by its two best), then the top experts in
    those groups; their (unbiased) scores, normalized and scaled, weigh them."""

    def __init__(self, hidden=64, experts=16, groups=4, topk_group=2, top_k=4):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(experts, hidden) / hidden ** 0.5)
        self.register_buffer("e_score_correction_bias", torch.randn(experts) * 0.1)
        self.groups, self.topk_group, self.top_k, self.experts = groups, topk_group, top_k, experts

    def forward(self, x):
        n = x.shape[0]
        scores = F.linear(x, self.weight).sigmoid()
        choice = scores + self.e_score_correction_bias.unsqueeze(0)
        group_scores = choice.view(n, self.groups, -1).topk(2, dim=-1)[0].sum(dim=-1)
        group_idx = torch.topk(group_scores, k=self.topk_group, dim=-1)[1]
        group_mask = torch.zeros_like(group_scores).scatter(1, group_idx, 1.0)
        score_mask = group_mask.unsqueeze(-1).expand(n, self.groups, self.experts // self.groups).reshape(n, -1)
        masked = choice.masked_fill(~score_mask.bool(), 0.0)
        idx = torch.topk(masked, k=self.top_k, dim=-1)[1]
        weight = scores.gather(1, idx)
        weight = weight / (weight.sum(dim=-1, keepdim=True) + 1e-20) * 2.5
        return idx, weight


@pytest.mark.parametrize("target", ["sigmoid.default", "topk.default", "scatter.value", "where.self",
                                    "gather.default", "div.Tensor"])
def test_one_fallback_in_deepseek_v3_routing_costs_one_boundary(monkeypatch, target):
    from dyngraph.torch.converters.registry import CONVERTERS

    op = getattr(torch.ops.aten, target.split(".")[0])
    op = getattr(op, target.split(".")[1])
    monkeypatch.delitem(CONVERTERS, op, raising=False)  # that op now runs in PyTorch
    if target != "scatter.value":  # (the one node that runs in PyTorch)
        monkeypatch.delitem(CONVERTERS, torch.ops.aten.scatter.value, raising=False)
    module = DeepSeekV3Gate().eval()
    run = compile_module(module, [torch.randn(5, 64)], ({0: n_dim()},))
    assert f"aten.{target}" in {f.target for f in run.fallbacks}, run.report()
    if target == "scatter.value":
        assert len(run.fallbacks) == 1 and len(run.compiled_partitions) + 1 <= 3, run.report()
    # each node in PyTorch is one boundary: at most one more dyngraph partition than there are such nodes
    # (one node: at most 3 partitions in all), not a partition per piece it cuts off
    assert len(run.compiled_partitions) <= len(run.fallbacks) + 1, run.report()
    assert_matches_eager(run, module, [[torch.randn(n, 64)] for n in SIZES])


@pytest.mark.parametrize("converted", [True, False], ids=["converted", "in-pytorch"])
@pytest.mark.parametrize("how", ["scale", "size", "scale-align-corners", "down"])
def test_bicubic_with_a_dynamic_size(how, converted, monkeypatch):
    # converted whole; without its converter, one node in PyTorch (torch's decomposition computes
    # bicubic coordinates with symbolic floats: kept whole, it stays one node)
    if not converted:
        from dyngraph.torch.converters.registry import CONVERTERS

        for op in (torch.ops.aten.upsample_bicubic2d.vec, torch.ops.aten.upsample_bicubic2d.default):
            monkeypatch.delitem(CONVERTERS, op)
    resize = {
        "scale": lambda x: F.interpolate(x, scale_factor=2, mode="bicubic"),
        "size": lambda x: F.interpolate(x, size=(x.shape[2] * 2, 5), mode="bicubic"),
        "scale-align-corners": lambda x: F.interpolate(x, scale_factor=2.0, mode="bicubic", align_corners=True),
        "down": lambda x: F.interpolate(x, size=(x.shape[2] // 2 + 1, 3), mode="bicubic"),
    }[how]
    module = mk(lambda x: torch.tanh(resize(torch.relu(x))) + 1)
    run = compile_module(module, [torch.randn(1, 2, 6, 7)], ({2: torch.export.Dim("h", min=2, max=32)},))
    if converted:
        assert run.fallbacks == [] and len(run.compiled_partitions) == 1, run.report()
    else:
        assert [f.target for f in run.fallbacks] == ["aten.upsample_bicubic2d.vec"], run.report()
        assert len(run.compiled_partitions) == 2  # the relu before it, the tanh and add after it (sized 2 * h)
    assert_matches_eager(run, module, [[torch.randn(1, 2, h, 7)] for h in (2, 6, 11)])
