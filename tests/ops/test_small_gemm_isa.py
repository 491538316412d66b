"""f32 products of 2-7 rows run a kernel compiled for several instruction sets
(AVX-512VL, AVX2 + FMA, baseline), picked at run time for the CPU. Each
variant that this CPU can run is checked against numpy, in a fresh process
that asks for it with DYNGRAPH_KERNEL_ISA."""

import textwrap

import pytest

from subproc import run_python

CHECK = textwrap.dedent("""
    import numpy as np
    import dyngraph as dg

    rng = np.random.default_rng(0)
    e = dg.Engine(dg.Engine.CPU, num_threads=2)
    for k, n in ((64, 40), (37, 19), (256, 1030)):
        x = dg.LogicalTensor(0, dg.f32, [dg.DYNAMIC_DIM, k])
        w = dg.LogicalTensor(1, dg.f32, [k, n], property=dg.CONSTANT)
        y = dg.LogicalTensor(2, dg.f32, [dg.UNKNOWN_DIM, dg.UNKNOWN_DIM])
        g = dg.Graph(dg.Engine.CPU)
        g.add_op(dg.Op(0, dg.OpKind.MatMul, [x, w], [y]))
        g.finalize()
        (p,) = g.get_partitions()
        W = rng.standard_normal((k, n)).astype(np.float32)
        cp = p.compile([x, w], [y], e, constants={1: W})
        for m in range(1, 9):
            a = rng.standard_normal((m, k)).astype(np.float32)
            (out,) = cp(a)
            ref = a.astype(np.float64) @ W.astype(np.float64)
            err = np.abs(out - ref).max() / np.abs(ref).max()
            assert err < 1e-5, (k, n, m, err)
    print("ok")
""")


@pytest.mark.parametrize("isa", ["generic", "avx2", "avx512"])
def test_small_row_kernel_variant_matches_numpy(isa):
    r = run_python(CHECK, env_vars={"DYNGRAPH_KERNEL_ISA": isa})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"
