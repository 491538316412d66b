"""DYNGRAPH_VERBOSE: a header, then one comma-separated line per execute
(level 1), and per compile, graph build and eviction (level 2), on stderr
(docs/guide/verbose.md); nothing when off, a warning for a bad value.
The Python layer logs through the "dyngraph" logger."""

import logging
import os
import subprocess
import sys

import numpy as np
import pytest

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


def _run_raw(env_value):
    env = dict(os.environ)
    env.pop("DYNGRAPH_VERBOSE", None)
    if env_value is not None:
        env["DYNGRAPH_VERBOSE"] = env_value
    if os.environ.get("DYNGRAPH_DEV") == "1":
        env["PYTHONPATH"] = os.path.join(os.path.dirname(__file__), "..", "api") + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stderr


def _run(env_value):
    return [line.split(",") for line in _run_raw(env_value).splitlines() if line.startswith("dyngraph_verbose,")]


TEMPLATE = "template:event,engine,partition,binding,status,ops,tensors,time_ms"


def _header(lines):
    info = [f[2:] for f in lines if f[1] == "info"]
    assert [i[0] for i in info] == ["dyngraph", "ggml", "cpu", "verbose", "template:event"]
    assert info[0][1] == dg.__version__ and info[1][1] == _ggml_version()
    assert info[2][1] == "isa:" + _kernel_isa() and info[2][2].startswith("features:")
    assert ",".join(info[4]) == TEMPLATE
    # every event line has the template's fields: event + 7
    assert all(len(f) == 2 + len(TEMPLATE.split(",")) - 1 for f in lines if f[1] != "info"), lines
    return int(info[3][1].removeprefix("level:"))


def _ggml_version():
    from dyngraph import _backend

    return _backend.ggml_version()


def _kernel_isa():
    from dyngraph import _backend

    return _backend.kernel_isa()


# (binding, status, tensors) of each execute: the first execute of each graph
# says miss, also when cp(...) built the graph just before, on its build line
EXECS = [("batch=1", "miss", "in0:f32:strided:1x8 out0:f32:strided:1x4"),
         ("batch=3", "miss", "in0:f32:strided:3x8 out0:f32:strided:3x4"),
         ("batch=1", "hit", "in0:f32:strided:1x8 out0:f32:strided:1x4"),
         ("batch=5", "miss", "in0:f32:strided:5x8 out0:f32:strided:5x4"),
         ("batch=2", "miss", "in0:f32:strided:2x8 out0:f32:strided:2x4")]


def _check_exec(lines):
    execs = [f[2:] for f in lines if f[1] == "exec"]
    assert [(e[2], e[3], e[5]) for e in execs] == EXECS
    assert all(e[0] == "cpu" and e[1] == "cp0" and e[4] == "MatMul:1" and float(e[6]) > 0 for e in execs)


def test_level_1_prints_the_header_and_each_execute():
    lines = _run("1")
    assert _header(lines) == 1
    assert [f[1] for f in lines if f[1] != "info"] == ["exec"] * 5
    _check_exec(lines)
    assert [f[1] for f in _run("exec")] == [f[1] for f in lines]


def test_level_2_adds_compile_build_and_evict_with_shapes_and_dtypes():
    lines = _run("2")
    assert _header(lines) == 2
    by = {}
    for f in lines:
        by.setdefault(f[1], []).append(f[2:])
    (c,) = by["compile"]
    assert c[:6] == ["cpu", "cp0", "batch", f"constants:{8 * 4 * 4}", "MatMul:1",
                     "in0:f32:strided:batchx8 out0:f32:strided:batchx4"]
    assert float(c[6]) > 0
    builds = by["build"]
    assert [(b[2], b[5]) for b in builds] == [
        (f"batch={n}", f"in0:f32:strided:{n}x8 out0:f32:strided:{n}x4") for n in (1, 3, 5, 2)]
    assert all(b[3].startswith("nodes:") and int(b[3][6:]) > 0 and float(b[6]) >= 0 for b in builds)
    # capacity 2: batch=5 evicts 3 (1 was used again), batch=2 evicts 1; one graph left each time
    assert [(e[2], e[3]) for e in by["evict"]] == [("batch=3", "left:1"), ("batch=1", "left:1")]
    _check_exec(lines)
    # the order of events: each build before the execute that uses it
    kinds = [f[1] for f in lines if f[1] != "info"]
    assert kinds == ["compile", "build", "exec", "build", "exec", "exec", "evict", "build", "exec", "evict", "build",
                     "exec"]
    # a level above 2 is 2; "all" names it
    assert [f[1] for f in _run("7")] == [f[1] for f in lines]
    assert [f[1] for f in _run("all")] == [f[1] for f in lines]


def test_verbose_is_off_by_default_and_with_0():
    assert _run(None) == []
    assert _run("0") == []
    assert _run("none") == []
    assert _run("") == []  # (set but empty: unset)


@pytest.mark.parametrize("value", ["yes", "-1", "1.5", "2 "])
def test_an_invalid_value_is_warned_about_and_leaves_verbose_off(value):
    err = _run_raw(value)
    assert "dyngraph_verbose," not in err
    assert "RuntimeWarning" in err and f"DYNGRAPH_VERBOSE='{value}' is not a verbose level" in err


@pytest.mark.parametrize("bad", [-1, "loud", 1.5, None, True])
def test_set_verbose_refuses_what_is_not_a_level(bad):
    from dyngraph import _backend

    before = _backend.verbose_level()
    with pytest.raises(ValueError):
        dg.set_verbose(bad)
    assert _backend.verbose_level() == before


def test_verbose_can_be_turned_on_and_off_at_run_time(capfd):
    from dyngraph import _backend

    assert _backend.verbose_level() in (0, 1)
    before = _backend.verbose_level()
    try:
        dg.set_verbose(2)
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
    assert "dyngraph_verbose,compile,cpu," in err and ",t0.dim0=3,miss," in err
    assert "dyngraph_verbose,info,template:event," in err
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
