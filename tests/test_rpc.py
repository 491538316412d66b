"""Devices of ggml RPC servers: the 4-layer test decoder split over the local
CPU and two `dyngraph rpc-server` processes on 127.0.0.1, compared with one
CPU; a server that is killed, paused or never there gives a DeviceError
naming its endpoint in bounded time, and the rest of the process goes on."""

from __future__ import annotations

import gc
import select
import subprocess
import time

import numpy as np
import pytest

import dyngraph as dg
from dyngraph.models.llama import LlamaConfig, LlamaRunner, random_weights
from rpcutil import RpcServer, free_port, popen_options, server_command, server_env

pytestmark = pytest.mark.skipif(
    not dg._backend.has_rpc(),
    reason="this ggml was built without its RPC backend (DYNGRAPH_GGML=wheel): the default build has it",
)

CFG = LlamaConfig(layers=4, max_seq=64)
PROMPT = [1, 5, 7, 9, 11]


@pytest.fixture(scope="module")
def weights():
    return random_weights(CFG, seed=3)


@pytest.fixture(scope="module")
def reference(weights):
    return LlamaRunner(CFG, weights, engine=dg.Engine("cpu", num_threads=1))


@pytest.fixture(scope="module")
def servers():
    s = [RpcServer(), RpcServer()]
    yield s
    gc.collect()  # the engines' connections close before their servers stop
    for x in s:
        x.stop()


def rpc_engine(*servers, timeout=20, **kw):
    """An engine on the servers whose every call is bounded (20 s: a hung server fails the test, not CI)."""
    return dg.Engine("rpc", endpoints=[s.endpoint for s in servers], num_threads=1, timeout=timeout,
                     connect_timeout=5, **kw)


def split_runner(weights, servers, **options):
    rpc = rpc_engine(*servers)
    return LlamaRunner(CFG, weights, engine=[dg.Engine("cpu", num_threads=1), rpc], **options)


# -- the command ------------------------------------------------------------------

