"""Buffers a program mutates (BUFFER_MUTATION): held as dyngraph STATE and
updated in place when the writes allow it (index_copy, slice and whole-buffer
assignment), else kept by the runner and copied back. Either way, a sequence
of calls gives eager's outputs and leaves eager's buffer values; reset()
restores the values the buffers had at compile."""

import pytest

torch = pytest.importorskip("torch", minversion="2.5")

import dyngraph as dg  # noqa: E402
from torchutil import compile_module  # noqa: E402

H, S, D = 2, 16, 4


class IndexCopyCache(torch.nn.Module):
    """A KV-cache-like buffer written at token positions, then read whole."""

    def __init__(self):
        super().__init__()
        self.register_buffer("cache", torch.randn(1, H, S, D))

    def forward(self, x, pos):
        self.cache.index_copy_(2, pos, x)
        return self.cache.sum(2) * 2


class SliceAssign(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("buf", torch.zeros(S, D))

    def forward(self, x):
        self.buf[: x.shape[0]] = x
        return self.buf + 1


class WholeAssign(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("last", torch.zeros(4, D))

    def forward(self, x):
        y = x.sum(0, keepdim=True).expand(4, D) + 1
        self.last.copy_(y)
        return x * 2


class ReadThenOverwrite(torch.nn.Module):
    """An exponential moving average: the old value is read after the update is computed."""

    def __init__(self):
        super().__init__()
        self.register_buffer("avg", torch.zeros(D))

    def forward(self, x):
        old = self.avg.clone()
        self.avg.mul_(0.5).add_(x.mean(0) * 0.5)
        return x - old


def steps(module, run, inputs):
    for x in inputs:
        with torch.no_grad():
            want = module(*x)
        got = run(*x)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def seq(n):
    return torch.export.Dim("n", min=1, max=S)


def test_index_copy_updates_a_state_in_place_across_calls_and_shapes():
    eager, traced = IndexCopyCache(), IndexCopyCache()
    traced.load_state_dict(eager.state_dict())
    x, pos = torch.randn(1, H, 3, D), torch.arange(3)
    run = compile_module(traced, [x, pos], ({2: seq(0)}, {0: seq(0)}))
    assert run.fallbacks == [] and list(run._converted.states) == ["cache"]
    calls = [(torch.randn(1, H, 5, D), torch.arange(5))] + [(torch.randn(1, H, 1, D), torch.tensor([p])) for p in (5, 6, 9)]
    steps(eager, run, calls)
    torch.testing.assert_close(run.buffer("cache"), eager.cache)


def test_reset_restores_the_buffers_initial_values():
    module = IndexCopyCache()
    initial = module.cache.clone()
    run = compile_module(module, [torch.randn(1, H, 3, D), torch.arange(3)], ({2: seq(0)}, {0: seq(0)}))
    run(torch.randn(1, H, 2, D), torch.tensor([0, 7]))
    assert not torch.equal(run.buffer("cache"), initial)
    run.reset()
    torch.testing.assert_close(run.buffer("cache"), initial)
    # and the compiled module's own buffer was never touched
    torch.testing.assert_close(module.cache, initial)


def test_slice_assignment_writes_a_slice_of_the_state():
    eager, traced = SliceAssign(), SliceAssign()
    run = compile_module(traced, [torch.randn(3, D)], ({0: seq(0)},))
    assert run.fallbacks == [] and list(run._converted.states) == ["buf"]
    steps(eager, run, [(torch.randn(n, D),) for n in (5, 2, 16)])
    torch.testing.assert_close(run.buffer("buf"), eager.buf)


def test_whole_buffer_assignment_is_a_copy_into_the_state():
    eager, traced = WholeAssign(), WholeAssign()
    run = compile_module(traced, [torch.randn(3, D)], ({0: seq(0)},))
    assert run.fallbacks == [] and list(run._converted.states) == ["last"]
    steps(eager, run, [(torch.randn(n, D),) for n in (5, 1)])
    torch.testing.assert_close(run.buffer("last"), eager.last)


def test_a_buffer_read_before_its_overwrite_is_kept_by_the_runner():
    eager, traced = ReadThenOverwrite(), ReadThenOverwrite()
    run = compile_module(traced, [torch.randn(3, D)], ({0: seq(0)},))
    assert run._converted.states == {} and [w[0] for w in run._converted.buffer_writes] == ["avg"]
    steps(eager, run, [(torch.randn(n, D),) for n in (5, 1, 7)])
    torch.testing.assert_close(run.buffer("avg"), eager.avg)
    run.reset()
    assert not run.buffer("avg").any()


def test_buffer_names_a_mutated_buffer():
    run = compile_module(SliceAssign(), [torch.randn(3, D)], ({0: seq(0)},))
    with pytest.raises(KeyError):
        run.buffer("nope")


def test_out_of_range_positions_raise():
    run = compile_module(IndexCopyCache(), [torch.randn(1, H, 3, D), torch.arange(3)], ({2: seq(0)}, {0: seq(0)}))
    with pytest.raises(dg.DyngraphError):
        run(torch.randn(1, H, 1, D), torch.tensor([S]))
