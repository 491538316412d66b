"""A 4-layer transformer-style decoder stack (tests/benchmarks/stack.py),
compiled once with a dynamic sequence length: it matches a float64 numpy
forward of the same model at every length, and its graph cache builds one
ggml graph per distinct length."""

import numpy as np
import pytest

from benchmarks.stack import build_stack, causal_mask, run

# float32 through 4 layers (contractions of up to 1024 terms) against a
# float64 reference: the observed max error is about 1e-6 on outputs of
# magnitude up to ~4, so 2e-5 leaves a 10-20x margin and still catches any
# real error: no mask gives ~3, a 1% scale error 1e-2, a 0.1% norm weight error 3e-3.
ATOL = RTOL = 2e-5


@pytest.fixture(scope="module")
def stack():
    return build_stack()


@pytest.fixture(scope="module")
def compiled(stack, engine):
    return stack.compile(engine)


@pytest.mark.parametrize("n", [1, 7, 64, 127])
def test_stack_matches_numpy_float64(stack, compiled, n):
    x, mask = stack.make_inputs(n, seed=n)
    out = run(compiled, x, mask)
    assert out.shape == (n, stack.hidden)
    np.testing.assert_allclose(out, stack.reference(x, mask), rtol=RTOL, atol=ATOL)


def test_stack_is_one_partition_of_the_expected_ops(stack):
    kinds = [op.kind.name for op in stack.partition.get_ops()]
    assert len(kinds) == 4 * 24 + 1
    assert kinds.count("MatMul") == 4 * 8 and kinds.count("SoftMax") == 4 and kinds.count("RMSNorm") == 4 * 2 + 1


def test_cache_builds_one_graph_per_distinct_seq(stack, engine):
    cp = stack.compile(engine)
    seen = set()
    for k, n in enumerate([7, 1, 7, 64, 127, 1, 64, 7, 127]):
        x, mask = stack.make_inputs(n, seed=k)
        run(cp, x, mask)
        seen.add(n)
        info = cp.cache_info()
        assert info.builds == len(seen), (n, info)
        assert info.entries == len(seen)
        assert info.executions == k + 1
    assert info.evictions == 0
    # each run is infer_outputs (a build on a miss) + execute (a hit)
    assert info.hits == 2 * info.executions - info.builds


def test_execute_without_infer_outputs_builds_once(stack, engine):
    cp = stack.compile(engine)
    x, mask = stack.make_inputs(5)
    for _ in range(3):
        (out,) = cp(x, mask)
    info = cp.cache_info()
    assert (info.builds, info.entries, info.executions) == (1, 1, 3)
    np.testing.assert_allclose(out, stack.reference(x, mask), rtol=RTOL, atol=ATOL)


def test_capacity_one_rebuilds_on_every_switch(stack, engine):
    """What the rebuild benchmark relies on: alternating lengths with a cache
    of one graph builds on every execution."""
    cp = stack.compile(engine, cache_capacity=1)
    inputs = {n: stack.make_inputs(n) for n in (7, 8)}
    for k in range(6):
        run(cp, *inputs[7 if k % 2 == 0 else 8])
    info = cp.cache_info()
    assert (info.builds, info.evictions, info.entries) == (6, 5, 1)


def test_padded_static_stack_agrees_with_dynamic_on_the_real_rows(stack, compiled, engine):
    """The padded benchmark case computes the same thing: a 7-row input padded
    to 127 under a causal mask gives the 7-row result in its first rows."""
    static = build_stack(seq=127)
    cp = static.compile(engine)
    x, mask = stack.make_inputs(7)
    padded = np.zeros((127, stack.hidden), np.float32)
    padded[:7] = x
    out = run(cp, padded, causal_mask(127))
    np.testing.assert_allclose(out[:7], run(compiled, x, mask), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(out[:7], stack.reference(x, mask), rtol=RTOL, atol=ATOL)


# The stack keeps V as [heads, seq, head_dim] and multiplies P @ V. The
# other common layout, V transposed once to [heads, head_dim, seq] and read
# with transpose_b (2 ggml nodes fewer per layer), aborts the process at
# seq 1: the permuted view has a size-1 innermost dimension, ggml_is_contiguous
# lets it through LowerCtx::cont without a copy, and ggml_mul_mat asserts
# !ggml_is_transposed on it. Run in a subprocess because it aborts.
TRANSPOSED_V_AT_SEQ_1 = """
import os
os.environ["GGML_NO_BACKTRACE"] = "1"  # ggml's abort would otherwise run gdb for a backtrace
import numpy as np, dyngraph as dg
seq = dg.Dim("seq", min=1, max=16)
v = dg.LogicalTensor(0, dg.f32, [seq, 4, 8], name="v")
p = dg.LogicalTensor(1, dg.f32, [4, 3, seq], name="p")
vt = dg.LogicalTensor(2, dg.f32, None)
y = dg.LogicalTensor(3, dg.f32, None, name="y")
g = dg.Graph(dg.Engine.CPU)
g.add_op(dg.Op(0, dg.OpKind.StaticTranspose, [v], [vt], {"order": [1, 2, 0]}))  # [4, 8, seq]
g.add_op(dg.Op(1, dg.OpKind.MatMul, [p, vt], [y], {"transpose_b": True}))      # [4, 3, 8]
g.finalize()
(part,) = g.get_partitions()
cp = part.compile([v, p], [y], dg.Engine(dg.Engine.CPU, num_threads=1))
rng = np.random.default_rng(0)
for n in (2, 1):
    V = rng.standard_normal((n, 4, 8), dtype=np.float32)
    P = rng.standard_normal((4, 3, n), dtype=np.float32)
    (out,) = cp(V, P)
    np.testing.assert_allclose(out, P @ V.transpose(1, 0, 2), rtol=1e-5, atol=1e-5)
"""


def test_transposed_v_layout_at_seq_1():
    """A transpose whose innermost dimension has size 1 is still copied before MatMul
    (ggml counts such a view as contiguous, but its matmul aborts on it)."""
    from subproc import run_python

    r = run_python(TRANSPOSED_V_AT_SEQ_1)
    assert r.returncode == 0, r.stderr[-2000:]
