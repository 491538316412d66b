"""A kernel of ours that throws while ggml's threads run it (a scratch
allocation that finds no memory) is an ExecutionError naming the op, not the
end of the process; the partition computes correctly on the next call.
DYNGRAPH_TEST_KERNEL_FAULT=n makes the n-th guarded kernel call of the
process throw std::bad_alloc (backend/kernel_guard.cpp)."""

import pytest

from subproc import run_python
from test_hostile_files import env_with_the_tests_dir

CHILD = """
import numpy as np, dyngraph as dg
from oputil import compile_op

rng = np.random.default_rng(0)
w = rng.standard_normal((8, 6, 3, 3)).astype(np.float32)
attrs = dict(strides=[1, 1], dilations=[1, 1], pads_begin=[1, 1], pads_end=[1, 1], groups=1,
             data_format="NCX", weights_format="OIX")
cp = compile_op(dg.OpKind.Convolution, [[dg.DYNAMIC_DIM, 6, 8, 8], list(w.shape)], attrs=attrs, constants={1: w},
                engine=dg.Engine(dg.Engine.CPU, num_threads=THREADS))
x = rng.standard_normal((2, 6, 8, 8)).astype(np.float32)
xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
ref = sum(np.einsum("oi,nihw->nohw", w[:, :, kh, kw], xp[:, :, kh:kh + 8, kw:kw + 8])
          for kh in range(3) for kw in range(3))
for call in range(4):
    try:
        (y,) = cp(x)
    except dg.ExecutionError as e:
        print("refused", str(e))
        continue
    err = np.abs(y - ref).max()
    print("ran", "ok" if err < 1e-4 else f"wrong by {err}")
"""


@pytest.mark.parametrize("threads,fault", [(1, 1), (1, 3), (2, 1), (2, 4)])
def test_a_kernel_that_throws_is_an_execution_error_and_the_next_call_is_right(threads, fault):
    r = run_python(CHILD.replace("THREADS", str(threads)), timeout=120,
                   env_vars=dict(env_with_the_tests_dir(), DYNGRAPH_TEST_KERNEL_FAULT=str(fault)))
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert len(lines) == 4, r.stdout
    refused = [ln for ln in lines if ln.startswith("refused")]
    assert len(refused) == 1, lines  # the one execution that held the faulty call, no other
    assert "Convolution" in refused[0] and "its kernel failed while computing" in refused[0], refused[0]
    assert "std::bad_alloc" in refused[0] and "outputs are not valid" in refused[0], refused[0]
    assert all(ln == "ran ok" for ln in lines if ln not in refused), lines

