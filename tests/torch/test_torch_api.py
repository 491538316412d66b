"""dyngraph.torch's entry point and call path: options, input and output
structures, zero-copy inputs, typed errors, and ``import dyngraph`` staying
free of torch."""

import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", minversion="2.5")

import dyngraph as dg  # noqa: E402
import dyngraph.torch as dgt  # noqa: E402
from torchutil import assert_matches_eager, compile_module, mk  # noqa: E402


def n_dim():
    return torch.export.Dim("n", min=1, max=64)


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.up = torch.nn.Linear(64, 128)
        self.down = torch.nn.Linear(128, 32)

    def forward(self, x):
        return self.down(torch.nn.functional.silu(self.up(x)))


def test_import_dyngraph_does_not_import_torch():
    code = "import sys, dyngraph; assert 'torch' not in sys.modules, 'torch was imported'"
    subprocess.run([sys.executable, "-c", code], check=True, env=_env())


def _env():
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return env


def test_an_exported_program_compiles_like_a_module():
    module = MLP().eval()
    ep = torch.export.export(module, (torch.randn(4, 64),), dynamic_shapes=({0: n_dim()},))
    run = dgt.compile(ep, engine=1)
    assert_matches_eager(run, module, [[torch.randn(n, 64)] for n in (1, 9, 64)])


@pytest.mark.parametrize("weight_type, tol", [("f16", 2e-3), ("q8_0", 2e-2), ("q4_0", 2e-1)])
def test_weight_types_store_matmul_weights_and_stay_close(weight_type, tol):
    # the output error grows with the storage's rounding: f16 ~1e-3, q8_0 ~1e-2, q4_0 ~1e-1 relative to |y|
    module = MLP().eval()
    run = compile_module(module, [torch.randn(4, 64)], ({0: n_dim()},), weight_type=weight_type)
    x = torch.randn(16, 64)
    with torch.no_grad():
        want = module(x)
    got = run(x)
    assert (got - want).abs().max().item() <= tol * want.abs().max().item()
    info = run.cache_info()[0]
    f32_bytes = sum(p.numel() * 4 for p in module.parameters())
    assert info.constant_bytes < f32_bytes


def test_engine_threads_and_cache_capacity_are_options():
    run = compile_module(MLP(), [torch.randn(4, 64)], ({0: n_dim()},), engine=2, cache_capacity=2)
    assert run.engine.num_threads == 2
    for n in (1, 2, 3, 4):
        run(torch.randn(n, 64))
    info = run.cache_info()[0]
    assert info.capacity == 2 and info.entries == 2 and info.evictions == 2


def test_thread_counts_share_the_process_engine_of_that_count():
    """engine=None and engine=N use Engine.shared: one thread pool per thread count per process,
    so two programs do not keep each other's cores spinning; a user's own Engine stays its own."""
    m, x = MLP().eval(), torch.randn(3, 64)
    p2, q2 = dgt.compile(m, (x,), engine=2), dgt.compile(m, (x,), engine=2)
    assert p2.engine is q2.engine is dg.Engine.shared(2)
    assert dgt.compile(m, (x,)).engine is dg.Engine.shared()
    own = dg.Engine(num_threads=2)
    assert dgt.compile(m, (x,), engine=own).engine is own
    assert_matches_eager(p2, m, [(x,), (torch.randn(3, 64),)])


def test_contiguous_float_inputs_are_used_in_place():
    run = compile_module(MLP(), [torch.randn(4, 64)], ({0: n_dim()},))
    for n in (3, 5):
        run(torch.randn(n, 64))
    assert run.cache_info()[0].staged_inputs == 0


def test_non_contiguous_inputs_give_the_same_result():
    module = MLP().eval()
    run = compile_module(module, [torch.randn(4, 64)], ({0: n_dim()},))
    x = torch.randn(64, 10).t()
    assert_matches_eager(run, module, [[x]])


def test_output_structure_is_the_modules():
    module = mk(lambda x, y: {"sum": x + y, "pair": (x * 2, [y - 1, x.shape[0]])})
    run = compile_module(module, [torch.randn(3, 4), torch.randn(3, 4)], ({0: n_dim()}, {0: n_dim()}))
    out = run(torch.randn(5, 4), torch.randn(5, 4))
    assert set(out) == {"sum", "pair"} and out["pair"][1][1] == 5
    assert_matches_eager(run, module, [[torch.randn(2, 4), torch.randn(2, 4)]])


