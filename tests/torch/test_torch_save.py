"""CompiledProgram.save: a program that converted whole runs from its file in
a process without PyTorch, on numpy arrays in the torch program's input
order, with the same results; one that did not is refused, naming why."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

torch = pytest.importorskip("torch", minversion="2.5")
transformers = pytest.importorskip("transformers")

import dyngraph.torch as dgt  # noqa: E402
from dyngraph.errors import CompileError  # noqa: E402
from dyngraph.torch.hf import StaticCacheLM, export_static_cache_lm  # noqa: E402
from torchutil import compile_module  # noqa: E402

# runs in a fresh interpreter: load the artifact, prefill, then greedy decoding steps
DECODE_WITHOUT_TORCH = textwrap.dedent("""
    import json, sys
    import numpy as np
    import dyngraph as dg

    path, prompt, steps, out = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    cp = dg.load(path, engine=dg.Engine(num_threads=1))
    ids = np.array([prompt], dtype=np.int64)
    (logits,) = cp(ids, np.arange(len(prompt), dtype=np.int64))
    all_logits, tokens, pos = [logits], [], len(prompt)
    for _ in range(steps):
        tokens.append(int(logits[0, -1].argmax()))
        (logits,) = cp(np.array([[tokens[-1]]], dtype=np.int64), np.array([pos], dtype=np.int64))
        all_logits.append(logits)
        pos += 1
    np.savez(out, *all_logits, tokens=np.array(tokens))
    print(json.dumps({"torch_imported": "torch" in sys.modules,
                      "inputs": [lt.name for lt in cp.get_inputs()]}))
""")


def _decode(run, prompt, steps):
    """The same decoding, in process, through the torch-facing program."""
    logits = run(torch.tensor([prompt]), torch.arange(len(prompt)))
    all_logits, tokens, pos = [logits.numpy().copy()], [], len(prompt)
    for _ in range(steps):
        tokens.append(int(logits[0, -1].argmax()))
        logits = run(torch.tensor([[tokens[-1]]]), torch.tensor([pos]))
        all_logits.append(logits.numpy().copy())
        pos += 1
    return all_logits, tokens


def test_a_saved_tiny_llama_decodes_in_a_process_without_torch(tmp_path):
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    lm = StaticCacheLM(transformers.LlamaForCausalLM(cfg).eval(), max_cache_len=64).eval()
    run = dgt.compile(export_static_cache_lm(lm), engine=1)
    assert run.fallbacks == [], run.report()
    path = tmp_path / "tiny_llama.dg"
    run.save(path)
    prompt = torch.randint(0, 128, (7,)).tolist()
    want_logits, want_tokens = _decode(run, prompt, 6)
    with torch.no_grad():
        eager, _ = _decode(lm, prompt, 6)
    np.testing.assert_allclose(want_logits[0], eager[0], atol=1e-4, rtol=0)

    out = tmp_path / "decoded.npz"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.run([sys.executable, "-c", DECODE_WITHOUT_TORCH, str(path), json.dumps(prompt), "6", str(out)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    assert info["torch_imported"] is False
    assert info["inputs"] == ["input_ids", "positions"]  # the torch program's order
    got = np.load(out)
    assert got["tokens"].tolist() == want_tokens
    for k, w in enumerate(want_logits):  # the prefill's logits, then every decode step's
        np.testing.assert_array_equal(got[f"arr_{k}"], w)


class TwoInputs(torch.nn.Module):
    """The first input is used last; the first output is computed last."""

    def forward(self, a, b):
        s = b * 3
        return a + s.sum(), s


def test_saved_ports_follow_the_programs_input_and_output_order(tmp_path):
    import dyngraph as dg

    n = torch.export.Dim("n", min=1, max=32)
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    run = compile_module(TwoInputs(), (a, b), ({0: n}, {0: n}))
    run.save(tmp_path / "two.dg")
    cp = dg.load(tmp_path / "two.dg", engine=dg.Engine(num_threads=1))
    a, b = torch.randn(6, 8), torch.randn(6, 8)
    got = cp(a.numpy(), b.numpy())
    want = run(a, b)
    assert len(got) == 2
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w.numpy())


def test_a_program_with_nodes_in_pytorch_is_not_saved(tmp_path):
    class Cumprod(torch.nn.Module):  # no converter: runs in PyTorch
        def forward(self, x):
            return torch.cumprod(x, 0) + 1

    run = compile_module(Cumprod(), (torch.randn(4, 8),), None)
    assert run.fallbacks
    with pytest.raises(dgt.NotSavableError, match="cumprod") as e:
        run.save(tmp_path / "x.dg")
    assert isinstance(e.value, CompileError) and "run in PyTorch" in str(e.value)
    assert not (tmp_path / "x.dg").exists()


def test_a_program_that_ignores_an_input_is_not_saved(tmp_path):
    class IgnoresB(torch.nn.Module):
        def forward(self, a, b):
            return torch.sin(a)

    run = compile_module(IgnoresB(), (torch.randn(4), torch.randn(4)), None)
    with pytest.raises(dgt.NotSavableError, match="not used by the program: b"):
        run.save(tmp_path / "x.dg")
