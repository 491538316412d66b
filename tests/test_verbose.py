"""DYNGRAPH_VERBOSE=1: one comma-separated line per compile, graph build,
eviction and execute on stderr (docs/guide/verbose.md); nothing when off.
The Python layer logs through the "dyngraph" logger."""

import logging
import os
import subprocess
import sys

import numpy as np

import dyngraph as dg

SCRIPT = r"""
import numpy as np, dyngraph as dg
batch = dg.Dim("batch", max=64)
x = dg.LogicalTensor(0, dg.f32, [batch, 8])
w = dg.LogicalTensor(1, dg.f32, [8, 4], property=dg.CONSTANT)
y = dg.LogicalTensor(2, dg.f32, None)
g = dg.Graph()
g.add_op(dg.Op(0, dg.OpKind.MatMul, [x, w], [y]))
g.finalize()
(p,) = g.get_partitions()
eng = dg.Engine(num_threads=1)
cp = p.compile([x, w], [y], eng, constants={1: np.ones((8, 4), np.float32)}, cache_capacity=2)
for n in (1, 3, 1, 5):
    cp(np.ones((n, 8), np.float32))                 # infer_outputs builds, execute hits
xl = dg.LogicalTensor(0, dg.f32, [2, 8])
(yl,) = cp.infer_outputs([xl], build=False)         # shapes only: execute builds
cp.execute(dg.Stream(eng), [dg.Tensor(xl, eng, np.ones((2, 8), np.float32))],
           [dg.Tensor(yl, eng, np.empty((2, 4), np.float32))])
"""


def _run(env_value):
    env = dict(os.environ)
    env.pop("DYNGRAPH_VERBOSE", None)
    if env_value is not None:
        env["DYNGRAPH_VERBOSE"] = env_value
    if os.environ.get("DYNGRAPH_DEV") == "1":
        env["PYTHONPATH"] = os.path.join(os.path.dirname(__file__), "..", "api") + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    return [line.split(",") for line in r.stderr.splitlines() if line.startswith("dyngraph_verbose,")]


def test_verbose_lines_say_what_happened():
    lines = _run("1")
    by = {}
    for f in lines:
        by.setdefault(f[1], []).append(f[2:])
    assert by["info"][0][0] == "ggml" and by["info"][1][0] == "kernels"
    (compile_,) = by["compile"]
    assert compile_[:6] == ["cp0", "1", "1", "1", "batch", str(8 * 4 * 4)]  # ops, inputs, outputs, symbols, bytes
    assert float(compile_[6]) > 0
    builds = by["build"]
    assert [b[:2] for b in builds] == [["cp0", "batch=1"], ["cp0", "batch=3"], ["cp0", "batch=5"], ["cp0", "batch=2"]]
    assert all(int(b[2]) > 0 and float(b[3]) >= 0 for b in builds)  # nodes, ms
    # capacity 2: batch=5 evicts 3 (1 was used again), batch=2 evicts 1
    assert [e[:2] for e in by["evict"]] == [["cp0", "batch=3"], ["cp0", "batch=1"]]
    assert all(e[2] == "1" for e in by["evict"])  # graphs left in the cache
    execs = by["exec"]
    assert [(e[1], e[2], e[3]) for e in execs] == [
        ("batch=1", "hit", "1x8"), ("batch=3", "hit", "3x8"), ("batch=1", "hit", "1x8"), ("batch=5", "hit", "5x8"),
        ("batch=2", "miss", "2x8")]
    assert all(float(e[4]) > 0 for e in execs)
    # the order of events: each build before the execute that uses it
    kinds = [f[1] for f in lines if f[1] != "info"]
    assert kinds == ["compile", "build", "exec", "build", "exec", "exec", "evict", "build", "exec", "evict", "build",
                     "exec"]


def test_verbose_is_off_by_default_and_with_0():
    assert _run(None) == []
    assert _run("0") == []


def test_verbose_can_be_turned_on_and_off_at_run_time(capfd):
    from dyngraph import _backend

    assert _backend.verbose_level() in (0, 1)
    before = _backend.verbose_level()
    try:
        dg.set_verbose(1)
        x = dg.LogicalTensor(0, dg.f32, [dg.DYNAMIC_DIM])
        g = dg.Graph()
        g.add_op(dg.Op(0, dg.OpKind.Exp, [x], [dg.LogicalTensor(1, dg.f32, None)]))
        g.finalize()
        (p,) = g.get_partitions()
        cp = p.compile([x], p.get_output_ports(), dg.Engine(num_threads=1))
        cp(np.zeros(3, np.float32))
        dg.set_verbose(0)
        cp(np.zeros(4, np.float32))
    finally:
        _backend.set_verbose(before)
    err = capfd.readouterr().err
    assert "dyngraph_verbose,compile," in err and ",t0.dim0=3," in err
    assert "t0.dim0=4" not in err


def test_python_layer_logs_under_the_dyngraph_logger(caplog):
    x = dg.LogicalTensor(0, dg.f32, [4])
    g = dg.Graph()
    g.add_op(dg.Op(0, dg.OpKind.ReLU, [x], [dg.LogicalTensor(1, dg.f32, None)]))
    g.finalize()
    (p,) = g.get_partitions()
    with caplog.at_level(logging.INFO, logger="dyngraph"):
        p.compile([x], p.get_output_ports(), dg.Engine(num_threads=1))
    (rec,) = [r for r in caplog.records if r.name.startswith("dyngraph")]
    assert rec.name == "dyngraph.compiler" and "1 ops" in rec.getMessage() and "ms" in rec.getMessage()