def test_keyword_inputs_in_any_order():
    class KW(torch.nn.Module):
        def forward(self, a, b):
            return a - b

    n = n_dim()
    run = dgt.compile(KW(), kwargs={"a": torch.randn(3, 4), "b": torch.randn(3, 4)},
                      dynamic_shapes={"a": {0: n}, "b": {0: n}}, engine=1)
    a, b = torch.randn(6, 4), torch.randn(6, 4)
    torch.testing.assert_close(run(b=b, a=a), a - b)
    with pytest.raises(dg.ExecutionError, match="missing"):
        run(a=a)
    with pytest.raises(dg.ExecutionError, match="unexpected"):
        run(a=a, b=b, c=a)


def test_wrong_input_structures_raise_execution_errors():
    run = compile_module(MLP(), [torch.randn(4, 64)], ({0: n_dim()},))
    with pytest.raises(dg.ExecutionError):
        run(torch.randn(4, 64), torch.randn(4, 64))
    with pytest.raises(dg.DyngraphError):
        run("not a tensor")


def test_a_non_tensor_input_must_keep_its_exported_value():
    class Flag(torch.nn.Module):
        def forward(self, x, scale: float):
            return x * scale

    run = dgt.compile(Flag(), (torch.randn(3, 4), 2.0), dynamic_shapes=({0: n_dim()}, None), engine=1)
    torch.testing.assert_close(run(torch.ones(2, 4), 2.0), torch.full((2, 4), 2.0))
    with pytest.raises(dg.ExecutionError, match="exported"):
        run(torch.ones(2, 4), 3.0)


def test_a_mutated_user_input_is_written_back():
    class Inc(torch.nn.Module):
        def forward(self, x):
            x.add_(1)
            return x * 2

    run = dgt.compile(Inc(), (torch.zeros(3, 4),), dynamic_shapes=({0: n_dim()},), engine=1)
    x = torch.zeros(5, 4)
    torch.testing.assert_close(run(x), torch.full((5, 4), 2.0))
    torch.testing.assert_close(x, torch.ones(5, 4))


def test_outputs_that_are_inputs_or_constants():
    class Pass(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("c", torch.arange(3.0))

        def forward(self, x):
            return x, self.c, x + 1

    run = dgt.compile(Pass(), (torch.randn(2, 3),), dynamic_shapes=({0: n_dim()},), engine=1)
    x = torch.randn(4, 3)
    a, c, b = run(x)
    assert a is x
    torch.testing.assert_close(c, torch.arange(3.0))
    torch.testing.assert_close(b, x + 1)


def test_compile_rejects_what_is_not_a_program():
    with pytest.raises(dg.CompileError):
        dgt.compile(lambda x: x)
    with pytest.raises(dg.CompileError, match="engine"):
        dgt.compile(MLP(), (torch.randn(4, 64),), engine="fast")


def test_a_module_is_exported_without_stack_traces_unless_asked():
    """dgt.compile's export leaves out each node's Python stack (dyngraph never reads it; an eighth of a real
    model's export), and leaves torch's setting as it was; dyngraph.torch.export records them when asked."""
    from torch.fx import config as fx_config

    from dyngraph.torch.export import export

    def model_traces(ep):  # nodes whose stack trace reaches this file's MLP.forward
        return sum("forward" in (n.meta.get("stack_trace") or "") for n in ep.graph.nodes if n.op == "call_function")

    before = fx_config.do_not_emit_stack_traces
    x, dims = torch.randn(4, 64), ({0: n_dim()},)
    run = dgt.compile(MLP(), (x,), dynamic_shapes=dims, engine=1)
    assert fx_config.do_not_emit_stack_traces == before
    assert model_traces(run.exported_program) == 0
    assert model_traces(export(MLP(), (x,), dynamic_shapes=dims, stack_traces=True)) >= 3  # linear, silu, linear
    assert_matches_eager(run, MLP().eval(), [[torch.randn(n, 64)] for n in (1, 9)])


def test_export_failures_are_compile_errors():
    class DataDependent(torch.nn.Module):
        def forward(self, x):
            return x[: int(x.sum())]  # a size that depends on the data

    with pytest.raises(dg.CompileError, match="export"):
        dgt.compile(DataDependent(), (torch.ones(4),), dynamic_shapes=({0: n_dim()},))
