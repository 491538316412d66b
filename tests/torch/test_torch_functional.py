"""The exported program made functional without torch's retrace
(dyngraph.torch.functional): in-place ops become their functional overloads
and mutation outputs; what that rewrite cannot keep equivalent (a write
through a view, a view read across a write) is refused, and compile
decomposes with torch instead. Either way the compiled program equals eager."""

import collections
import sys

import pytest

torch = pytest.importorskip("torch", minversion="2.5")
transformers = pytest.importorskip("transformers")

import dyngraph.torch as dgt  # noqa: E402
from dyngraph.torch.functional import functional_program  # noqa: E402
from dyngraph.torch.hf import StaticCacheLM, export_static_cache_lm  # noqa: E402
from torch.export.graph_signature import OutputKind  # noqa: E402
from torchutil import compile_module  # noqa: E402

aten = torch.ops.aten


def _export(module, args):
    with torch.no_grad():
        return torch.export.export(module.eval(), args, strict=False)


def _targets(ep):
    return {n.target for n in ep.graph.nodes if n.op == "call_function"}


def _mutable(ep):
    return [t for t in _targets(ep) if isinstance(t, torch._ops.OpOverload) and t._schema.is_mutable]


class WriteThroughView(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("buf", torch.zeros(8, 4))

    def forward(self, x):
        self.buf[:2] = x  # slice, then copy_ into the slice
        return self.buf * 2


class ViewReadAfterWrite(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("buf", torch.ones(8, 4))

    def forward(self, x):
        flat = self.buf.view(-1)  # a view taken before the write, read after it
        self.buf.add_(x)
        return flat * 3


class IntermediateInPlace(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        y.add_(1)
        return y.relu_()


class InputInPlace(torch.nn.Module):
    def forward(self, x):
        x.mul_(2)
        return x + 1


@pytest.mark.parametrize("module", [WriteThroughView(), ViewReadAfterWrite()])
def test_writes_through_aliases_are_left_to_torchs_decomposition(module):
    x = torch.randn(2, 4) if isinstance(module, WriteThroughView) else torch.randn(8, 4)
    ep = _export(module, (x,))
    assert _mutable(ep)  # the rewrite would have had something to do
    assert functional_program(ep) is None
    run = compile_module(module, (x,), None)
    ref = type(module)().eval()
    for _ in range(2):  # the buffer carries over between calls, like eager's
        x = torch.randn_like(x)
        with torch.no_grad():
            want = ref(x)
        torch.testing.assert_close(run(x), want)


def test_in_place_ops_on_intermediates_become_functional():
    x = torch.randn(3, 5)
    ep = _export(IntermediateInPlace(), (x,))
    fp = functional_program(ep)
    assert fp is not None and fp is not ep
    assert _mutable(fp) == [] and aten.add.Tensor in _targets(fp) and aten.relu.default in _targets(fp)
    assert [s.kind for s in fp.graph_signature.output_specs] == [OutputKind.USER_OUTPUT]
    run = dgt.compile(fp, engine=1)
    x = torch.randn(3, 5)
    torch.testing.assert_close(run(x), IntermediateInPlace()(x.clone()))


def test_an_input_written_in_place_is_a_user_input_mutation():
    x = torch.randn(4)
    fp = functional_program(_export(InputInPlace(), (x.clone(),)))
    assert fp is not None
    specs = fp.graph_signature.output_specs
    assert [s.kind for s in specs] == [OutputKind.USER_INPUT_MUTATION, OutputKind.USER_OUTPUT]
    run = compile_module(InputInPlace(), (x.clone(),), None)
    a, b = x.clone(), x.clone()
    with torch.no_grad():
        want = InputInPlace()(b)
    torch.testing.assert_close(run(a), want)
    torch.testing.assert_close(a, b)  # the input was written like eager's


def test_a_static_cache_llama_converts_as_exported_like_decomposed(monkeypatch):
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    lm = StaticCacheLM(transformers.LlamaForCausalLM(cfg).eval(), max_cache_len=32).eval()
    ep = export_static_cache_lm(lm)
    assert aten.index_copy_.default in _targets(ep)
    fp = functional_program(ep)
    assert fp is not None and _mutable(fp) == []
    assert aten.transpose.int in _targets(fp)  # not decomposed
    mutations = sorted(s.target for s in fp.graph_signature.output_specs if s.kind is OutputKind.BUFFER_MUTATION)
    assert mutations == sorted(f"{kv}_cache_{i}" for i in range(2) for kv in "kv")

    fast = dgt.compile(ep, engine=1)
    assert aten.transpose.int in _targets(fast.exported_program)
    monkeypatch.setattr(sys.modules["dyngraph.torch"], "functional_program", lambda ep: None)
    slow = dgt.compile(ep, engine=1)
    assert aten.transpose.int not in _targets(slow.exported_program)  # decomposed by torch
    kinds = [collections.Counter(op.kind for op in r._converted.ops) for r in (fast, slow)]
    assert kinds[0] == kinds[1]
    ids = torch.randint(0, 128, (1, 6))
    for r in (fast, slow):
        r.reset()
    for pos in (torch.arange(6), torch.tensor([6]), torch.tensor([7])):
        x = ids[:, : len(pos)]
        assert torch.equal(fast(x, pos), slow(x, pos))


class ChainedWrites(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("buf", torch.ones(4))

    def forward(self, x):
        a = self.buf.add_(x)  # `a` is the buffer itself: the next write is traced as a write to `a`
        self.buf.mul_(2)
        return a + 0


def test_chained_writes_to_a_buffer_become_one_mutation():
    x = torch.randn(4)
    fp = functional_program(_export(ChainedWrites(), (x,)))
    assert fp is not None and _mutable(fp) == []
    assert [s.target for s in fp.graph_signature.output_specs if s.kind is OutputKind.BUFFER_MUTATION] == ["buf"]
    run = compile_module(ChainedWrites(), (x,), None)
    ref = ChainedWrites().eval()
    for _ in range(2):
        x = torch.randn(4)
        with torch.no_grad():
            want = ref(x)
        torch.testing.assert_close(run(x), want)


class DropoutAndMask(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = torch.nn.Dropout(0.1)

    def forward(self, x):
        keep = (x > -1) & (x < 1)
        return self.drop(x).masked_fill(keep, 0.0)


def test_ops_as_exported_convert_without_the_decomposition():
    x = torch.randn(3, 8) * 2
    ep = _export(DropoutAndMask(), (x,))
    assert {aten.dropout.default, aten.__and__.Tensor} <= _targets(ep)
    assert functional_program(ep) is ep  # nothing to rewrite
    run = dgt.compile(ep, engine=1)
    assert run.fallbacks == [] and aten.dropout.default in _targets(run.exported_program)
    x = torch.randn(3, 8) * 2
    with torch.no_grad():
        want = DropoutAndMask().eval()(x)
    torch.testing.assert_close(run(x), want)


def test_multihead_attention_converts_as_exported():
    """The packed projection's rank-5 transpose (as exported, transpose.int) is read as a rank-4 one."""
    torch.manual_seed(0)
    m = torch.nn.MultiheadAttention(32, 4, batch_first=True).eval()
    seq = torch.export.Dim("seq", min=1, max=64)
    run = compile_module(_Attend(m), (torch.randn(2, 5, 32),), ({1: seq},))
    assert run.fallbacks == [] and aten.transpose.int in _targets(run.exported_program)  # not decomposed
    x = torch.randn(2, 9, 32)
    with torch.no_grad():
        torch.testing.assert_close(run(x), m(x, x, x, need_weights=False)[0], atol=1e-5, rtol=1e-5)


class _Attend(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        return self.m(x, x, x, need_weights=False)[0]
