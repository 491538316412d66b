"""The process's shared CPU engines (Engine.shared): compiles given no engine, or
dyngraph.torch given a thread count, share one engine (one ggml thread pool) per
thread count, so a process's programs do not keep each other's cores spinning.
Programs on one engine compute one at a time; a forked child makes its own.
(dyngraph.torch's thread counts: tests/torch/test_torch_api.py.)"""

import threading

import numpy as np
import pytest

import dyngraph as dg
from dyngraph.engine import default_num_threads
from subproc import run_python


def add_partition(engine=None):
    b = dg.GraphBuilder()
    n = dg.Dim("n")
    x = b.input("x", dg.f32, [n, 64])
    y = b.input("y", dg.f32, [n, 64])
    b.output(b.op(dg.OpKind.Add, [x, y], {}))
    return b.compile(engine)


def test_one_engine_per_thread_count():
    assert dg.Engine.shared(2) is dg.Engine.shared(2)
    assert dg.Engine.shared(1) is not dg.Engine.shared(2)
    assert dg.Engine.shared(3).num_threads == 3
    assert dg.Engine.shared() is dg.Engine.shared(default_num_threads())
    # a user's own engine stays its own
    assert dg.Engine(num_threads=2) is not dg.Engine.shared(2)


@pytest.mark.parametrize("bad", [0, -1, 2.0, True, "2"])
def test_bad_thread_counts_are_refused(bad):
    with pytest.raises(ValueError, match="num_threads"):
        dg.Engine.shared(bad)


def test_compiles_without_an_engine_share_one():
    a, b = add_partition(), add_partition()
    assert a.engine is b.engine is dg.Engine.shared()
    own = dg.Engine(num_threads=2)
    assert add_partition(own).engine is own


def test_programs_on_the_shared_engine_run_from_several_threads():
    parts = [add_partition(dg.Engine.shared(2)) for _ in range(3)]
    errors = []

    def work(k):
        cp, rng = parts[k % len(parts)], np.random.default_rng(k)
        try:
            for i in range(40):
                n = 1 + (k * 7 + i) % 33
                x = rng.standard_normal((n, 64)).astype(np.float32)
                y = rng.standard_normal((n, 64)).astype(np.float32)
                (out,) = cp(x, y)
                np.testing.assert_array_equal(out, x + y)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a thread is still waiting for the shared engine"
    assert errors == []


FORK = r"""
import gc, os, signal, subprocess, sys, time, weakref
import numpy as np
import dyngraph as dg

def add_partition(engine):
    b = dg.GraphBuilder()
    x = b.input("x", dg.f32, [dg.Dim("n"), 64])
    b.output(b.op(dg.OpKind.Add, [x, x], {}))
    return b.compile(engine)

x = np.arange(5 * 64, dtype=np.float32).reshape(5, 64)
parent = dg.Engine.shared(2)
own, single = add_partition(dg.Engine(num_threads=2)), add_partition(dg.Engine(num_threads=1))
for cp in (add_partition(parent), own, single):
    cp(x)  # the parent's pools now have their worker threads
del cp
own_engine = weakref.ref(own.engine)
time.sleep(1.0)  # the workers stop spinning and wait on their condition variable (freeing it then waits for them)
# subprocess with a preexec_fn runs the fork handlers in its child: that must not free (and wait for) a pool
subprocess.run([sys.executable, "-c", "pass"], preexec_fn=lambda: None, timeout=20, check=True)
pid = os.fork()
if pid == 0:
    # the child has the parent's pools but not their threads
    signal.alarm(30)  # a child that hangs (the bug) dies instead of spinning on
    code = 0
    if dg.Engine.shared(2) is parent:
        code |= 1
    (out,) = add_partition(dg.Engine.shared(2))(x)
    if not np.array_equal(out, x + x):
        code |= 2
    try:
        own(x)
        code |= 4
    except dg.ExecutionError as e:
        if "fork" not in str(e) or "Engine.shared()" not in str(e):
            code |= 8
    (out,) = single(x)  # one thread: no workers to miss
    if not np.array_equal(out, x + x):
        code |= 16
    del own  # the parent's engine, freed in the child: it must not wait for the pool's threads
    gc.collect()
    if own_engine() is not None:
        code |= 32
    os._exit(code)
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status))
"""


def test_a_forked_child_gets_its_own_engine_and_an_error_for_the_parents():
    """A forked child computing on a pool of the parent's would wait forever for threads it lacks:
    Engine.shared() makes the child its own, and a partition compiled in the parent for a pool of
    several threads raises ExecutionError there instead of hanging."""
    r = run_python(FORK, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "child 0" in r.stdout, r.stdout + r.stderr
