"""SmolLM2-135M greedy generation from C (examples/c/generate.c, built against the installed
C API, no Python in its process) gives the tokens Python gives with the same saved program
(issue 23)."""

import os

import pytest

torch = pytest.importorskip("torch", minversion="2.5")

import dyngraph.torch as dgt  # noqa: E402
from capi_util import EXAMPLES, build, run  # noqa: E402
from dyngraph.torch.hf import greedy  # noqa: E402


def test_smollm2_greedy_tokens_from_c_equal_pythons(smollm2, tmp_path):
    _, tok, _, ep = smollm2
    prog = dgt.compile(ep, engine=1)
    assert prog.fallbacks == [], prog.report()
    prompt = tok("The capital of France is")["input_ids"]
    want = greedy(prog, prompt, 12)
    assert tok.decode(want).startswith(" Paris")
    path = tmp_path / "smollm2.dg"
    prog.save(path)
    exe = build(os.path.join(EXAMPLES, "generate.c"), str(tmp_path / "generate"))
    out = run(exe, path, 12, *prompt, timeout=300).stdout.split()
    assert [int(t) for t in out] == want
