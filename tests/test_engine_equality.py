"""Interchangeable engines (issue 20): oneDNN asks a stream and tensors for the
partition's device and context, not the same engine object. dyngraph's engines
are equal when their kind, devices and thread count are; a stream or tensor of
one serves partitions compiled for the other. A partition loaded without an
engine (``dg.load(path)``) runs with any CPU engine's stream. A real mismatch
is an ExecutionError naming both engines."""

import numpy as np
import pytest

import dyngraph as dg
from rpcutil import RpcServer


def relu_partition(engine):
    b = dg.GraphBuilder()
    x = b.input("x", dg.f32, [dg.Dim("n"), 4])
    b.output(b.op(dg.OpKind.ReLU, [x], {}))
    return b.compile(engine)


def double_partition(engine):
    # x + x: ggml's own op (ReLU's lowering is one of our CPU kernels, which RPC devices do not run)
    b = dg.GraphBuilder()
    x = b.input("x", dg.f32, [dg.Dim("n"), 4])
    b.output(b.op(dg.OpKind.Add, [x, x], {}))
    return b.compile(engine)


def execute(cp, stream_engine, tensor_engine, a):
    """The explicit API: tensors of `tensor_engine`, a stream of `stream_engine`."""
    (lt_in,) = cp.get_inputs()
    ins = [dg.Tensor(lt_in.with_shape(list(a.shape)), tensor_engine, a)]
    (lt_out,) = cp.infer_outputs(ins)
    out = np.full(lt_out.shape, np.nan, np.float32)
    cp.execute(dg.Stream(stream_engine), ins, [dg.Tensor(lt_out, tensor_engine, out)])
    return out


A = np.array([[-1.0, 2.0, -3.0, 4.0], [5.0, -6.0, 7.0, -8.0]], np.float32)


def test_cpu_engines_of_the_same_threads_are_equal():
    a, b, c = dg.Engine(dg.Engine.CPU, num_threads=2), dg.Engine("cpu", num_threads=2), dg.Engine(num_threads=3)
    assert a == b and hash(a) == hash(b) and not (a != b)
    assert a != c and not (a == c)
    assert a != "cpu" and a != None  # noqa: E711
    assert dg.Engine() == dg.Engine()  # the default thread count
    assert len({a, b, c}) == 2


def test_a_partition_runs_with_a_stream_and_tensors_of_an_equal_engine():
    cp = relu_partition(dg.Engine(num_threads=2))
    other = dg.Engine(num_threads=2)
    np.testing.assert_array_equal(execute(cp, other, other, A), np.maximum(A, 0))
    np.testing.assert_array_equal(execute(cp, cp.engine, other, A), np.maximum(A, 0))
    np.testing.assert_array_equal(execute(cp, other, cp.engine, A), np.maximum(A, 0))


def test_the_old_spelling_still_works():
    e = dg.Engine(dg.Engine.CPU, num_threads=1)
    cp = relu_partition(e)
    np.testing.assert_array_equal(execute(cp, e, e, A), np.maximum(A, 0))
    np.testing.assert_array_equal(execute(cp, cp.engine, cp.engine, A), np.maximum(A, 0))


def test_a_stream_of_other_threads_names_both_engines():
    cp = relu_partition(dg.Engine(num_threads=1))
    other = dg.Engine(num_threads=2)
    with pytest.raises(dg.ExecutionError, match=r"Engine\(CPU, num_threads=1\).*Stream of Engine\(CPU, num_threads=2\)"):
        execute(cp, other, cp.engine, A)
    # tensors of an engine of other threads: refused by the backend, naming both
    with pytest.raises(dg.ExecutionError, match=r"another engine: a CPU engine \(2 threads\), the partition's is a CPU "
                                                r"engine \(1 thread\)"):
        execute(cp, cp.engine, other, A)


def test_a_loaded_partition_runs_with_a_stream_of_a_new_cpu_engine(tmp_path):
    path = tmp_path / "relu.dgp"
    relu_partition(dg.Engine(num_threads=1)).save(path)
    cp = dg.load(path)
    # the spelling: a stream (and tensors) of a CPU engine made after load
    e = dg.Engine(dg.Engine.CPU)
    np.testing.assert_array_equal(execute(cp, e, e, A), np.maximum(A, 0))
    # any CPU engine's, whatever its threads: the partition moves to it and computes on its threads
    for n in (1, 3, 1):
        e = dg.Engine(num_threads=n)
        np.testing.assert_array_equal(execute(cp, e, e, A[:1]), np.maximum(A[:1], 0))
        assert cp.engine is e
    np.testing.assert_array_equal(cp(A)[0], np.maximum(A, 0))
    # the old spelling: its own engine
    np.testing.assert_array_equal(execute(cp, cp.engine, cp.engine, A), np.maximum(A, 0))


def test_a_partition_loaded_for_an_engine_keeps_to_it(tmp_path):
    path = tmp_path / "relu.dgp"
    relu_partition(dg.Engine(num_threads=1)).save(path)
    cp = dg.load(path, dg.Engine(num_threads=1))
    np.testing.assert_array_equal(execute(cp, dg.Engine(num_threads=1), dg.Engine(num_threads=1), A), np.maximum(A, 0))
    with pytest.raises(dg.ExecutionError, match=r"num_threads=1.*num_threads=4"):
        execute(cp, dg.Engine(num_threads=4), cp.engine, A)


@pytest.mark.skipif(not dg._backend.has_rpc(), reason="this ggml was built without its RPC backend (DYNGRAPH_GGML=wheel)")
def test_a_cpu_partition_refuses_an_rpc_engines_stream_naming_both(tmp_path):
    server = RpcServer()
    try:
        rpc = dg.Engine("rpc", endpoints=[server.endpoint], num_threads=1, timeout=20, connect_timeout=5)
        assert rpc != dg.Engine(num_threads=1)
        assert rpc == rpc and rpc != dg.Engine("rpc", endpoints=[server.endpoint], num_threads=2, timeout=20)
        path = tmp_path / "relu.dgp"
        relu_partition(dg.Engine(num_threads=1)).save(path)
        for cp in (relu_partition(dg.Engine(num_threads=1)), dg.load(path)):
            with pytest.raises(dg.ExecutionError, match=r"Engine\(CPU, num_threads=\d+\).*Stream of Engine\(RPC, "
                                                        rf"endpoints=\['{server.endpoint}'\]"):
                execute(cp, rpc, cp.engine, A)
        # and a partition on the RPC device refuses a CPU engine's stream
        cp = double_partition(rpc)
        with pytest.raises(dg.ExecutionError, match=r"Engine\(RPC.*Stream of Engine\(CPU"):
            execute(cp, dg.Engine(num_threads=1), rpc, A)
        np.testing.assert_array_equal(execute(cp, rpc, rpc, A), 2 * A)
        del cp, rpc
    finally:
        import gc

        gc.collect()
        server.stop()