def test_rpc_server_refuses_a_bad_port_and_a_busy_one():
    bad = subprocess.run(server_command() + ["--port", "70000"], env=server_env(), capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode == 2 and "outside [1, 65535]" in bad.stderr
    busy = RpcServer()
    try:
        r = subprocess.run(server_command() + ["--port", str(busy.port)], env=server_env(), capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 1 and f"cannot listen on 127.0.0.1:{busy.port}" in r.stderr
    finally:
        busy.stop()


def test_rpc_server_says_it_has_no_authentication():
    port = free_port()
    p = subprocess.Popen(server_command() + ["--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True, **popen_options())
    try:
        ready, _, _ = select.select([p.stderr], [], [], 30)  # (a server that says nothing fails, never hangs)
        assert ready, "rpc-server printed nothing within 30 s"
        line = p.stderr.readline()
        assert "no authentication" in line and f"127.0.0.1:{port}" in line
    finally:
        p.kill()
        p.wait(timeout=30)


# -- devices ---------------------------------------------------------------------

def test_devices_list_the_cpu_and_connected_servers(servers):
    rpc = rpc_engine(servers[0])
    devs = dg.Engine.devices()
    cpus = [d for d in devs if d.kind == "cpu"]  # (a GPU build lists its GPUs too)
    assert len(cpus) == 1 and cpus[0].memory_total > 0
    mine = [d for d in devs if d.kind == "rpc" and d.endpoint == servers[0].endpoint]
    assert len(mine) == 1 and mine[0].memory_total > 0 and mine[0].description == "connected"
    assert rpc.device_names[0].endswith(f"({servers[0].endpoint})")


def test_engine_kinds_and_arguments():
    assert dg.Engine("cpu", num_threads=2).num_threads == 2
    assert dg.Engine(dg.Engine.CPU).kind is dg.EngineKind.CPU
    with pytest.raises(ValueError, match="unknown engine kind"):
        dg.Engine("tpu")
    with pytest.raises(ValueError, match="endpoints"):
        dg.Engine("rpc")
    with pytest.raises(ValueError, match="timeout"):
        dg.Engine("rpc", endpoints=["127.0.0.1:1"], timeout=0)
    for bad in ("nonsense", "127.0.0.1:99999", "127.0.0.1:", ":50052", "host with space:1"):
        with pytest.raises(dg.DeviceError, match="endpoint"):
            dg.Engine("rpc", endpoints=[bad])


# -- a model over three devices ------------------------------------------------------

def test_decoder_split_over_cpu_and_two_servers_matches_one_cpu(weights, reference, servers):
    split = split_runner(weights, servers)
    placement = split.cp.placement()
    assert len(placement) == 3 and placement[-1][0] == "CPU (host)"  # (the scheduler's order: the CPU last)
    assert {p[0].split("(")[1].rstrip(")") for p in placement[:2]} == {s.endpoint for s in servers}
    assert all(ops > 0 and nbytes > 0 for _, ops, nbytes in placement), placement
    reference.reset()
    want = reference.generate(PROMPT, 12)
    got = split.generate(PROMPT, 12)
    assert got == want
    # logits, not only their argmax
    reference.reset()
    split.reset()
    np.testing.assert_allclose(split.forward(PROMPT), reference.forward(PROMPT), rtol=1e-4, atol=1e-4)
    # decode, then prefill again on the same KV cache (state on the devices, updated in place)
    for tok in (3, 8, 2):
        np.testing.assert_allclose(split.forward([tok]), reference.forward([tok]), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(split.forward([4, 6, 1]), reference.forward([4, 6, 1]), rtol=1e-4, atol=1e-4)
    info = split.cp.cache_info()
    assert info.entries == 3  # prefill of 5, decode, prefill of 3: a graph each, reused
    assert info.device_copies == 3 * info.executions  # tokens and positions in, logits out
    sent, received = split.cp.remote_traffic()
    assert sent > 0 and received > 0


def test_split_state_is_readable_writable_and_resets(weights, reference, servers):
    split = split_runner(weights, servers)
    reference.reset()
    split.reset()
    split.forward(PROMPT)
    reference.forward(PROMPT)
    state_ids = [t.id for t in split.cp.program.tensors if t.property is dg.Property.STATE]
    assert len(state_ids) == 2 * CFG.layers
    for tid in state_ids:
        np.testing.assert_allclose(split.cp.read_state(tid), reference.cp.read_state(tid), rtol=1e-5, atol=1e-5)
    last = state_ids[-1]
    split.cp.write_state(last, np.full(split.cp.read_state(last).shape, 0.5, np.float32))
    assert np.all(split.cp.read_state(last) == 0.5)
    split.reset()
    assert all(not split.cp.read_state(t).any() for t in state_ids)


def test_saved_partition_loads_onto_the_servers(weights, reference, servers, tmp_path):
    split = split_runner(weights, servers)
    split.forward(PROMPT)  # state on the devices: the file holds the initial state, not this
    path = tmp_path / "decoder.dg"
    split.cp.save(path)
    rpc = rpc_engine(*servers)
    for engine, kw in ((rpc, {}), ([dg.Engine("cpu", num_threads=1), rpc], {"split": "memory", "shares": [1, 2, 1]})):
        cp = dg.load(path, engine=engine, **kw)
        placement = cp.placement()
        assert sum(1 for dev, ops, _ in placement if dev.startswith("RPC") and ops > 0) == 2, placement
        reference.reset()
        cp.reset_state()
        (got,) = cp(np.array(PROMPT, np.int64), np.arange(len(PROMPT), dtype=np.int64))
        np.testing.assert_allclose(got, reference.forward(PROMPT), rtol=1e-4, atol=1e-4)
    with pytest.raises(dg.CompileError, match="shares must be 2 positive numbers"):
        dg.load(path, engine=rpc, shares=[1])


def test_split_by_memory_matches_one_cpu(weights, reference, servers):
    split = split_runner(weights, servers, split="memory", shares=[1, 2, 1])
    assert all(ops > 0 for _, ops, _ in split.cp.placement())
    reference.reset()
    assert split.generate(PROMPT, 8) == reference.generate(PROMPT, 8)


def test_one_server_runs_everything_with_portable_ops(weights, reference, servers):
    rpc = rpc_engine(servers[0])
    remote = LlamaRunner(CFG, weights, engine=rpc)
    (dev, ops, _), (cpu, cpu_ops, _) = remote.cp.placement()
    assert dev.startswith("RPC") and ops == len(remote.cp.program.ops) and cpu_ops == 0
    reference.reset()
    assert remote.generate(PROMPT, 8) == reference.generate(PROMPT, 8)


@pytest.mark.parametrize("weight_type", ["f16", "q8_0", "q4_0"])
def test_stored_weight_types_on_a_server(weights, servers, weight_type):
    """f16 and quantized weights go to the server in their type; its ggml computes with them. The
    logits differ from the CPU's (our integer kernels there, f16 weights converted to f32) by less than
    the quantization's own error (the CPU's against f32; f16: twice it, since the server's ggml rounds
    the activations to f16 too, where the CPU's product keeps them f32), and greedy decoding gives the
    same tokens."""
    cpu = LlamaRunner(CFG, weights, engine=dg.Engine("cpu", num_threads=1), weight_type=weight_type)
    remote = LlamaRunner(CFG, weights, engine=rpc_engine(servers[0]), weight_type=weight_type)
    f32 = LlamaRunner(CFG, weights, engine=dg.Engine("cpu", num_threads=1)).forward(PROMPT)
    want = cpu.forward(PROMPT)
    quant_error = np.abs(want - f32).max()
    assert 0 < quant_error < 5
    assert np.abs(remote.forward(PROMPT) - want).max() <= quant_error * (2 if weight_type == "f16" else 1)
    cpu.reset()
    remote.reset()
    assert remote.generate(PROMPT, 8) == cpu.generate(PROMPT, 8)


@pytest.mark.parametrize("rows", [1, 3, 17])
def test_matmul_on_a_server_matches_numpy(servers, rows, rng):
    n = dg.Dim("n", min=1, max=64)
    x = dg.LogicalTensor(0, dg.f32, [n, 32])
    w = dg.LogicalTensor(1, dg.f32, [32, 24], property=dg.CONSTANT)
    y = dg.LogicalTensor(2, dg.f32, [dg.UNKNOWN_DIM, dg.UNKNOWN_DIM])
    g = dg.Graph()
    g.add_op(dg.Op(0, dg.OpKind.MatMul, [x, w], [y]))
    g.finalize()
    wv = rng.standard_normal((32, 24)).astype(np.float32)
    cp = g.get_partitions()[0].compile([x, w], [y], rpc_engine(servers[1]), constants={1: wv})
    xv = rng.standard_normal((rows, 32)).astype(np.float32)
    (out,) = cp(xv)
    np.testing.assert_allclose(out, xv.astype(np.float64) @ wv, rtol=1e-5, atol=1e-5)


def test_outputs_that_overlap_an_input_or_each_other_are_computed_aside_as_on_the_cpu(servers):
    """y = x @ w1 written over x's own buffer, then y and z = y @ w2 both over one buffer: an output that
    overlaps an input or an earlier output is computed aside (staged) on a server as on the host CPU,
    and the buffers end holding what the CPU's do (the later output last)."""
    n = dg.Dim("n", min=1, max=8)
    x = dg.LogicalTensor(0, dg.f32, [n, 4])
    w1, w2 = (dg.LogicalTensor(i, dg.f32, [4, 4], property=dg.CONSTANT) for i in (1, 2))
    y, z = (dg.LogicalTensor(i, dg.f32, [dg.UNKNOWN_DIM, dg.UNKNOWN_DIM]) for i in (3, 4))
    g = dg.Graph()
    g.add_op(dg.Op(0, dg.OpKind.MatMul, [x, w1], [y]))
    g.add_op(dg.Op(1, dg.OpKind.MatMul, [y, w2], [z]))
    g.finalize()
    rng = np.random.default_rng(5)
    ws = {1: rng.standard_normal((4, 4)).astype(np.float32), 2: rng.standard_normal((4, 4)).astype(np.float32)}
    xv = rng.standard_normal((3, 4)).astype(np.float32)
    results = []
    for engine in (dg.Engine("cpu", num_threads=1), rpc_engine(servers[0])):
        cp = g.get_partitions()[0].compile([x, w1, w2], [y, z], engine, constants=ws)
        yl, zl = (t.with_shape([3, 4]) for t in cp.get_outputs())
        stream, tx = dg.Stream(engine), lambda a: dg.Tensor(x.with_shape([3, 4]), engine, a)
        over_x, other = xv.copy(), np.zeros((3, 4), np.float32)
        cp.execute(stream, [tx(over_x)], [dg.Tensor(yl, engine, over_x), dg.Tensor(zl, engine, other)])
        assert cp.cache_info().staged_outputs == 1  # y: over its input
        shared = np.zeros((3, 4), np.float32)
        cp.execute(stream, [tx(xv)], [dg.Tensor(yl, engine, shared), dg.Tensor(zl, engine, shared)])
        assert cp.cache_info().staged_outputs == 2  # z: over y
        np.testing.assert_allclose(over_x, xv.astype(np.float64) @ ws[1], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(other, xv.astype(np.float64) @ ws[1] @ ws[2], rtol=1e-4, atol=1e-4)
        np.testing.assert_array_equal(shared, other)
        results.append((over_x, other, shared))
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def erf_between_matmuls():
    """x @ w1 -> Erf (one of dyngraph's CPU kernels, no portable lowering) -> @ w2."""
    n = dg.Dim("n", min=1, max=64)
    x = dg.LogicalTensor(0, dg.f32, [n, 8])
    w1 = dg.LogicalTensor(1, dg.f32, [8, 16], property=dg.CONSTANT)
    w2 = dg.LogicalTensor(2, dg.f32, [16, 4], property=dg.CONSTANT)
    h, a, y = (dg.LogicalTensor(i, dg.f32, [dg.UNKNOWN_DIM, dg.UNKNOWN_DIM]) for i in (3, 4, 5))
    g = dg.Graph()
    g.add_op(dg.Op(0, dg.OpKind.MatMul, [x, w1], [h]))
    g.add_op(dg.Op(1, dg.OpKind.Erf, [h], [a], name="act"))
    g.add_op(dg.Op(2, dg.OpKind.MatMul, [a, w2], [y]))
    g.finalize()
    rng = np.random.default_rng(7)
    ws = {1: rng.standard_normal((8, 16)).astype(np.float32), 2: rng.standard_normal((16, 4)).astype(np.float32)}
    return g.get_partitions()[0], [x, w1, w2], [y], ws


def test_an_op_without_a_portable_lowering_is_a_compile_error_with_strict_placement(servers):
    part, ins, outs, ws = erf_between_matmuls()
    cp = part.compile(ins, outs, rpc_engine(servers[0]), constants=ws, placement="strict")
    with pytest.raises(dg.CompileError, match=r"op 'act' \(Erf\) cannot run on device RPC\d+ \(127\.0\.0\.1"):
        cp(np.ones((2, 8), np.float32))
    with pytest.raises(dg.CompileError, match=r"placement must be one of \['auto', 'strict'\], got 'lax'"):
        part.compile(ins, outs, rpc_engine(servers[0]), constants=ws, placement="lax")


@pytest.mark.parametrize("rows", [1, 5, 33])
def test_an_op_the_device_cannot_run_runs_on_the_host_cpu(servers, rows):
    """placement="auto" (the default): the Erf runs on the host CPU between two products on the
    server; the scheduler copies the activations there and back; the results are the CPU's."""
    part, ins, outs, ws = erf_between_matmuls()
    cp = part.compile(ins, outs, rpc_engine(servers[0]), constants=ws)
    ref = part.compile(ins, outs, dg.Engine("cpu", num_threads=1), constants=ws)
    xv = np.random.default_rng(rows).standard_normal((rows, 8)).astype(np.float32)
    (out,) = cp(xv)
    np.testing.assert_allclose(out, ref(xv)[0], rtol=1e-5, atol=1e-5)
    info = cp.cache_info()
    assert info.host_fallback_ops == 1 and info.graph_splits == 3  # server, host CPU, server
    (dev, dev_ops, _), (cpu, cpu_ops, _) = cp.placement()
    assert dev.startswith("RPC") and cpu == "CPU (host)" and (dev_ops, cpu_ops) == (2, 1)


def test_too_many_devices_for_the_layers_is_a_compile_error(weights, servers):
    one_layer = LlamaConfig(layers=1, max_seq=16)
    rpc = rpc_engine(*servers)
    with pytest.raises(dg.CompileError, match="fewer than the 3 devices"):
        LlamaRunner(one_layer, random_weights(one_layer), engine=[dg.Engine("cpu"), rpc])
    with pytest.raises(dg.CompileError, match="shares must be 3 positive numbers"):
        LlamaRunner(CFG, weights, engine=[dg.Engine("cpu"), rpc], shares=[1, 0, 1])


# -- faults ----------------------------------------------------------------------------

def test_unreachable_server_is_a_device_error_at_once():
    port = free_port()  # nothing listens there
    t0 = time.monotonic()
    with pytest.raises(dg.DeviceError, match=f"cannot reach RPC server 127.0.0.1:{port}"):
        dg.Engine("rpc", endpoints=[f"127.0.0.1:{port}"], connect_timeout=2)
    assert time.monotonic() - t0 < 10


def test_server_killed_mid_run_is_a_device_error_and_the_rest_goes_on(weights, reference):
    a, b = RpcServer(), RpcServer()
    try:
        split = split_runner(weights, [a, b])
        split.forward(PROMPT)
        b.kill()
        t0 = time.monotonic()
        with pytest.raises(dg.DeviceError, match=f"RPC server {b.endpoint} closed the connection"):
            split.forward([3])
        assert time.monotonic() - t0 < 20
        with pytest.raises(dg.DeviceError, match="cannot run any more"):
            split.forward([3])
        # the host CPU path and the other server still work
        reference.reset()
        cpu = LlamaRunner(CFG, weights, engine=dg.Engine("cpu", num_threads=1))
        assert cpu.generate(PROMPT, 4) == reference.generate(PROMPT, 4)
        reference.reset()
        only_a = LlamaRunner(CFG, weights, engine=rpc_engine(a))
        assert only_a.generate(PROMPT, 4) == reference.generate(PROMPT, 4)
        # the lost server, started again on its port, is a new connection
        b.start()
        again = LlamaRunner(CFG, weights, engine=rpc_engine(b))
        reference.reset()
        assert again.generate(PROMPT, 4) == reference.generate(PROMPT, 4)
        state = [t.id for t in split.cp.program.tensors if t.property is dg.Property.STATE][-1]
        with pytest.raises(dg.DeviceError, match="cannot run any more"):
            split.cp.read_state(state)
    finally:
        gc.collect()
        a.stop()
        b.stop()


def test_server_that_stops_answering_times_out(weights):
    a = RpcServer()
    try:
        rpc = rpc_engine(a, timeout=2)
        remote = LlamaRunner(CFG, weights, engine=rpc)
        remote.forward(PROMPT)
        a.pause()
        t0 = time.monotonic()
        with pytest.raises(dg.DeviceError, match=f"RPC server {a.endpoint} did not answer within 2"):
            remote.forward([3])
        assert time.monotonic() - t0 < 12
    finally:
        gc.collect()
        a.stop()
