"""ggml's own log: warnings and errors only by default (ggml would print a
debug line per repacked weight); DYNGRAPH_GGML_LOG=debug shows everything."""

import os

import pytest

from oputil import ggml_has_q4_0_layout
from subproc import run_python

CODE = """
import numpy as np
import dyngraph as dg
x = dg.LogicalTensor(0, dg.f32, [4, 64])
w = dg.LogicalTensor(1, dg.f32, [64, 64], property=dg.Property.CONSTANT)
y = dg.LogicalTensor(2, dg.f32, [4, 64])
g = dg.Graph(dg.Engine.CPU)
g.add_op(dg.Op(0, dg.OpKind.MatMul, [x, w], [y]))
g.finalize()
cp = g.get_partitions()[0].compile([x, w], [y], dg.Engine(dg.Engine.CPU, num_threads=1),
                                   constants={1: np.ones((64, 64), np.float32)}, weight_type="q4_0")
print(cp(np.ones((4, 64), np.float32))[0][0, 0], cp.cache_info().repacked_bytes > 0)
"""


@pytest.mark.parametrize("level, shown", [(None, False), ("debug", True)])
def test_ggml_debug_messages_follow_the_threshold(level, shown, monkeypatch):
    if level is None:
        monkeypatch.delenv("DYNGRAPH_GGML_LOG", raising=False)
    else:
        monkeypatch.setenv("DYNGRAPH_GGML_LOG", level)
    if not ggml_has_q4_0_layout():
        pytest.skip("ggml-cpu has no repacked q4_0 layout for this CPU: it would log nothing")
    p = run_python(CODE, env_vars={"DYNGRAPH_KERNEL_ISA": "generic"})  # q4_0 repacked (not with our kernels)
    assert p.returncode == 0, p.stderr
    value, repacked = p.stdout.split()
    assert abs(float(value) - 64.0) < 0.05  # q4_0 weights, q8_0 activations
    if repacked != "True":
        pytest.fail("ggml did not repack the q4_0 weight on this CPU: nothing would be logged")
    assert ("repack" in p.stderr) is shown, p.stderr
    assert os.environ.get("DYNGRAPH_GGML_LOG") == level
